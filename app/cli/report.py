"""Human-readable tables for the terminal."""

from __future__ import annotations

from app.service.evaluation import EvaluationReport, OnlineReport, RankingMeasures


def print_evaluation(report: EvaluationReport) -> None:
    view = " (text only)" if report.text_only else ""
    print(
        f"corpus {report.corpus}{view}: {report.train_messages} training, "
        f"{report.test_messages} test messages ({report.test_spam} spam, "
        f"{report.test_ham} ham); vocabulary {report.vocabulary} tokens"
    )
    print(
        f"training: {report.train_seconds:.2f} s, "
        f"{report.train_messages_per_second:,.0f} messages/s"
    )
    header = (
        f"{'scorer':<16} {'accuracy':>8} {'precision':>9} {'recall':>7} {'F1':>7} "
        f"{'ROC AUC':>8} {'1-ROCA %':>9} {'FPR':>7} {'FNR':>7} {'unsure':>6} "
        f"{'FNR@0.1%FPR':>11} {'classify/s':>10}"
    )
    print(header)
    print("-" * len(header))
    for s in report.scorers:
        print(
            f"{s.event_model:<16} {s.accuracy:>8.2%} {s.precision:>9.2%} {s.recall:>7.2%} "
            f"{s.f1:>7.4f} {s.roc_auc:>8.5f} {s.one_minus_roca_percent:>9.3f} "
            f"{s.false_positive_rate:>7.2%} {s.false_negative_rate:>7.2%} {s.unsure:>6} "
            f"{s.fnr_at_max_fpr:>11.2%} {s.classify_messages_per_second:>10,.0f}"
        )
    for s in report.scorers:
        print(f"\n{s.event_model}:")
        print_ranking(s.ranking)


def print_online_evaluation(report: OnlineReport) -> None:
    view = " (text only)" if report.text_only else ""
    print(
        f"corpus {report.corpus}{view}, online ({report.order}), {report.event_model}, "
        f"train mode {report.train_mode}: {report.messages} messages ({report.spam} spam, "
        f"{report.ham} ham), {report.trained} trained; vocabulary {report.vocabulary} tokens"
    )
    if report.expiry is not None:
        rules = []
        if report.expiry.max_tokens is not None:
            rules.append(f"at most {report.expiry.max_tokens} tokens")
        if report.expiry.pair_probation is not None:
            rules.append(f"pairs on probation for {report.expiry.pair_probation} messages")
        print(
            f"token expiry: {' and '.join(rules)} after every {report.expiry.every} messages; "
            f"{report.expired_tokens} tokens deleted in all"
        )
    print(
        f"verdicts: {report.false_positives} false positives, {report.false_negatives} false "
        f"negatives, {report.unsure} unsure; {report.messages_per_second:,.0f} messages/s"
    )
    print_ranking(report.ranking)
    print("learning curve (stretches of the stream): first, messages, FP, FN, unsure, 1-ROCA %")
    for point in report.learning_curve:
        print(
            f"  {point.first:>7} {point.messages:>6} {point.false_positives:>4} "
            f"{point.false_negatives:>4} {point.unsure:>5} {point.one_minus_roca_percent:>8.3f}"
        )


def print_ranking(m: RankingMeasures) -> None:
    low, high = m.one_minus_roca_percent_ci95
    print(
        f"  1-ROCA {m.one_minus_roca_percent:.3f} % (95 % bootstrap interval {low:.3f}-{high:.3f})"
    )
    print(f"  FNR at FPR <= 0.1 %: {m.fnr_at_max_fpr:.2%}, at FPR <= 1 %: {m.fnr_at_1pct_fpr:.2%}")
    print(
        f"  FNR at 0 FP {m.fnr_at_0fp:.2%}; at 1 FP {m.fnr_at_1fp:.2%} "
        f"({m.fnr_at_1fp_ci95[0]:.2%}-{m.fnr_at_1fp_ci95[1]:.2%}); at 2 FP {m.fnr_at_2fp:.2%} "
        f"({m.fnr_at_2fp_ci95[0]:.2%}-{m.fnr_at_2fp_ci95[1]:.2%})"
    )
    print(
        "  top-ranked errors (spam log odds): "
        + ", ".join(f"{e.label} {e.id} {e.spam_log_odds:.2f}" for e in m.top_errors)
    )
