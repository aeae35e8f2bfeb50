"""Word pairs bounded by expiry, pair by pair: `python -m bench.lab.pair_budget`.

    python -m bench.lab.pair_budget [--streams trec07p,enron,shuffled] [--limit N]
        [--configs words,default,probation-2000,budget-1-rare,...] [--every 100]
        [--json out.json]

The default model (pairs learned until 20 nats, shape on) with an expiry after every
`--every` messages (a server's run every five minutes) that deletes word pairs only:

- `probation-K`: the model option `pair_probation` (the service's own rule,
  `app.bayes.expiry.on_probation`, through `StreamExpiry`): a pair counted in one trained
  message only is deleted once K newer messages were trained;
- `budget-F-ORDER` (a lab rule, not in the service): pairs deleted until the model holds at
  most F pair tokens for each of its other tokens (words and shape), so a model of W words
  holds at most (1 + F) W tokens with no number for the operator to choose; which pairs go
  first: `rare` (in the fewest trained messages, then the least recently trained, then the
  one made first), `lru` (the service's expiry order applied to the pairs: least recently
  trained, weakest spread of per-class rates, made first) or `beyond` (the least evidence
  beyond their words: messages times the smaller gap between the pair's log ratio of
  per-class message rates and either word's).

Plus `default` and `words` (neither pairs nor shape), `words` first so that the others'
tokens are given as a multiple of its. Same streams, protocol and figures as
`bench.lab.families_study`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.bayes.counts import CountTable, IntArray
from app.service import evaluation
from app.service.evaluation import (
    StreamExpiry,
    delete_tokens,
    evaluate_online,
    stream_order,
    tokenize_corpus,
)
from app.service.model_config import ModelConfig
from app.text.core import resolve
from bench.accuracy import SHUFFLE_SEED
from bench.lab.families_study import CONFIGS, PAIRS, streams

_budget: tuple[float, str] | None = None  # (F, order) of the run in progress
_pair_mask: dict[int, np.ndarray] = {}
_pair_words: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # n_tokens -> each token's two words


def _words_of_pairs(table: CountTable, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each token's first and second word's ids where it is a pair, else -1."""
    found = _pair_words.get(table.n_tokens)
    if found is None:
        first = np.full(table.n_tokens, -1, dtype=np.int64)
        second = np.full(table.n_tokens, -1, dtype=np.int64)
        ids = np.flatnonzero(pairs)
        texts = [table.tokens[i][len(PAIRS[0]) :].partition(" ") for i in ids.tolist()]
        first[ids] = table.tokens.lookup([a for a, _, _ in texts], exact=True)
        second[ids] = table.tokens.lookup([b for _, _, b in texts], exact=True)
        found = _pair_words[table.n_tokens] = (first, second)
    return found


def _log_ratio(table: CountTable, ids: np.ndarray) -> np.ndarray:
    """log P(w | spam) - log P(w | ham) of each token's message rates, smoothed by half a
    message (0 for id -1)."""
    spam, ham = table.classes.index("spam"), table.classes.index("ham")
    docs = table.token_docs
    n_spam, n_ham = float(table.class_docs[spam]), float(table.class_docs[ham])
    known = np.maximum(ids, 0)
    ratio = np.log((docs[spam, known] + 0.5) / (n_spam + 1)) - np.log(
        (docs[ham, known] + 0.5) / (n_ham + 1)
    )
    return np.where(ids >= 0, ratio, 0.0)


def _expire_pairs(
    table: CountTable,
    last_trained: IntArray,
    made: IntArray,
    _expiry: StreamExpiry,
    _trained_at: Sequence[int],
    _pairs: np.ndarray | None,
) -> int:
    """`evaluation._expire`'s place during a budget run: delete pairs past the budget."""
    assert _budget is not None
    factor, order_name = _budget
    docs, terms = table.token_docs, table.token_terms
    pairs = _pair_mask.get(table.n_tokens)
    if pairs is None:
        pairs = _pair_mask[table.n_tokens] = table.tokens.starting_with(PAIRS)
    alive = (docs.sum(axis=0) > 0) | (terms.sum(axis=0) > 0)
    words = int((alive & ~pairs).sum())
    alive_pairs = np.flatnonzero(alive & pairs)
    excess = alive_pairs.size - int(factor * words)
    if excess <= 0:
        return 0
    total_docs = docs[:, alive_pairs].sum(axis=0)
    if order_name == "beyond":
        first, second = _words_of_pairs(table, pairs)
        own = _log_ratio(table, alive_pairs)
        beyond = np.minimum(
            np.abs(own - _log_ratio(table, first[alive_pairs])),
            np.abs(own - _log_ratio(table, second[alive_pairs])),
        )
        order = np.lexsort((made[alive_pairs], last_trained[alive_pairs], total_docs * beyond))
    elif order_name == "rare":
        order = np.lexsort((made[alive_pairs], last_trained[alive_pairs], total_docs))
    else:
        rates = docs[:, alive_pairs] / np.maximum(table.class_docs, 1).astype(np.float64)[:, None]
        spread = rates.max(axis=0) - rates.min(axis=0)
        order = np.lexsort((made[alive_pairs], spread, last_trained[alive_pairs]))
    return delete_tokens(table, np.sort(alive_pairs[order[:excess]]))


def main(argv: list[str] | None = None) -> int:
    global _budget
    parser = argparse.ArgumentParser(prog="python -m bench.lab.pair_budget", description=__doc__)
    parser.add_argument("--streams", default="trec07p,enron,shuffled")
    parser.add_argument("--configs", default="words,default,budget-1-rare,budget-1-lru")
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    configs = [name for name in args.configs.split(",") if name]
    for name in configs:
        if (
            name not in ("default", "words")
            and not name.startswith("probation-")
            and not (
                name.startswith("budget-") and name.rsplit("-", 1)[1] in ("rare", "lru", "beyond")
            )
        ):
            parser.error(f"no configuration named {name!r}")
    core = resolve("auto")
    service_expire = evaluation._expire
    results: list[dict[str, Any]] = []
    for name, messages, text_only, shuffled in streams(args.streams.split(","), args.limit):
        examples = stream_order(
            tokenize_corpus(messages, core=core, text_only_view=text_only),
            SHUFFLE_SEED if shuffled else None,
        )
        words_vocabulary = None
        for config_name in configs:
            expiry = None
            evaluation._expire = service_expire
            if config_name.startswith("probation-"):
                # The service's own rule (the model option pair_probation), not a lab copy.
                probation = int(config_name.split("-")[1])
                expiry = StreamExpiry(max_tokens=None, every=args.every, pair_probation=probation)
                transform, options, _ = CONFIGS["pairs-until-20"]
            elif config_name.startswith("budget-"):
                evaluation._expire = _expire_pairs  # type: ignore[assignment]
                _, factor, order_name = config_name.split("-")
                _budget = (float(factor), order_name)
                expiry = StreamExpiry(max_tokens=1, every=args.every)
                transform, options, _ = CONFIGS["pairs-until-20"]
            else:
                transform, options, _ = CONFIGS[
                    "pairs-until-20" if config_name == "default" else config_name
                ]
            _pair_mask.clear()
            _pair_words.clear()
            started = time.thread_time()
            report = evaluate_online(
                transform(examples),
                corpus=name,
                config=ModelConfig(**options).to_engine(),
                train_mode="all",
                shuffle_seed=None,
                text_only_view=text_only,
                expiry=expiry,
            )
            cpu = time.thread_time() - started
            if config_name == "words":
                words_vocabulary = report.vocabulary
            result = {
                "stream": name,
                "config": config_name,
                "messages": report.messages,
                "one_minus_roca_percent": report.ranking.one_minus_roca_percent,
                "fnr_at_max_fpr_percent": 100 * report.ranking.fnr_at_max_fpr,
                "vocabulary": report.vocabulary,
                "times_words": (report.vocabulary / words_vocabulary) if words_vocabulary else None,
                "expired_tokens": report.expired_tokens,
                "score_train_cpu_ms": 1000 * cpu / max(report.messages, 1),
            }
            results.append(result)
            print(json.dumps(result), flush=True)
            if args.json:
                with open(args.json, "w") as out:
                    json.dump(results, out, indent=1)
        print(f"{name}: done", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
