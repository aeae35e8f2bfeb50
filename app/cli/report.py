"""Human-readable tables for the terminal."""

from __future__ import annotations

from app.service.evaluation import EvaluationReport


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
