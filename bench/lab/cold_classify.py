"""Classifying with models not held, pass after pass: `python -m bench.lab.cold_classify DATABASE`.

DATABASE is one `python -m bench.many_models sqlite|postgresql N --database DATABASE` built
(models `user00000` ... of 50 SpamAssassin messages each). A fresh Runtime (nothing held)
classifies one message with each of `--models` models (from `--first`), `--passes` times
over (default 3; the first pass reads pages the others find in the operating system's cache),
then one model it holds as many times: wall milliseconds of each `classify()`, the median
per pass. The models are not loaded meanwhile: each is classified once a pass, far below the
50 classifications in 10 s that make one hot.

`--repo PATH` runs another checkout's `app` (this lab's code, that checkout's service): the
two checkouts' figures in turn, from one command line each.

    python -m bench.lab.cold_classify sqlite:////tmp/many300.db --models 300
    python -m bench.lab.cold_classify sqlite:////tmp/many300.db --models 300 --repo ../before
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.cold_classify", description=__doc__)
    parser.add_argument("database", help="a database python -m bench.many_models built")
    parser.add_argument("--models", type=int, default=300)
    parser.add_argument("--first", type=int, default=0, help="the first model's number")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--repo", help="another checkout whose app to run")
    args = parser.parse_args(argv)
    if args.repo:
        sys.path.insert(0, args.repo)
    # After --repo: the service measured is that checkout's.
    from app.config import Settings
    from app.service.classification import classify
    from app.service.runtime import Runtime
    from bench import data
    from bench.many_models import as_message, model_names

    probe = data.load("spamassassin")[-200:]
    names = model_names(args.first + args.models)[args.first :]
    messages = [as_message(probe[i % len(probe)]) for i in range(len(names))]
    settings = Settings(database_url=args.database, live_models_max_mb=64, _env_file=None)  # type: ignore[call-arg]
    rt = Runtime(settings)
    figures: dict[str, Any] = {"app": sys.modules["app"].__file__, "cold_p50_ms": []}
    try:
        for _ in range(args.passes):
            times = []
            for name, message in zip(names, messages, strict=True):
                started = time.perf_counter()
                classify(rt, model_name=name, message=message)
                times.append(time.perf_counter() - started)
            figures["cold_p50_ms"].append(round(statistics.median(times) * 1000, 3))
            if rt.models.figures().models:
                raise RuntimeError("a model became held: the figures would mix the two")
        rt.models.get(names[0])
        times = []
        for message in messages:
            started = time.perf_counter()
            classify(rt, model_name=names[0], message=message)
            times.append(time.perf_counter() - started)
        figures["held_p50_ms"] = round(statistics.median(times) * 1000, 3)
    finally:
        rt.close()
    figures["cold_over_held"] = [
        round(cold / figures["held_p50_ms"], 2) for cold in figures["cold_p50_ms"]
    ]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
