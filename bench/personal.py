"""Personal models backed by a global one: per-user accuracy of personal only, global only and
the blend (their counts summed, `app.bayes.blend.merge_counts`, which classify uses), with few
and with many personal trainings.

    python -m bench.personal                               # every user (5-11 min, loaded)
    python -m bench.personal --limit 300 --trainings 10,40 --seeds 1 --json p.json  # smoke

`--latency N` also times classify through the service (a SQLite file, one process): N test
messages one at a time on the global model alone and on a personal model backed by it, both
held, then neither held (a fresh process each time, which reads each model's message rows from
the database), as medians and p95 in ms, and the blend's ratios to the global model alone.

`--enron` measures personal mailboxes as they arrive instead (below the first mode's details).

"blend" sums the counts as they are (`personal_weight` 1); "blend xW" counts each personal
message W times (`personal_weight` W, `--weights`).

The global model is trained on spamassassin's easy_ham, easy_ham_2 and spam folders. Each user
is a mailbox whose mail differs from it:

- `spamassassin-hard`: the folders the global model never saw, hard_ham and spam_2 (the same
  source, other senders and a later year);
- `csdmc2010`: English mail of 2009-2010, seven years later;
- `trec06c`: Chinese mail (the global model knows almost none of its words);
- `sms`: SMS texts (short; another medium).

Every message is read text-only (body and subject, no other header: the headers of csdmc2010
and trec06c give their labels away, and a user's headers would differ from the global model's
anyway). A user's messages are split by `spamsift evaluate`'s fixed split: its test messages
are scored, the personal model is trained on the first N of the others in a shuffled order
(one shuffle per seed). Per user, N and condition the table gives the median over the seeds of
1-ROCA % and of the FNR at FPR <= 1 %, with the range over seeds. "personal" is empty (n/a)
when the personal model has not yet seen both classes.

`--enron`: enron-spam's six users, each a stream in arrival order (`bench.streams`). For each
user, the global model is trained on the other five users' streams; the user's messages are each
scored, then trained into the personal model, under each condition: personal only (the model
starts empty), global only (the global model, never trained on the user's mail), and the blend
of the personal model backed by the global one, `personal_weight` W (`--weights`, default
1,2,4,8: each personal message counts W times against the global model's). Per user and
condition: the measures of `bench.streams` (1-ROCA %, FNR at FPR <= 0.1 % and 1 %, the recalls
and unsure share at the default thresholds, the stream in fifths), and 1-ROCA % over the
first `EARLY` messages, when the personal model knows little.

    python -m bench.personal --enron --json e.json                       # ~10 min
    python -m bench.personal --enron --limit 300 --users enron1,enron2   # a slice
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.bayes.blend import merge_counts
from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier, NaiveBayesConfig, verdict
from app.service.corpus import LabelledMessage
from app.service.evaluation import (
    LOOSE_FPR,
    Example,
    fnr_at_fpr,
    is_test_message,
    ranking_measures,
    roc_auc,
    score_stream,
    stream_order,
    tokenize_corpus,
)
from app.service.model_config import ModelConfig
from app.text.core import resolve
from bench import data
from bench.accuracy import config_from
from bench.streams import STREAMS, Run, measure_run, novelty, stream_messages

CLASSES = ("ham", "spam")
GLOBAL_FOLDERS = ("easy_ham", "easy_ham_2", "spam")


@dataclass(frozen=True)
class User:
    name: str
    corpus: str
    folders: tuple[str, ...] | None  # spamassassin folders; None: the whole corpus


USERS = (
    User("spamassassin-hard", "spamassassin", ("hard_ham", "spam_2")),
    User("csdmc2010", "csdmc2010", None),
    User("trec06c", "trec06c-subset", None),
    User("sms", "sms-spam-collection", None),
)


def folder_of(message: LabelledMessage) -> str:
    return message.id.partition("/")[0]


def table_of(examples: Sequence[Example]) -> CountTable:
    """A model trained on `examples`, as the service trains one (each message's distinct
    tokens with their counts)."""
    table = CountTable(CLASSES)
    for example in examples:
        ids = table.intern(list(example.tokens))
        terms = np.fromiter(example.tokens.values(), dtype=np.int64, count=len(ids))
        order = np.argsort(ids)
        table.add(CLASSES.index(example.label), ids[order], terms[order])
    return table


def measure(
    table: CountTable, config: NaiveBayesConfig, test: Sequence[Example]
) -> dict[str, float] | None:
    """1-ROCA % and FNR at FPR <= 1 % of `table` on `test`; None if it lacks a class."""
    if not all(table.class_docs > 0):
        return None
    classifier = Classifier(table, config)
    odds = classifier.spam_log_odds(table.vectorize([example.tokens for example in test]))
    ranking = ranking_measures(
        np.asarray(odds, dtype=np.float64),
        np.array([example.label == "spam" for example in test]),
        [example.id for example in test],
        replicates=0,
    )
    return {
        "one_minus_roca_percent": ranking.one_minus_roca_percent,
        "fnr_at_1pct_fpr": ranking.fnr_at_1pct_fpr,
    }


def summarise(runs: list[dict[str, float] | None]) -> dict[str, Any] | None:
    """Median and range over seeds of each measure; None if any seed could not score."""
    if not runs or any(run is None for run in runs):
        return None
    measured = [run for run in runs if run is not None]
    return {
        key: {
            "median": statistics.median(run[key] for run in measured),
            "min": min(run[key] for run in measured),
            "max": max(run[key] for run in measured),
        }
        for key in measured[0]
    }


def run_user(
    user: User,
    examples: list[Example],
    global_table: CountTable,
    config: NaiveBayesConfig,
    *,
    trainings: Sequence[int],
    seeds: int,
    weights: Sequence[int] = (1,),
) -> dict[str, Any]:
    test = [example for example in examples if is_test_message(example.id)]
    pool = [example for example in examples if not is_test_message(example.id)]
    result: dict[str, Any] = {
        "user": user.name,
        "corpus": user.corpus,
        "messages": len(examples),
        "test_messages": len(test),
        "test_spam": sum(example.label == "spam" for example in test),
        "training_pool": len(pool),
        "global": measure(global_table, config, test),
        "trainings": [],
    }
    for n in trainings:
        if n > len(pool):
            continue
        runs: dict[str, list[dict[str, float] | None]] = {"personal": []}
        for seed in range(seeds):
            personal = table_of(stream_order(pool, seed)[:n])
            runs["personal"].append(measure(personal, config, test))
            for weight in weights:
                blend = merge_counts(personal, global_table, base_weight=weight)
                runs.setdefault(blend_name(weight), []).append(measure(blend, config, test))
        result["trainings"].append(
            {"n": n, **{condition: summarise(found) for condition, found in runs.items()}}
        )
    return result


def stream_order_messages(messages: list[LabelledMessage]) -> list[LabelledMessage]:
    """The messages in the fixed shuffle of seed 0 (a folder's first ones are one class)."""
    order = {
        example.id: i
        for i, example in enumerate(stream_order([Example(m.id, m.label, {}) for m in messages], 0))
    }
    return sorted(messages, key=lambda m: order[m.id])


def blend_name(weight: int) -> str:
    return "blend" if weight == 1 else f"blend_x{weight}"


def _cell(summary: dict[str, Any] | None, key: str) -> str:
    if summary is None:
        return "n/a"
    if "median" not in summary[key]:
        return f"{summary[key]:.3g}"
    part = summary[key]
    if part["min"] == part["max"]:
        return f"{part['median']:.3g}"
    return f"{part['median']:.3g} ({part['min']:.3g}-{part['max']:.3g})"


def table_lines(users: list[dict[str, Any]], weights: Sequence[int] = (1,)) -> list[str]:
    conditions = ["personal", "global", *(blend_name(weight) for weight in weights)]
    titles = [condition.replace("_x", " x") for condition in conditions]
    measures = (("one_minus_roca_percent", "1-ROCA %"), ("fnr_at_1pct_fpr", "FNR@1%FPR"))
    header = [f"{title} {label}" for _, label in measures for title in titles]
    lines = [
        "| user | personal trainings | " + " | ".join(header) + " |",
        "|---|---:|" + "---:|" * len(header),
    ]
    for user in users:
        plain = user["global"]
        global_summary = (
            None
            if plain is None
            else {key: {"median": v, "min": v, "max": v} for key, v in plain.items()}
        )
        for row in user["trainings"]:
            cells = [
                _cell(global_summary if condition == "global" else row[condition], key)
                for key, _ in measures
                for condition in conditions
            ]
            lines.append(f"| {user['user']} | {row['n']} | " + " | ".join(cells) + " |")
    return lines


def time_classify(
    messages: Sequence[LabelledMessage],
    global_messages: Sequence[LabelledMessage],
    n: int,
    folder: Path,
) -> dict[str, Any]:
    """Latency of classify (ms) on the global model alone and on a personal model backed by
    it, held and not held; the personal model has 20 trained messages of its own."""
    from app.config import Settings
    from app.service.classification import classify
    from app.service.messages import Message
    from app.service.models import create_model, get_model
    from app.service.runtime import Runtime
    from app.service.training import train_batch

    settings = Settings(database_url=f"sqlite:///{folder / 'personal.db'}", _env_file=None)  # type: ignore[call-arg]
    from app.store.migrate import upgrade_schema

    rt = Runtime(settings)
    upgrade_schema(rt.db)
    create_model(rt, name="global", classes=None, config={})
    create_model(rt, name="alice", classes=None, config={}, relation={"backed_by": "global"})
    batch = [(Message(raw=data.raw_text(m)), m.label) for m in global_messages]
    for start in range(0, len(batch), 200):
        train_batch(rt, model_name="global", items=batch[start : start + 200])
    own = [(Message(raw=data.raw_text(m)), m.label) for m in messages[:20]]
    train_batch(rt, model_name="alice", items=own)
    tests = [Message(raw=data.raw_text(m)) for m in messages[20 : 20 + n]]
    timings: dict[str, list[float]] = {
        "global": [],
        "blend_held": [],
        "global_cold": [],
        "blend_cold": [],
    }
    for message in tests:  # warm: both held
        for name, key in (("global", "global"), ("alice", "blend_held")):
            started = time.perf_counter()
            classify(rt, model_name=name, message=message)
            timings[key].append(1000 * (time.perf_counter() - started))
    rt.close()
    for message in tests[: max(1, n // 4)]:  # cold: a process that holds nothing
        for name, key in (("global", "global_cold"), ("alice", "blend_cold")):
            fresh = Runtime(settings)
            get_model(fresh, name="global")  # connected to the database, nothing held
            started = time.perf_counter()
            classify(fresh, model_name=name, message=message)
            timings[key].append(1000 * (time.perf_counter() - started))
            fresh.close()

    def figures(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {
            "median_ms": statistics.median(ordered),
            "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "n": len(ordered),
        }

    result = {key: figures(values) for key, values in timings.items()}
    result["ratios"] = {
        "blend_held_to_global_held": result["blend_held"]["median_ms"]
        / result["global"]["median_ms"],
        "blend_cold_to_global_cold": result["blend_cold"]["median_ms"]
        / result["global_cold"]["median_ms"],
    }
    return result


ENRON_USERS = tuple(stream for stream in STREAMS if stream.corpus == "enron-spam")
EARLY = 500  # the first messages of a user's stream, when a personal model knows little


def run_enron_user(
    user: str,
    examples: list[Example],
    global_table: CountTable,
    config: NaiveBayesConfig,
    weights: Sequence[int],
) -> dict[str, Any]:
    """One user's stream under personal only, global only and each blend."""
    is_spam = np.array([example.label == "spam" for example in examples], dtype=bool)
    ids = [example.id for example in examples]
    shares = novelty(examples)
    runs: dict[str, Run] = {}
    started = time.process_time()
    scored = score_stream(examples, config)
    runs["personal"] = Run(
        scored.scores, scored.verdicts, time.process_time() - started, scored.stored_tokens
    )
    started = time.process_time()
    classifier = Classifier(global_table, config)
    X = global_table.vectorize([example.tokens for example in examples])
    log_proba, joint, _ = classifier.assess(X)
    spam = CLASSES.index("spam")
    runs["global"] = Run(
        np.asarray(joint[:, spam] - joint[:, 1 - spam], dtype=np.float64),
        [verdict(np.exp(row), CLASSES, config) for row in log_proba],
        time.process_time() - started,
        global_table.n_tokens,
    )
    for weight in weights:
        started = time.process_time()
        scored = score_stream(examples, config, start=global_table, weight=weight)
        runs[blend_name(weight)] = Run(
            scored.scores, scored.verdicts, time.process_time() - started, scored.stored_tokens
        )
    conditions = {}
    early = slice(0, min(EARLY, len(examples)))
    for name, run in runs.items():
        measured = measure_run(run, is_spam, ids, shares, messages=len(examples))
        s, p = run.scores[early], is_spam[early]
        both = bool(p.any() and (~p).any())
        measured["early"] = {
            "messages": len(p),
            "one_minus_roca_percent": 100 * (1 - roc_auc(s, p)) if both else float("nan"),
            "fnr_at_1pct_fpr": fnr_at_fpr(s, p, max_fpr=LOOSE_FPR) if both else float("nan"),
        }
        conditions[name] = measured
    return {
        "user": user,
        "messages": len(examples),
        "spam": int(is_spam.sum()),
        "global_messages": int(global_table.class_docs.sum()),
        "conditions": conditions,
    }


def enron_table(users: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| user | condition | 1-ROCA % | FNR@0.1%FPR | FNR@1%FPR "
        f"| first {EARLY}: 1-ROCA % | spam recall | ham recall | unsure |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for user in users:
        for name, m in user["conditions"].items():
            lines.append(
                f"| {user['user']} | {name.replace('_x', ' x')} "
                f"| {m['one_minus_roca_percent']:.3f} | {100 * m['fnr_at_max_fpr']:.2f} "
                f"| {100 * m['fnr_at_1pct_fpr']:.2f} "
                f"| {m['early']['one_minus_roca_percent']:.3f} "
                f"| {100 * m['spam_recall']:.1f} | {100 * m['ham_recall']:.1f} "
                f"| {100 * m['unsure_share']:.1f} % |"
            )
    return lines


def main_enron(args: argparse.Namespace) -> int:
    weights = [int(w) for w in (args.weights or "1,2,4,8").split(",")]
    config = config_from(args.set)
    chosen = args.users.split(",") if args.users else [u.name for u in ENRON_USERS]
    started = time.perf_counter()
    corpus = data.load("enron-spam")
    core = resolve("auto")
    examples = {
        user.name: tokenize_corpus(stream_messages(user, corpus, args.limit), core=core)
        for user in ENRON_USERS
    }
    users = []
    for name in chosen:
        others = [e for user, stream in examples.items() if user != name for e in stream]
        global_table = table_of(others)
        users.append(run_enron_user(name, examples[name], global_table, config, weights))
        print(f"{name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps({"users": users}, indent=1, default=float))
    report = {
        "benchmark": "personal-enron",
        "config": {"settings": args.set, "weights": weights, "limit": args.limit},
        "seconds": time.perf_counter() - started,
        "users": users,
        "table": enron_table(users),
    }
    print("\n".join(report["table"]))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1, default=float))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.personal", description=__doc__)
    parser.add_argument("--limit", type=int, default=None, help="messages per corpus (spread)")
    parser.add_argument(
        "--trainings",
        default="20,200,1000",
        help="personal trainings to measure, comma-separated (default 20,200,1000)",
    )
    parser.add_argument("--seeds", type=int, default=5, help="shuffles of the training pool")
    parser.add_argument(
        "--weights",
        default=None,
        help="personal_weight values of the blend (default 1,10; --enron: 1,2,4,8)",
    )
    parser.add_argument(
        "--users",
        default=None,
        help="users to measure (default: all of the mode's: "
        f"{', '.join(user.name for user in USERS)}; --enron: enron1..enron6)",
    )
    parser.add_argument(
        "--enron",
        action="store_true",
        help="enron-spam's users as streams in arrival order, the global model the other "
        "five users' (see above)",
    )
    parser.add_argument(
        "--set", action="append", default=[], help="--enron: model option key=value"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument(
        "--latency", type=int, default=0, help="also time N classifications (see above)"
    )
    args = parser.parse_args(argv)
    if args.enron:
        return main_enron(args)
    trainings = [int(n) for n in args.trainings.split(",")]
    weights = [int(w) for w in (args.weights or "1,10").split(",")]
    users_chosen = (args.users or ",".join(user.name for user in USERS)).split(",")
    chosen = [user for user in USERS if user.name in users_chosen]
    config = ModelConfig().to_engine()

    started = time.perf_counter()
    core = resolve("auto")
    spamassassin = data.load("spamassassin")
    global_messages = [m for m in spamassassin if folder_of(m) in GLOBAL_FOLDERS]
    global_messages = data.spread(global_messages, args.limit)
    global_table = table_of(tokenize_corpus(global_messages, core=core, text_only_view=True))
    print(
        f"global: {len(global_messages)} spamassassin messages ({', '.join(GLOBAL_FOLDERS)}), "
        f"{global_table.n_tokens} tokens",
        file=sys.stderr,
    )
    users = []
    for user in chosen:
        messages = spamassassin if user.corpus == "spamassassin" else data.load(user.corpus)
        if user.folders is not None:
            messages = [m for m in messages if folder_of(m) in user.folders]
        messages = data.spread(messages, args.limit)
        examples = tokenize_corpus(messages, core=core, text_only_view=True)
        users.append(
            run_user(
                user,
                examples,
                global_table,
                config,
                trainings=trainings,
                seeds=args.seeds,
                weights=weights,
            )
        )
        print(f"{user.name}: {len(examples)} messages", file=sys.stderr)
    latency = None
    if args.latency:
        import tempfile

        mailbox = [m for m in spamassassin if folder_of(m) in USERS[0].folders]  # type: ignore[operator]
        mailbox = stream_order_messages(mailbox)
        with tempfile.TemporaryDirectory() as folder:
            latency = time_classify(mailbox, global_messages, args.latency, Path(folder))
        print(json.dumps(latency, indent=2))
    report = {
        "benchmark": "personal",
        "latency": latency,
        "global": {"messages": len(global_messages), "tokens": global_table.n_tokens},
        "config": {"event_model": config.event_model, "seeds": args.seeds, "weights": weights},
        "seconds": time.perf_counter() - started,
        "users": users,
    }
    print("\n".join(table_lines(users, weights)))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
