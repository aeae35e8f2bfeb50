"""Where a "mark as spam" click's CPU goes, in process, on SQLite or PostgreSQL.

    python -m bench.lab.click_cost [--clicks 300] [--database sqlite|postgresql] [--postgres URL]

Trains the SpamAssassin split's first 2,000 training messages (in batches of 500, the
harness's fixed shuffle) into a fresh database, then sends feedback with the message for
test messages, each with the label its corpus does not give it (a correction): 50 to warm
up, then `--clicks` timed, one after the other. Prints this process's user and system CPU
per click (on PostgreSQL the server's own CPU is not in it), then the same clicks again under
cProfile, each stage's cumulative time per click (a stage's time includes the stages it
calls; the profiler itself adds about a third).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
from collections.abc import Sequence
from pathlib import Path

from app.service.corpus import LabelledMessage
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import apply_feedback, train_prepared
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from bench import data
from bench.databases import fresh_database, postgres_server_url
from bench.train_path import prepare_all
from bench.versus_bogofilter import TRAIN_BATCH, bench_settings

TRAINED = 2000
WARM_CLICKS = 50

# (stage, the functions whose cumulative time it is: "file:function", or a builtin's name
# as cProfile gives it; "|" between alternatives)
STAGES = (
    ("the whole click", "training.py:apply_feedback"),
    ("tokenizing the message", "messages.py:prepare"),
    ("finding a trained or classified copy (a read transaction)", "training.py:_known_as"),
    ("scoring it for pairs_until_log_odds", "training.py:_margins_now"),
    ("  of which the scoring cache's refresh after the last write", "naive_bayes.py:refresh"),
    ("the write transaction, begin to commit", "group_commit.py:_commit"),
    ("  taking the model's row lock", "models.py:lock_model_row"),
    ("  token ids, new tokens stored", "write.py:token_ids"),
    ("  count rows upserted", "counts.py:add_token_counts"),
    ("  attribute sums", "attributes.py:add_attribute_sums"),
    ("  class totals", "counts.py:add_class_totals"),
    ("  ledger row", "ledger.py:insert_trained"),
    ("  activity counters", "activity.py:add_activity"),
    ("  the model's row", "models.py:save"),
    (
        "  the database's commit (SQLite's, or the driver's)",
        "<method 'commit'|connection.py:commit",
    ),
    ("  the live copy updated after the commit", "held.py:apply_own_write"),
)


def corrections(messages: Sequence[LabelledMessage]) -> list[tuple[Message, str]]:
    return [
        (
            Message(raw=m.raw, text=m.text, message_id=m.id),
            "spam" if m.label == "ham" else "ham",
        )
        for m in messages
    ]


def stage_times(profile: cProfile.Profile, clicks: int) -> list[tuple[str, float]]:
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    found: list[tuple[str, float]] = []
    for stage, where in STAGES:
        total = 0.0
        wanted = where.split("|")
        for (filename, _, function), (_, _, _, cumulative, _) in stats.items():
            name = f"{Path(filename).name}:{function}"
            if name in wanted or any(function.startswith(w) for w in wanted if w[0] == "<"):
                total += cumulative
        found.append((stage, 1000 * total / clicks))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clicks", type=int, default=300)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgres", default=None, help="server URL (default: the env's)")
    args = parser.parse_args(argv)
    split = data.split("spamassassin")
    trained = [(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in split.train]
    items = prepare_all(trained[:TRAINED])
    clicks = corrections(split.test[: WARM_CLICKS + 2 * args.clicks])
    kind = args.database
    with (
        tempfile.TemporaryDirectory() as folder,
        fresh_database(kind, Path(folder), postgres_server_url(args.postgres)) as url,
    ):
        db = Database(url)
        upgrade_schema(db)
        runtime = Runtime(bench_settings(url), db)
        try:
            for start in range(0, TRAINED, TRAIN_BATCH):
                train_prepared(
                    runtime, model_name="default", items=items[start : start + TRAIN_BATCH]
                )

            def click(message: Message, label: str) -> None:
                apply_feedback(
                    runtime, model_name="default", label=label, message_id=None, message=message
                )

            for message, label in clicks[:WARM_CLICKS]:
                click(message, label)
            timed = clicks[WARM_CLICKS : WARM_CLICKS + args.clicks]
            before = os.times()
            for message, label in timed:
                click(message, label)
            after = os.times()
            profiled = clicks[WARM_CLICKS + args.clicks :]
            profile = cProfile.Profile()
            profile.enable()
            for message, label in profiled:
                click(message, label)
            profile.disable()
        finally:
            runtime.close()
    n = len(timed)
    print(f"{kind}, a model of {TRAINED} messages, {n} clicks one after the other:")
    print(f"  user CPU per click   {1000 * (after.user - before.user) / n:6.2f} ms")
    print(f"  system CPU per click {1000 * (after.system - before.system) / n:6.2f} ms")
    print(f"under cProfile ({len(profiled)} more clicks), cumulative ms per click:")
    for stage, ms in stage_times(profile, len(profiled)):
        print(f"  {stage:<62} {ms:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
