"""How far correlated evidence pushes Robinson-Fisher scores: bounds replayed on online streams.

    python -m bench.lab.overconfidence --views trec07p,spamassassin --limit 4000 \
        --config default --config "rf_max_tokens=150"

Every view is streamed online (each message scored by the counts of the messages before it,
then trained: `spamsift evaluate --online`, train mode `all`): trec07p-early in delivery
order, the others in the fixed shuffle of `bench.accuracy` (seed 0). Robinson-Fisher scores a
message from each of its tokens' (D_spam, D_ham) and the class totals at that moment only, so
the stream is replayed once, recording them, and each configuration is then scored from the
record in a few vectorized passes; `--check` scores the default through
`app.service.evaluation.score_stream` as well and fails unless the two agree.

A configuration is `default` (the served model options) or comma-separated `key=value` over
them: the engine's Robinson-Fisher options (`rf_strength`, `rf_assumed`, `rf_min_dev`,
`rf_max_tokens`, `rf_evidence_cap`; `none` for no cap),
`pairs=off` (word pairs neither stored nor scored) and `pairs=conditional` (a pair's
probability is that of the pair among messages holding its first word: P(pair | first, c),
the one-dependence estimate, in place of P(pair | c)).

`--bogofilter` streams each view through bogofilter as well (`bench.accuracy`'s runner: with
its compiled-in defaults, one `-TT` then one `-s` or `-n` per message, in the same order) and
prints its row.

Prints per view and configuration 1-ROCA %, FNR at FPR <= 0.1 %, the most spam-like ham's
spam log odds, the median spam's, and how many ham outrank the median spam; `--json` keeps
the top-ranked errors' positions and token counts (never the messages themselves).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.bayes.scorers.robinson_fisher import combine
from app.service.evaluation import (
    Example,
    ranking_measures,
    score_stream,
    stream_order,
    tokenize_corpus,
)
from app.service.model_config import ModelConfig
from app.text import load_stop_words
from app.text.core import resolve
from bench import data
from bench.accuracy import Bogofilter, message_file, spamicity_log_odds
from bench.versus_bogofilter import find_bogofilter

VIEWS = {
    "trec07p": ("trec07p-early", False, None),
    "spamassassin": ("spamassassin", False, 0),
    "spamassassin-text": ("spamassassin", True, 0),
    "trec06c-text": ("trec06c-subset", True, 0),
    "sms": ("sms-spam-collection", False, 0),
    "csdmc2010-text": ("csdmc2010", True, 0),
}
_SERVED = ModelConfig()
DEFAULTS: dict[str, Any] = {
    "rf_strength": _SERVED.rf_strength,
    "rf_assumed": _SERVED.rf_assumed,
    "rf_min_dev": _SERVED.rf_min_dev,
    "rf_max_tokens": None,
    "rf_evidence_cap": _SERVED.rf_evidence_cap,
    "pairs": "on",
}


@dataclasses.dataclass
class Replay:
    """Per token occurrence (message, token) the counts before the message was trained."""

    ids: list[str]
    labels: np.ndarray  # bool, spam
    tokens_per_message: np.ndarray
    rows: np.ndarray
    spam_docs: np.ndarray
    ham_docs: np.ndarray
    is_pair: np.ndarray
    first_spam: np.ndarray  # a pair's first word's docs (-1: not a pair)
    first_ham: np.ndarray
    n_spam: np.ndarray  # per message, class totals before it
    n_ham: np.ndarray


def examples_of(view: str, limit: int | None, cache: Path) -> list[Example]:
    corpus, text_only, seed = VIEWS[view]
    path = cache / f"{view}-{limit}.pickle"
    if path.exists():
        with path.open("rb") as file:
            examples: list[Example] = pickle.load(file)
    else:
        messages = data.load(corpus)
        messages = messages[:limit] if seed is None and limit else data.spread(messages, limit)
        examples = tokenize_corpus(messages, core=resolve("auto"), text_only_view=text_only)
        cache.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as file:
            pickle.dump(examples, file)
    return stream_order(examples, seed)


def replay(stream: Sequence[Example], stop_words: frozenset[str]) -> Replay:
    docs: dict[str, list[int]] = {}
    rows: list[int] = []
    spam_docs: list[int] = []
    ham_docs: list[int] = []
    is_pair: list[bool] = []
    first_spam: list[int] = []
    first_ham: list[int] = []
    n_spam, n_ham = [], []
    totals = [0, 0]
    zero = (0, 0)
    for position, example in enumerate(stream):
        n_ham.append(totals[0])
        n_spam.append(totals[1])
        spam = int(example.label == "spam")
        present = [t for t, n in example.tokens.items() if n > 0]
        for token in present:
            if token in stop_words:
                continue
            counts = docs.get(token, zero)
            rows.append(position)
            ham_docs.append(counts[0])
            spam_docs.append(counts[1])
            if token.startswith("pair:"):
                first = docs.get(token[5:].partition(" ")[0], zero)
                is_pair.append(True)
                first_ham.append(first[0])
                first_spam.append(first[1])
            else:
                is_pair.append(False)
                first_ham.append(-1)
                first_spam.append(-1)
        if present:
            totals[spam] += 1
            for token in present:
                entry = docs.get(token)
                if entry is None:
                    docs[token] = [1 - spam, spam]
                else:
                    entry[spam] += 1
    return Replay(
        ids=[e.id for e in stream],
        labels=np.array([e.label == "spam" for e in stream]),
        tokens_per_message=np.array([len(e.tokens) for e in stream]),
        rows=np.array(rows, np.int64),
        spam_docs=np.array(spam_docs, np.int64),
        ham_docs=np.array(ham_docs, np.int64),
        is_pair=np.array(is_pair, bool),
        first_spam=np.array(first_spam, np.int64),
        first_ham=np.array(first_ham, np.int64),
        n_spam=np.array(n_spam, np.int64),
        n_ham=np.array(n_ham, np.int64),
    )


def parse(config: str) -> dict[str, Any]:
    options: dict[str, Any] = dict(DEFAULTS)
    if config == "default":
        return options
    for setting in config.split(","):
        key, _, value = setting.partition("=")
        if key not in options:
            raise SystemExit(f"unknown option {key!r}")
        options[key] = value if key == "pairs" else (None if value == "none" else float(value))
    return options


def scores(run: Replay, options: dict[str, Any]) -> np.ndarray:
    n_messages = run.labels.size
    keep = (run.spam_docs + run.ham_docs) > 0  # in V: trained at least once (min_df 1)
    if options["pairs"] == "off":
        keep &= ~run.is_pair
    rows = run.rows[keep]
    spam_docs, ham_docs = run.spam_docs[keep], run.ham_docs[keep]
    n_spam, n_ham = run.n_spam[rows], run.n_ham[rows]
    f, g = token_probabilities_per_row(
        spam_docs, ham_docs, n_spam, n_ham, options["rf_strength"], options["rf_assumed"]
    )
    if options["pairs"] == "conditional":
        pair = run.is_pair[keep]
        first_spam, first_ham = run.first_spam[keep][pair], run.first_ham[keep][pair]
        cf, cg = token_probabilities_per_row(
            spam_docs[pair],
            ham_docs[pair],
            np.maximum(first_spam, spam_docs[pair]),
            np.maximum(first_ham, ham_docs[pair]),
            options["rf_strength"],
            options["rf_assumed"],
        )
        f[pair], g[pair] = cf, cg
    deviation = np.abs(f - 0.5)
    strong = deviation >= options["rf_min_dev"]
    rows, f, g, deviation = rows[strong], f[strong], g[strong], deviation[strong]
    if options["rf_max_tokens"] is not None and rows.size:
        order = np.lexsort((-deviation, rows))
        rows, f, g = rows[order], f[order], g[order]
        starts = np.searchsorted(rows, rows, side="left")
        first = np.arange(rows.size) - starts < options["rf_max_tokens"]
        rows, f, g = rows[first], f[first], g[first]
    log_f = np.bincount(rows, weights=np.log(f), minlength=n_messages)
    log_g = np.bincount(rows, weights=np.log(g), minlength=n_messages)
    counts = np.bincount(rows, minlength=n_messages)
    cap = options["rf_evidence_cap"]
    if cap is not None:
        # m tokens vote as `cap` independent ones: their mean evidence, cap times.
        scale = np.where(counts > cap, cap / np.maximum(counts, 1), 1.0)
        log_f, log_g = log_f * scale, log_g * scale
        counts = np.minimum(counts, int(cap))
    log_spam, log_ham = combine(log_f, log_g, counts)
    result = log_spam - log_ham
    result[(run.n_spam == 0) | (run.n_ham == 0)] = 0.0
    return result


def token_probabilities_per_row(
    spam_docs: np.ndarray,
    ham_docs: np.ndarray,
    n_spam: np.ndarray,
    n_ham: np.ndarray,
    strength: float,
    assumed: float,
) -> tuple[np.ndarray, np.ndarray]:
    """`token_probabilities` with the class totals of each occurrence's moment (its formula:
    p depends on N_spam and N_ham only through D_spam·N_ham and D_ham·N_spam)."""
    spam = spam_docs.astype(np.float64) * n_ham
    ham = ham_docs.astype(np.float64) * n_spam
    rates = spam + ham
    defined = (rates > 0) & (n_spam > 0) & (n_ham > 0)
    p = np.divide(spam, rates, out=np.zeros_like(rates), where=defined)
    q = np.divide(ham, rates, out=np.zeros_like(rates), where=defined)
    weight = np.where(defined, spam_docs + ham_docs, 0.0)
    f = (strength * assumed + weight * p) / (strength + weight)
    g = (strength * (1.0 - assumed) + weight * q) / (strength + weight)
    return f, g


def measure(run: Replay, result: np.ndarray) -> dict[str, Any]:
    ranking = ranking_measures(result, run.labels, run.ids, replicates=50)
    ham, spam = result[~run.labels], result[run.labels]
    median_spam = float(np.median(spam))
    worst = np.argsort(-np.where(run.labels, -np.inf, result), kind="stable")[:10]
    return {
        "one_minus_roca_percent": ranking.one_minus_roca_percent,
        "one_minus_roca_percent_ci95": ranking.one_minus_roca_percent_ci95,
        "fnr_at_max_fpr": ranking.fnr_at_max_fpr,
        "fnr_at_1pct_fpr": ranking.fnr_at_1pct_fpr,
        "top_ham_log_odds": float(ham.max()),
        "median_spam_log_odds": median_spam,
        "ham_above_median_spam": int((ham > median_spam).sum()),
        "top_ham": [
            {
                "position": int(i),
                "log_odds": float(result[i]),
                "tokens": int(run.tokens_per_message[i]),
            }
            for i in worst
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.overconfidence", description=__doc__)
    parser.add_argument("--views", default=",".join(VIEWS))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/spamsift-overconfidence"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--bogofilter", action="store_true", help="bogofilter's row too")
    parser.add_argument(
        "--check", action="store_true", help="score the default by score_stream too and compare"
    )
    args = parser.parse_args(argv)
    configs = args.config or ["default"]
    stop_words = load_stop_words("english")
    report: dict[str, Any] = {}
    for view in args.views.split(","):
        started = time.perf_counter()
        stream = examples_of(view, args.limit, args.cache)
        run = replay(stream, stop_words)
        print(
            f"## {view}: {len(stream)} messages, {int(run.labels.sum())} spam, "
            f"replayed in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
        print(f"\n{view} ({len(stream)})")
        print("config | 1-ROCA % | FNR@0.1% | FNR@1% | top ham | median spam | ham>median")
        report[view] = {}
        if args.check:
            engine = ModelConfig().to_engine()
            expected = score_stream(stream, engine).scores
            got = scores(run, parse("default"))  # the served options, as score_stream's
            if not np.allclose(got, expected, rtol=1e-9, atol=1e-9):
                worst = int(np.argmax(np.abs(got - expected)))
                raise SystemExit(f"replay differs at {worst}: {got[worst]} != {expected[worst]}")
            print(f"{view}: replay equals score_stream", file=sys.stderr)
        for config in configs:
            result = measure(run, scores(run, parse(config)))
            report[view][config] = result
            print(
                f"{config} | {result['one_minus_roca_percent']:.4f} | "
                f"{100 * result['fnr_at_max_fpr']:.2f} | {100 * result['fnr_at_1pct_fpr']:.2f} | "
                f"{result['top_ham_log_odds']:.1f} | {result['median_spam_log_odds']:.1f} | "
                f"{result['ham_above_median_spam']}",
                flush=True,
            )
        if args.bogofilter:
            result = bogofilter_row(view, args.limit, [e.id for e in stream])
            report[view]["bogofilter"] = result
            print(
                f"bogofilter | {result['one_minus_roca_percent']:.4f} | "
                f"{100 * result['fnr_at_max_fpr']:.2f} | {100 * result['fnr_at_1pct_fpr']:.2f} | "
                f"{result['top_ham_log_odds']:.1f} | {result['median_spam_log_odds']:.1f} | "
                f"{result['ham_above_median_spam']}",
                flush=True,
            )
        if args.json:
            args.json.write_text(json.dumps(report, indent=1))
    return 0


def bogofilter_row(view: str, limit: int | None, order: list[str]) -> dict[str, Any]:
    """bogofilter online on the view's messages in `order` (the replay's stream)."""
    corpus, text_only, seed = VIEWS[view]
    messages = data.load(corpus)
    messages = messages[:limit] if seed is None and limit else data.spread(messages, limit)
    labels = {m.id: m.label for m in messages}
    path, _ = find_bogofilter(install=False)
    if path is None:
        raise SystemExit("bogofilter is not installed")
    with tempfile.TemporaryDirectory(prefix="spamsift-overconfidence-") as tmp:
        folder = Path(tmp)
        files = {}
        for index, message in enumerate(messages):
            files[message.id] = folder / f"{index:06d}"
            files[message.id].write_bytes(message_file(message, text_only))
        scores = Bogofilter(path, folder).online(order, files, labels)
    run = Replay(
        ids=order,
        labels=np.array([labels[i] == "spam" for i in order]),
        tokens_per_message=np.zeros(len(order), np.int64),
        rows=np.zeros(0, np.int64),
        spam_docs=np.zeros(0, np.int64),
        ham_docs=np.zeros(0, np.int64),
        is_pair=np.zeros(0, bool),
        first_spam=np.zeros(0, np.int64),
        first_ham=np.zeros(0, np.int64),
        n_spam=np.zeros(len(order), np.int64),
        n_ham=np.zeros(len(order), np.int64),
    )
    return measure(run, spamicity_log_odds(scores))


if __name__ == "__main__":
    sys.exit(main())
