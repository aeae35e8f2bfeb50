"""Accuracy on every shared corpus and view, batch split and online, next to bogofilter; and
mail as it arrives: in-order streams beside bogofilter and scikit-learn's naive Bayes.

    python -m bench.accuracy                          # every view and stream, full corpora
    python -m bench.accuracy --limit 300 --json a.json  # a slice of each corpus (smoke)
    python -m bench.accuracy --views sms --streams '' --no-bogofilter --set rf_min_dev=0.1
    python -m bench.accuracy --drop digits --drop urlpath   # ablate token families
    python -m bench.accuracy --views '' --streams trec07p-inorder,enron1 --limit 2000

Streams (`--streams`, default all; `bench.streams` describes them, their peers and measures):
trec07p-early in delivery order and enron-spam's six users, each in arrival order with a model
of its own, every message scored then trained by spamsift, bogofilter, and scikit-learn's
MultinomialNB and BernoulliNB (`--sklearn`; `--sklearn-every N` trains them every N messages,
since each of their `partial_fit` calls costs O(tokens in the stream)). Per stream and system:
1-ROCA %, FNR at FPR <= 0.1 % and 1 %, spam and ham recall and the unsure share at spamsift's
default thresholds, tokens in the model, CPU ms per message, the stream in fifths, and new-kind
spam. `--limit` (or `--stream-limit`) takes the first N messages of each stream.

Views: spamassassin (full and text-only), trec06c-subset, sms-spam-collection and csdmc2010
(text-only: their headers give the label away). Each view is run in both protocols of
`app.service.evaluation`: the fixed batch split and the online immediate-feedback stream
(fixed shuffle, seed 0: these corpora are not in delivery order). bogofilter (with its compiled-in
defaults, `-C`) sees the same messages in the same harness: the text-only view is given to it as
a message of one text/plain part; batch is bulk training (`-s -b`, `-n -b`) and one bulk scoring
(`-TT -b`); online is one `-TT` and one `-s` or `-n` per message, in the same order.

Views: per view and protocol the table shows 1-ROCA % and FNR at FPR <= 0.1 % of each system and
spamsift's ratio to the best peer (bogofilter for the views, the best of bogofilter and
scikit-learn's for the streams; 1.0 = level, lower is better, an absolute floor of
0.001 % / 0.1 % keeps a 0-vs-0 tie at 1.0); the summary gives the worst ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.bayes.naive_bayes import NaiveBayesConfig
from app.service.corpus import LabelledMessage
from app.service.evaluation import (
    Example,
    evaluate_examples,
    evaluate_online,
    is_test_message,
    ranking_measures,
    score_stream,
    stream_order,
    tokenize_corpus,
)
from app.service.model_config import ModelConfig
from app.text import text_only
from app.text.core import TokenCore, resolve
from bench import data
from bench.streams import (
    SKLEARN_MODELS,
    STREAMS,
    ChildCpu,
    Run,
    Stream,
    measure_run,
    novelty,
    sklearn_stream,
    stream_messages,
    verdicts_of,
)
from bench.token_experiments import ADDED, case_kept
from bench.versus_bogofilter import bogofilter_version, find_bogofilter


@dataclass(frozen=True)
class View:
    name: str
    corpus: str
    text_only: bool


VIEWS = (
    View("spamassassin", "spamassassin", False),
    View("spamassassin-text", "spamassassin", True),
    View("trec06c-text", "trec06c-subset", True),
    View("sms", "sms-spam-collection", False),
    View("csdmc2010-text", "csdmc2010", True),
)
SHUFFLE_SEED = 0
# Ratios compare with a floor, so that 0 against 0 is level and 0.001 against 0 is not infinite.
FLOORS = {"one_minus_roca_percent": 0.001, "fnr_at_max_fpr": 0.001}


def _has_prefix(*prefixes: str) -> Callable[[str], bool]:
    return lambda token: token.startswith(prefixes)


_EARLIER_PREFIXES = frozenset(
    {
        "subject",
        "x-mailer",
        "user-agent",
        "organization",
        "received",
        "message-id",
        "list-id",
        "content-type",
        "mime-version",
        "from",
        "to",
        "cc",
        "reply-to",
        "sender",
        "return-path",
        "errors-to",
        "delivered-to",
        "header",
        "url",
        "urlpath",
        "email",
        "digits",
        "attachment",
        "filename",
        "hidden",
        "skip",
        "pair",
        "size",
        "links",
        "html",
    }
)


# Token families that can be ablated by dropping their tokens after tokenizing (exact: the
# tokenizer emits each family independently of the others).
FAMILIES: dict[str, Callable[[str], bool]] = {
    "digits": _has_prefix("digits:"),
    "urlpath": _has_prefix("urlpath:"),
    "url": _has_prefix("url:"),
    "email": _has_prefix("email:"),
    "currency": lambda token: token[:1] in "$\u00a3\u20ac\u00a5" and len(token) > 1,
    "mime-shape": _has_prefix("content-type:", "attachment:", "filename:"),
    "header-names": _has_prefix("header:"),
    "received": _has_prefix("received:"),
    "message-id": _has_prefix("message-id:"),
    "subject": _has_prefix("subject:"),
    "from": _has_prefix("from:"),
    "recipients": _has_prefix("to:", "cc:", "delivered-to:"),
    "date": _has_prefix("date:"),
    "list-headers": _has_prefix("list-"),
    "x-headers": _has_prefix("x-"),
    "hidden": _has_prefix("hidden:"),
    "pairs": _has_prefix("pair:"),
    "shape": _has_prefix("size:", "links:", "html:"),
    # header words beyond the nine headers that gave words before every header did
    "other-header-words": lambda token: (
        ":" in token and token.partition(":")[0] not in _EARLIER_PREFIXES
    ),
}


def message_file(message: LabelledMessage, text_only_view: bool) -> bytes:
    """The bytes bogofilter reads for a message in a view."""
    if message.raw is not None and not text_only_view:
        return message.raw
    text = (
        text_only(message.raw, core=resolve("auto"))
        if message.raw is not None
        else (message.text or "")
    )
    return b"Content-Type: text/plain; charset=utf-8\n\n" + text.encode("utf-8", "replace")


class Bogofilter:
    """bogofilter 1.2.x with its compiled-in defaults on one folder of message files."""

    def __init__(self, path: str, folder: Path) -> None:
        self.path = path
        self.folder = folder
        self.runs = 0

    def _wordlist(self) -> Path:
        self.runs += 1
        wordlist = self.folder / f"wordlist-{self.runs}"
        wordlist.mkdir()
        return wordlist

    def _run(self, wordlist: Path, arguments: list[str], stdin: str | bytes) -> str:
        done = subprocess.run(
            [self.path, "-C", "-d", str(wordlist), *arguments],
            input=stdin.encode() if isinstance(stdin, str) else stdin,
            capture_output=True,
        )
        if done.returncode not in (0, 1, 2):
            raise RuntimeError(f"bogofilter failed ({done.returncode}): {done.stderr[-500:]!r}")
        return done.stdout.decode()

    def batch(self, files: dict[str, Path], labels: dict[str, str]) -> dict[str, float]:
        """Train the training split in bulk, score the test split; return id -> spamicity."""
        wordlist = self._wordlist()
        train = [i for i in files if not is_test_message(i)]
        test = [i for i in files if is_test_message(i)]
        for flag, label in (("-s", "spam"), ("-n", "ham")):
            listing = "".join(f"{files[i]}\n" for i in train if labels[i] == label)
            self._run(wordlist, [flag, "-b"], listing)
        output = self._run(wordlist, ["-TT", "-b"], "".join(f"{files[i]}\n" for i in test))
        by_path = {str(files[i]): i for i in test}
        scores = {}
        for line in output.splitlines():
            path, _, score = line.rpartition(" ")
            scores[by_path[path]] = float(score)
        if len(scores) != len(test):
            raise RuntimeError(f"bogofilter scored {len(scores)} of {len(test)} messages")
        return scores

    def wordlist_tokens(self) -> int:
        """Tokens in the word list of the last run (`bogoutil -d`, its counters left out)."""
        bogoutil = Path(self.path).with_name("bogoutil")
        wordlist = self.folder / f"wordlist-{self.runs}" / "wordlist.db"
        if not wordlist.exists():
            return 0
        done = subprocess.run([str(bogoutil), "-d", str(wordlist)], capture_output=True, check=True)
        return sum(not line.startswith(b".") for line in done.stdout.splitlines())

    def online(
        self, order: list[str], files: dict[str, Path], labels: dict[str, str]
    ) -> list[float]:
        """Score each message, then train it with its label (train everything)."""
        wordlist = self._wordlist()
        scores = []
        for message_id in order:
            body = files[message_id].read_bytes()
            if (wordlist / "wordlist.db").exists():
                scores.append(float(self._run(wordlist, ["-TT"], body).split()[-1]))
            else:
                scores.append(0.5)  # bogofilter refuses to score before its first training
            self._run(wordlist, ["-s" if labels[message_id] == "spam" else "-n"], body)
        return scores


def spamicity_log_odds(scores: Sequence[float]) -> np.ndarray:
    """bogofilter's spamicity as log odds (monotone: the ranking is bogofilter's own)."""
    p = np.clip(np.asarray(scores, dtype=np.float64), 1e-300, 1 - 1e-16)
    return np.log(p) - np.log1p(-p)


def drop_families(examples: list[Example], dropped: Sequence[str]) -> list[Example]:
    if not dropped:
        return examples
    tests = [FAMILIES[name] for name in dropped]
    return [
        Example(
            e.id,
            e.label,
            {t: n for t, n in e.tokens.items() if not any(test(t) for test in tests)},
        )
        for e in examples
    ]


def add_families(
    examples: list[Example],
    messages: Sequence[LabelledMessage],
    added: Sequence[str],
    text_only_view: bool,
) -> list[Example]:
    """Add the tokens of candidate families (bench.token_experiments) to each example."""
    if not added:
        return examples
    result = []
    for example, message in zip(examples, messages, strict=True):
        tokens = dict(example.tokens)
        for name in added:
            tokens.update(ADDED[name](message, text_only_view, example.tokens))
        result.append(Example(example.id, example.label, tokens))
    return result


def measures_dict(measures: Any) -> dict[str, Any]:
    return {
        "one_minus_roca_percent": measures.one_minus_roca_percent,
        "one_minus_roca_percent_ci95": measures.one_minus_roca_percent_ci95,
        "fnr_at_max_fpr": measures.fnr_at_max_fpr,
        "fnr_at_1pct_fpr": measures.fnr_at_1pct_fpr,
        "fnr_at_0fp": measures.fnr_at_0fp,
        "fnr_at_1fp": measures.fnr_at_1fp,
        "fnr_at_1fp_ci95": measures.fnr_at_1fp_ci95,
        "fnr_at_2fp": measures.fnr_at_2fp,
        "fnr_at_2fp_ci95": measures.fnr_at_2fp_ci95,
        "top_errors": [vars(e) for e in measures.top_errors],
    }


def run_view(
    view: View,
    messages: list[LabelledMessage],
    config: NaiveBayesConfig,
    *,
    train_mode: str,
    dropped: Sequence[str],
    bogofilter: Bogofilter | None,
    folder: Path,
    protocols: Sequence[str],
    added: Sequence[str] = (),
    keep_case: bool = False,
    core: TokenCore | None = None,
) -> dict[str, Any]:
    """`core`: the token core, by default the compiled one where it is built."""
    core = core or resolve("auto")
    started = time.perf_counter()
    with case_kept() if keep_case else contextlib.nullcontext():
        examples = tokenize_corpus(messages, core=core, text_only_view=view.text_only)
    examples = add_families(examples, messages, added, view.text_only)
    tokenize_seconds = time.perf_counter() - started
    examples = drop_families(examples, dropped)
    result: dict[str, Any] = {
        "view": view.name,
        "corpus": view.corpus,
        "text_only": view.text_only,
        "messages": len(examples),
        "tokens_per_message": sum(len(e.tokens) for e in examples) / max(len(examples), 1),
        "distinct_tokens": len({t for e in examples for t in e.tokens}),
        "tokenize_seconds_per_message": tokenize_seconds / max(len(examples), 1),
    }
    if "batch" in protocols:
        report = evaluate_examples(
            examples,
            corpus=view.corpus,
            config=config,
            event_models=(config.event_model,),
            text_only_view=view.text_only,
        )
        result["batch"] = {
            "spamsift": measures_dict(report.scorers[0].ranking),
            "test_messages": report.test_messages,
        }
    if "online" in protocols:
        online = evaluate_online(
            examples,
            corpus=view.corpus,
            config=config,
            train_mode=train_mode,  # type: ignore[arg-type]
            shuffle_seed=SHUFFLE_SEED,
            text_only_view=view.text_only,
        )
        result["online"] = {
            "spamsift": measures_dict(online.ranking),
            "spamsift_messages_per_second": online.messages_per_second,
            "trained": online.trained,
            "learning_curve": [vars(point) for point in online.learning_curve],
        }
    if bogofilter is not None:
        files: dict[str, Path] = {}
        labels = {m.id: m.label for m in messages}
        directory = folder / view.name
        directory.mkdir(parents=True, exist_ok=True)
        for index, message in enumerate(messages):
            path = directory / f"{index:06d}"
            path.write_bytes(message_file(message, view.text_only))
            files[message.id] = path
        if "batch" in protocols:
            scores = bogofilter.batch(files, labels)
            test = [m.id for m in messages if is_test_message(m.id)]
            result["batch"]["bogofilter"] = measures_dict(
                ranking_measures(
                    spamicity_log_odds([scores[i] for i in test]),
                    np.array([labels[i] == "spam" for i in test]),
                    test,
                )
            )
        if "online" in protocols:
            order = [e.id for e in stream_order(examples, SHUFFLE_SEED)]
            started = time.perf_counter()
            scores_list = bogofilter.online(order, files, labels)
            seconds = time.perf_counter() - started
            result["online"]["bogofilter"] = measures_dict(
                ranking_measures(
                    spamicity_log_odds(scores_list),
                    np.array([labels[i] == "spam" for i in order]),
                    order,
                )
            )
            result["online"]["bogofilter_messages_per_second"] = len(order) / seconds
    for protocol in protocols:
        part = result.get(protocol, {})
        if "bogofilter" in part:
            part["ratio_to_best_peer"] = {
                measure: max(part["spamsift"][measure], floor)
                / max(part["bogofilter"][measure], floor)
                for measure, floor in FLOORS.items()
            }
    return result


def run_stream(
    stream: Stream,
    messages: list[LabelledMessage],
    config: NaiveBayesConfig,
    *,
    train_mode: str,
    bogofilter: Bogofilter | None,
    sklearn_models: Sequence[str],
    sklearn_every: int,
    folder: Path,
    core: TokenCore | None = None,
) -> dict[str, Any]:
    """Every system over one stream in its file order, each message scored then trained
    (`bench.streams`)."""
    core = core or resolve("auto")
    started = time.process_time()
    examples = tokenize_corpus(messages, core=core, text_only_view=False)
    tokenize_cpu = time.process_time() - started
    is_spam = np.array([example.label == "spam" for example in examples], dtype=bool)
    ids = [example.id for example in examples]
    shares = novelty(examples)
    runs: dict[str, Run] = {}
    started = time.process_time()
    scored = score_stream(examples, config, train_mode)  # type: ignore[arg-type]
    runs["spamsift"] = Run(
        scored.scores,
        scored.verdicts,
        tokenize_cpu + time.process_time() - started,
        scored.stored_tokens,
    )
    for model in sklearn_models:
        run = sklearn_stream(examples, model, every=sklearn_every)
        runs[model] = Run(
            run.scores, verdicts_of(run.scores, config), tokenize_cpu + run.cpu_seconds, run.tokens
        )
    if bogofilter is not None:
        directory = folder / stream.name
        directory.mkdir(parents=True, exist_ok=True)
        files: dict[str, Path] = {}
        for index, message in enumerate(messages):
            path = directory / f"{index:06d}"
            path.write_bytes(message_file(message, False))
            files[message.id] = path
        cpu = ChildCpu()
        odds = spamicity_log_odds(bogofilter.online(ids, files, {m.id: m.label for m in messages}))
        runs["bogofilter"] = Run(
            odds, verdicts_of(odds, config), cpu.seconds(), bogofilter.wordlist_tokens()
        )
    systems = {
        name: measure_run(run, is_spam, ids, shares, messages=len(examples))
        for name, run in runs.items()
    }
    peers = [name for name in systems if name != "spamsift"]
    result: dict[str, Any] = {
        "stream": stream.name,
        "corpus": stream.corpus,
        "source": stream.source,
        "order": "file order (delivery / arrival)",
        "messages": len(examples),
        "spam": int(is_spam.sum()),
        "ham": int((~is_spam).sum()),
        "tokens_per_message": sum(len(e.tokens) for e in examples) / max(len(examples), 1),
        "sklearn_every": sklearn_every,
        "systems": systems,
    }
    if peers:
        result["ratio_to_best_peer"] = {
            measure: max(systems["spamsift"][measure], floor)
            / max(min(systems[peer][measure] for peer in peers), floor)
            for measure, floor in FLOORS.items()
        }
    return result


def stream_tables(results: list[dict[str, Any]]) -> list[str]:
    """Accuracy and cost per stream and system, then the drift view."""
    lines = [
        "| stream | system | 1-ROCA % | FNR@0.1%FPR | FNR@1%FPR | spam recall | ham recall "
        "| unsure | tokens | CPU ms/msg |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for name, m in result["systems"].items():
            lines.append(
                f"| {result['stream']} | {name} | {m['one_minus_roca_percent']:.3f} "
                f"| {100 * m['fnr_at_max_fpr']:.2f} | {100 * m['fnr_at_1pct_fpr']:.2f} "
                f"| {100 * m['spam_recall']:.1f} | {100 * m['ham_recall']:.1f} "
                f"| {100 * m['unsure_share']:.1f} % | {m['tokens']:,} "
                f"| {m['cpu_ms_per_message']:.2f} |"
            )
    lines += [
        "",
        "| stream | system | 1-ROCA % by fifth of the stream | FNR@1%FPR by fifth "
        "| new-kind spam: FNR@1%FPR (n) | after new (n) | other spam (n) |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for result in results:
        for name, m in result["systems"].items():
            rocas = " / ".join(f"{s['one_minus_roca_percent']:.2f}" for s in m["stretches"])
            fnrs = " / ".join(f"{100 * s['fnr_at_1pct_fpr']:.1f}" for s in m["stretches"])
            new = m["new_spam"]
            cells = " | ".join(
                f"{100 * new[part]['fnr_at_1pct_fpr']:.1f} % ({new[part]['spam']})"
                for part in ("new", "after_new", "other")
            )
            lines.append(f"| {result['stream']} | {name} | {rocas} | {fnrs} | {cells} |")
    return lines


def config_from(settings: Sequence[str]) -> NaiveBayesConfig:
    """ModelConfig from `key=value` settings (`options_from`), checked by ModelConfig as the
    API checks it."""
    return ModelConfig(**options_from(settings)).to_engine()


def options_from(settings: Sequence[str]) -> dict[str, Any]:
    """Model options from `key=value` settings: a value is read as JSON (numbers, true/false,
    null) or else as a string."""
    options: dict[str, Any] = {}
    for setting in settings:
        key, _, value = setting.partition("=")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| view | protocol | spamsift 1-ROCA % | bogofilter 1-ROCA % | spamsift FNR@0.1%FPR "
        "| bogofilter FNR@0.1%FPR | ratio 1-ROCA | ratio FNR |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for protocol in ("batch", "online"):
            part = result.get(protocol)
            if not part:
                continue
            ours = part["spamsift"]
            peer = part.get("bogofilter")
            ratios = part.get("ratio_to_best_peer", {})
            lines.append(
                f"| {result['view']} | {protocol} | {ours['one_minus_roca_percent']:.3f} | "
                + (f"{peer['one_minus_roca_percent']:.3f}" if peer else "—")
                + f" | {100 * ours['fnr_at_max_fpr']:.2f} | "
                + (f"{100 * peer['fnr_at_max_fpr']:.2f}" if peer else "—")
                + " | "
                + " | ".join(
                    f"{ratios[m]:.2f}" if m in ratios else "—"
                    for m in ("one_minus_roca_percent", "fnr_at_max_fpr")
                )
                + " |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.accuracy", description=__doc__)
    parser.add_argument("--views", default=",".join(v.name for v in VIEWS))
    parser.add_argument("--limit", type=int, default=None, help="messages per corpus (spread)")
    parser.add_argument(
        "--view-limit",
        action="append",
        default=[],
        metavar="VIEW=N",
        help="messages of one view (spread), e.g. trec06c-text=4000",
    )
    parser.add_argument("--protocols", default="batch,online")
    parser.add_argument("--train-mode", default="all", choices=["all", "error", "unsure"])
    parser.add_argument("--set", action="append", default=[], help="model option key=value")
    parser.add_argument("--drop", action="append", default=[], choices=sorted(FAMILIES))
    parser.add_argument(
        "--add",
        action="append",
        default=[],
        choices=sorted(ADDED),
        help="add a candidate token family (bench.token_experiments)",
    )
    parser.add_argument(
        "--keep-case", action="store_true", help="tokenize with case kept, as bogofilter"
    )
    parser.add_argument(
        "--streams",
        default=",".join(s.name for s in STREAMS),
        help="in-order streams to run (comma-separated; '' for none), each limited to its "
        "first --limit / --stream-limit messages",
    )
    parser.add_argument(
        "--stream-limit", type=int, default=None, help="messages of each stream (its first N)"
    )
    parser.add_argument(
        "--sklearn",
        default=",".join(SKLEARN_MODELS),
        help="scikit-learn peers on the streams (comma-separated; '' for none)",
    )
    parser.add_argument(
        "--sklearn-every",
        type=int,
        default=1,
        help="streams: sklearn trains with partial_fit after every N messages (1: each)",
    )
    parser.add_argument("--no-bogofilter", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    config = config_from(args.set)
    protocols = [p for p in args.protocols.split(",") if p]
    views = [v for v in VIEWS if v.name in args.views.split(",")]
    streams = [s for s in STREAMS if s.name in args.streams.split(",")]
    sklearn_models = [m for m in args.sklearn.split(",") if m]
    for model in sklearn_models:
        if model not in SKLEARN_MODELS:
            parser.error(f"--sklearn: {model!r} is not one of {', '.join(SKLEARN_MODELS)}")
    path = None if args.no_bogofilter else find_bogofilter(install=False)[0]
    view_limits = {
        name: int(count)
        for name, _, count in (setting.partition("=") for setting in args.view_limit)
    }
    results: list[dict[str, Any]] = []
    stream_results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="spamsift-accuracy-") as tmp:
        peer = Bogofilter(path, Path(tmp)) if path else None
        for view in views:
            limit = view_limits.get(view.name, args.limit)
            messages = data.spread(data.load(view.corpus), limit)
            started = time.perf_counter()
            result = run_view(
                view,
                messages,
                config,
                train_mode=args.train_mode,
                dropped=args.drop,
                bogofilter=peer,
                folder=Path(tmp),
                protocols=protocols,
                added=args.add,
                keep_case=args.keep_case,
            )
            result["seconds"] = time.perf_counter() - started
            result["limit"] = limit
            results.append(result)
            if args.json:  # after each view: a long run keeps what it has measured
                args.json.write_text(json.dumps({"views": results}, indent=1, default=float))
            print(f"{view.name}: {result['seconds']:.0f} s", file=sys.stderr, flush=True)
        corpora: dict[str, list[LabelledMessage]] = {}
        for stream in streams:
            if stream.corpus not in corpora:
                corpora[stream.corpus] = data.load(stream.corpus)
            limit = args.stream_limit if args.stream_limit is not None else args.limit
            started = time.perf_counter()
            result = run_stream(
                stream,
                stream_messages(stream, corpora[stream.corpus], limit),
                config,
                train_mode=args.train_mode,
                bogofilter=peer,
                sklearn_models=sklearn_models,
                sklearn_every=args.sklearn_every,
                folder=Path(tmp),
            )
            result["seconds"] = time.perf_counter() - started
            result["limit"] = limit
            stream_results.append(result)
            if args.json:
                args.json.write_text(
                    json.dumps(
                        {"views": results, "streams": stream_results}, indent=1, default=float
                    )
                )
            print(f"{stream.name}: {result['seconds']:.0f} s", file=sys.stderr, flush=True)
    ratios = [
        ratio
        for result in results
        for protocol in protocols
        for ratio in result.get(protocol, {}).get("ratio_to_best_peer", {}).values()
    ]
    stream_ratios = [
        ratio
        for result in stream_results
        for ratio in result.get("ratio_to_best_peer", {}).values()
    ]
    report = {
        "config": {
            name: len(value) if isinstance(value, frozenset) else value
            for name, value in asdict(config).items()
        },
        "settings": args.set,
        "dropped": args.drop,
        "added": args.add,
        "keep_case": args.keep_case,
        "train_mode": args.train_mode,
        "limit": args.limit,
        "bogofilter": bogofilter_version(path) if path else None,
        "views": results,
        "worst_ratio_to_best_peer": max(ratios) if ratios else None,
        "table": table(results),
        "sklearn": sklearn_models,
        "streams": stream_results,
        "worst_stream_ratio_to_best_peer": max(stream_ratios) if stream_ratios else None,
        "stream_table": stream_tables(stream_results),
    }
    if results:
        print("\n".join(report["table"]))
    if report["worst_ratio_to_best_peer"] is not None:
        print(f"worst ratio to the best peer: {report['worst_ratio_to_best_peer']:.2f}")
    if stream_results:
        print("\n".join(report["stream_table"]))
    if report["worst_stream_ratio_to_best_peer"] is not None:
        print(
            "streams, worst ratio to the best peer: "
            f"{report['worst_stream_ratio_to_best_peer']:.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
