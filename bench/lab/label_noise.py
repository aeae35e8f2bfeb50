"""How much of a stream's ranking error is copies of one message labelled both ways.

    python -m bench.lab.label_noise [--limit N] [--no-bogofilter] [--json out.json]

trec07p-early in delivery order, each message scored then trained, by spamsift (the model
defaults, `score_stream`) and bogofilter (`bench.accuracy.Bogofilter.online`, its compiled-in
defaults). Copies of one message are messages of the same From and Subject header (case and
white space folded): one mailing sent to several addresses. A group of copies labelled spam
in one place and ham in another is label noise, for any filter: whatever a filter learnt from
the first copy, it errs on a later one. Printed, in aggregate only (the corpus's terms allow
no ids or per-message labels): how many such groups and messages there are, the ranking
measures of each system with every message and without those groups, and the share of each
system's misordered (spam, ham) pairs, the 1-ROCA's numerator, that involve them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from email.parser import BytesHeaderParser
from email.policy import compat32
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.service.corpus import LabelledMessage
from app.service.evaluation import ranking_measures, score_stream, tokenize_corpus
from app.service.model_config import ModelConfig
from app.text.core import resolve
from bench import data
from bench.accuracy import Bogofilter, message_file, spamicity_log_odds


def copy_key(message: LabelledMessage) -> tuple[str, str]:
    """The From and Subject of a raw message, case and white space folded."""
    headers = BytesHeaderParser(policy=compat32).parsebytes(message.raw or b"")

    def folded(name: str) -> str:
        return " ".join(str(headers.get(name, "")).split()).casefold()

    return folded("from"), folded("subject")


def labelled_both_ways(messages: list[LabelledMessage]) -> NDArray[np.bool_]:
    """Which messages belong to a group of copies with both labels."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, message in enumerate(messages):
        key = copy_key(message)
        if key[1]:  # a message without a Subject is nobody's copy
            groups[key].append(index)
    noisy = np.zeros(len(messages), dtype=np.bool_)
    for members in groups.values():
        if len({messages[i].label for i in members}) > 1:
            noisy[members] = True
    return noisy


def misordered(scores: NDArray[np.float64], spam: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Per message, the (spam, ham) pairs it is in that the ranking puts the wrong way round
    (ties count half): the spam's ham scored at or above it, the ham's spam at or below it."""
    ham_scores, spam_scores = np.sort(scores[~spam]), np.sort(scores[spam])
    counts = np.zeros(scores.size)
    above = ham_scores.size - np.searchsorted(ham_scores, scores[spam], side="right")
    tied = np.searchsorted(ham_scores, scores[spam], side="right") - np.searchsorted(
        ham_scores, scores[spam], side="left"
    )
    counts[spam] = above + tied / 2
    below = np.searchsorted(spam_scores, scores[~spam], side="left")
    tied = np.searchsorted(spam_scores, scores[~spam], side="right") - below
    counts[~spam] = below + tied / 2
    return counts


def measures(scores: NDArray[np.float64], spam: NDArray[np.bool_], keep: Any) -> dict[str, Any]:
    ranking = ranking_measures(scores[keep], spam[keep], [""] * int(np.count_nonzero(keep)))
    return {
        "one_minus_roca_percent": ranking.one_minus_roca_percent,
        "one_minus_roca_percent_ci95": list(ranking.one_minus_roca_percent_ci95),
        "fnr_at_0.1pct_fpr_percent": 100 * ranking.fnr_at_max_fpr,
        "fnr_at_1pct_fpr_percent": 100 * ranking.fnr_at_1pct_fpr,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.label_noise", description=__doc__)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--no-bogofilter", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    messages = data.load("trec07p-early")[: args.limit]
    spam = np.array([m.label == "spam" for m in messages])
    noisy = labelled_both_ways(messages)
    examples = tokenize_corpus(messages, core=resolve("auto"), text_only_view=False)
    systems = {"spamsift": score_stream(examples, ModelConfig().to_engine()).scores}
    bogofilter = shutil.which("bogofilter")
    if bogofilter and not args.no_bogofilter:
        folder = Path(tempfile.mkdtemp(prefix="spamsift-noise-"))
        try:
            files = {}
            for index, message in enumerate(messages):
                path = folder / f"{index:06d}"
                path.write_bytes(message_file(message, False))
                files[message.id] = path
            labels = {m.id: m.label for m in messages}
            scores = Bogofilter(bogofilter, folder).online([m.id for m in messages], files, labels)
            systems["bogofilter"] = spamicity_log_odds(scores)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    result: dict[str, Any] = {
        "messages": len(messages),
        "groups_labelled_both_ways": len(
            {copy_key(m) for m, n in zip(messages, noisy, strict=True) if n}
        ),
        "messages_in_them": int(noisy.sum()),
        "of_them_spam": int((noisy & spam).sum()),
        "systems": {},
    }
    for name, scores in systems.items():
        total = misordered(scores, spam)[spam].sum()
        clean = misordered(scores[~noisy], spam[~noisy])[spam[~noisy]].sum()
        result["systems"][name] = {
            "every_message": measures(scores, spam, np.ones(len(messages), dtype=np.bool_)),
            "without_those_groups": measures(scores, spam, ~noisy),
            "misordered_pairs": float(total),
            "share_of_misordered_pairs_involving_them": float(1 - clean / total) if total else 0.0,
        }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
