"""Accuracy per token: what each derived token family (word pairs, shape) buys for what it stores.

    python -m bench.lab.families_study [--streams trec07p,enron,shuffled] [--limit N]
        [--configs default,no-pairs,...] [--json out.json]

Streams, each online (scored, then trained, message by message: the immediate-feedback
protocol of `app.service.evaluation.evaluate_online`, Robinson-Fisher at the model defaults):
trec07p-early raw in delivery order; each enron-spam user in arrival order, one model each;
and the shuffled views of `bench.accuracy` (seed 0). `--limit` keeps the first N messages of
an in-order stream (its beginning, as delivered) and a spread of N of a shuffled one.

Each stream is tokenized once with every family; a configuration's examples leave out the
tokens of the families it turns off (exact: the tokenizer makes each family independently of
the others, and a model with a family off neither stores nor scores its tokens). Per stream
and configuration: 1-ROCA %, FNR at FPR <= 0.1 %, |V| at the end (the model's tokens less its
stop words) and CPU milliseconds per message (this thread's CPU time, so other processes on a
shared machine do not count) for scoring and training; the tokenizer's CPU per message with
and without the families is measured on every `--tokenize-step`-th message.

Configurations: default (pairs and shape), no-pairs, no-shape, words (neither),
pairs-seen-twice (a pair is stored and scored only from the second message that has it, as a
writer that keeps pairs only where they recur would; every such pair learned),
pairs-when-unsure and pairs-until-N (the
model option `pairs_until_log_odds`: every message's words trained, its pairs only while the
model's log odds for its label were below N, 2.2 being the default verdict threshold, 0.9),
seen-twice-until-20 (both: a pair from its second message, and only while the model was less
than 20 nats sure of that message's label),
hashed-N-until-20 for N in 16, 18, 20 (each pair replaced by one of 2^N bucket tokens, as
rspamd and OSBF store pairs: a model never holds more than 2^N pair tokens, and pairs that
share a bucket share its counts; learned until 20 nats, as the default),
toe (train on error) and tum (train until no error: on error and on unsure verdicts), both
with every family; expire-at-Fx-words for F in 1.5, 2 and 3 (the default model with the
service's token expiry, `app.bayes.expiry`, run after every `--expire-every` messages, at
most F times the tokens the stream's `words` configuration ends with: `words` must come
earlier in --configs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.cli.evaluate import EXPIRE_EVERY
from app.service.corpus import LabelledMessage
from app.service.evaluation import (
    Example,
    StreamExpiry,
    evaluate_online,
    stream_order,
    tokenize_corpus,
)
from app.service.model_config import ModelConfig
from app.text.core import resolve
from app.text.families import ALL_FAMILIES, FAMILY_PREFIXES, Family
from bench import data
from bench.accuracy import SHUFFLE_SEED, VIEWS

PAIRS = FAMILY_PREFIXES["word_pairs"]
SHAPE = FAMILY_PREFIXES["shape_tokens"]


def without(prefixes: tuple[str, ...]) -> Callable[[list[Example]], list[Example]]:
    def drop(examples: list[Example]) -> list[Example]:
        return [
            replace(e, tokens={t: c for t, c in e.tokens.items() if not t.startswith(prefixes)})
            for e in examples
        ]

    return drop


def pairs_seen_twice(examples: list[Example]) -> list[Example]:
    """Each message's pairs only where an earlier message of the stream had them too."""
    seen: set[str] = set()
    kept = []
    for example in examples:
        tokens = {}
        for token, count in example.tokens.items():
            if not token.startswith(PAIRS) or token in seen:
                tokens[token] = count
        seen.update(t for t in example.tokens if t.startswith(PAIRS))
        kept.append(replace(example, tokens=tokens))
    return kept


def hashed_pairs(bits: int) -> Callable[[list[Example]], list[Example]]:
    """Each message's pairs folded into 2^`bits` buckets, `pair:#<bucket>`, counts summed.

    The bucket tokens keep the pairs' prefix, so the model's options treat them as pairs
    (`pairs_until_log_odds` among them). The hash is blake2b, not `app.token_hash`: that one
    is keyed per process, and a bucket must be the same in every run for the figures to repeat.
    """
    buckets: dict[str, str] = {}  # a pair's text -> its bucket token: pairs recur, hash once

    def bucket(pair: str) -> str:
        token = buckets.get(pair)
        if token is None:
            digest = hashlib.blake2b(pair.encode("utf-8", "surrogatepass"), digest_size=8)
            token = f"{PAIRS[0]}#{int.from_bytes(digest.digest(), 'little') % 2**bits}"
            buckets[pair] = token
        return token

    def fold(examples: list[Example]) -> list[Example]:
        folded = []
        for example in examples:
            tokens: dict[str, int] = {}
            for token, count in example.tokens.items():
                if token.startswith(PAIRS):
                    token = bucket(token)
                tokens[token] = tokens.get(token, 0) + count
            folded.append(replace(example, tokens=tokens))
        return folded

    return fold


# name -> (examples transform, model options, train mode)
CONFIGS: dict[str, tuple[Callable[[list[Example]], list[Example]], dict[str, Any], str]] = {
    "default": (list, {}, "all"),
    "no-pairs": (without(PAIRS), {"word_pairs": False}, "all"),
    "no-shape": (without(SHAPE), {"shape_tokens": False}, "all"),
    "words": (without(PAIRS + SHAPE), {"word_pairs": False, "shape_tokens": False}, "all"),
    "pairs-seen-twice": (pairs_seen_twice, {"pairs_until_log_odds": 0}, "all"),
    "pairs-when-unsure": (list, {"pairs_until_log_odds": 2.2}, "all"),
    "pairs-until-8": (list, {"pairs_until_log_odds": 8}, "all"),
    "pairs-until-20": (list, {"pairs_until_log_odds": 20}, "all"),
    "seen-twice-until-20": (pairs_seen_twice, {"pairs_until_log_odds": 20}, "all"),
    **{
        f"hashed-{bits}-until-20": (hashed_pairs(bits), {"pairs_until_log_odds": 20}, "all")
        for bits in (16, 18, 20)
    },
    "toe": (list, {}, "error"),
    "tum": (list, {}, "unsure"),
}
# name -> the maximum of tokens, as a multiple of the tokens words alone end with
EXPIRY_CONFIGS: dict[str, float] = {f"expire-at-{f:g}x-words": f for f in (1.5, 2.0, 3.0)}
TOKENIZE_VARIANTS: dict[str, frozenset[Family]] = {
    "default": ALL_FAMILIES,
    "no-pairs": frozenset({"shape_tokens"}),
    "no-shape": frozenset({"word_pairs"}),
    "words": frozenset(),
}


def streams(
    names: Sequence[str], limit: int | None
) -> list[tuple[str, list[LabelledMessage], bool, bool]]:
    """(name, messages in stream order, text-only view, shuffled)."""
    found: list[tuple[str, list[LabelledMessage], bool, bool]] = []
    if "trec07p" in names:
        found.append(("trec07p-early (in order)", data.load("trec07p-early")[:limit], False, False))
    if "enron" in names:
        messages = data.load("enron-spam")
        for user in sorted({m.id.partition("/")[0] for m in messages}):
            mine = [m for m in messages if m.id.startswith(user + "/")][:limit]
            found.append((f"{user} (in order)", mine, False, False))
    if "shuffled" in names:
        for view in VIEWS:
            messages = data.spread(data.load(view.corpus), limit)
            found.append((f"{view.name} (shuffled)", messages, view.text_only, True))
    return found


def tokenize_cpu_ms(
    messages: list[LabelledMessage], text_only: bool, families: frozenset[Family]
) -> float:
    core = resolve("auto")
    started = time.thread_time()
    tokenize_corpus(messages, core=core, text_only_view=text_only, families=families)
    return 1000 * (time.thread_time() - started) / max(len(messages), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.families_study", description=__doc__)
    parser.add_argument("--streams", default="trec07p,enron,shuffled")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--expire-every", type=int, default=EXPIRE_EVERY)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--tokenize-step", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    configs = [name for name in args.configs.split(",") if name]
    for position, name in enumerate(configs):
        if name in EXPIRY_CONFIGS and "words" not in configs[:position]:
            parser.error(f"{name} needs the words configuration before it in --configs")
        if name not in CONFIGS and name not in EXPIRY_CONFIGS:
            parser.error(f"no configuration named {name!r}")
    core = resolve("auto")
    results: list[dict[str, Any]] = []
    for name, messages, text_only, shuffled in streams(args.streams.split(","), args.limit):
        sample = messages[:: args.tokenize_step]
        tokenize = {
            variant: tokenize_cpu_ms(sample, text_only, families)
            for variant, families in TOKENIZE_VARIANTS.items()
        }
        examples = stream_order(
            tokenize_corpus(messages, core=core, text_only_view=text_only),
            SHUFFLE_SEED if shuffled else None,
        )
        words_vocabulary = 0
        for config_name in configs:
            transform, options, train_mode = CONFIGS.get(config_name, CONFIGS["default"])
            expiry = None
            if config_name in EXPIRY_CONFIGS:
                maximum = int(EXPIRY_CONFIGS[config_name] * words_vocabulary)
                expiry = StreamExpiry(max_tokens=maximum, every=args.expire_every)
            config = ModelConfig(**options).to_engine()
            chosen = transform(examples)
            started = time.thread_time()
            report = evaluate_online(
                chosen,
                corpus=name,
                config=config,
                train_mode=train_mode,  # type: ignore[arg-type]
                shuffle_seed=None,  # in stream order already (pairs-seen-twice needs it)
                text_only_view=text_only,
                expiry=expiry,
            )
            if config_name == "words":
                words_vocabulary = report.vocabulary
            cpu = time.thread_time() - started
            result = {
                "stream": name,
                "config": config_name,
                "messages": report.messages,
                "trained": report.trained,
                "one_minus_roca_percent": report.ranking.one_minus_roca_percent,
                "fnr_at_max_fpr_percent": 100 * report.ranking.fnr_at_max_fpr,
                "vocabulary": report.vocabulary,
                "max_tokens": expiry.max_tokens if expiry else None,
                "expired_tokens": report.expired_tokens,
                "score_train_cpu_ms": 1000 * cpu / max(report.messages, 1),
                "tokenize_cpu_ms": tokenize.get(config_name, tokenize["default"]),
            }
            results.append(result)
            print(json.dumps(result), flush=True)
            if args.json:
                args.json.write_text(json.dumps(results, indent=1))
        print(f"{name}: done", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
