"""The spamsift benchmark suite: prints a table per part and writes everything as JSON.

    python -m bench                        # every part, full size (several minutes)
    python -m bench --quick                # every part at tiny size (CI smoke, < 1 minute)
    python -m bench --only scoring,tokenize --json out.json

Parts: scoring (engine vs scikit-learn), tokenize (corpora MB/s, linear cost), http (real
`spamsift serve` on SQLite and PostgreSQL), bogofilter (side by side on the SpamAssassin
split), memory (1 M-token model: RSS and database bytes), models (many 50-message mailboxes:
held memory, /metrics, model list, cold vs warm classification), targets (the speed targets
in one table, compiled and pure-Python cores beside bogofilter, also printed as markdown:
`python -m bench --only targets`). Every figure is the median of
several runs with its spread (max - min, in % of the median). PostgreSQL parts run when
--postgres or SPAMSIFT_TEST_POSTGRES_URL names a server (throw-away databases are made on it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.text.core import resolve
from bench.databases import postgres_server_url

PARTS = ("scoring", "tokenize", "http", "bogofilter", "memory", "models", "targets")


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = ""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next(
            (line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Model name" in line),
            "",
        )
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {
        "cpu": cpu or platform.processor(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_1min_at_start": load,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "token_core_default": resolve("auto").name,  # parts that compare cores say so in their rows
    }


def runners(
    quick: bool, postgres_url: str | None, n_models: int | None = None
) -> dict[str, Callable[[], dict[str, Any]]]:
    from bench import (
        many_models,
        memory,
        scoring,
        serving,
        targets,
        tokenizing,
        versus_bogofilter,
    )

    return {
        "scoring": lambda: scoring.run(quick),
        "tokenize": lambda: tokenizing.run(quick),
        "http": lambda: serving.run(quick, postgres_url),
        "bogofilter": lambda: versus_bogofilter.run(quick, postgres_url),
        "memory": lambda: memory.run(quick, postgres_url),
        "models": lambda: many_models.run(quick, postgres_url, n_models=n_models),
        "targets": lambda: targets.run(quick, postgres_url),
    }


def cell(value: Any) -> str:
    if isinstance(value, dict) and "median" in value:
        if value["median"] is None:
            return "—"
        spread = value.get("spread_pct")
        median = value["median"]
        shown = f"{median:,.1f}" if abs(median) >= 10 else f"{median:.4g}"
        return f"{shown} ±{spread:.0f}%" if spread is not None and value["runs"] > 1 else shown
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    if not rows:
        print("  (no rows)")
        return
    columns = list(rows[0])
    cells = [[cell(row.get(column, "")) for column in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("  " + "  ".join("-" * w for w in widths))
    for row in cells:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


TITLES = {
    "scoring": "1. Scoring: engine predict_proba vs scikit-learn on the same CSR matrix (msg/s)",
    "tokenize": "2. Tokenizing: shared corpora",
    "http": "3. HTTP end to end (spamsift serve)",
    "bogofilter": "4. Side by side with bogofilter (spamassassin split)",
    "memory": "5. Memory: server RSS and database bytes",
    "models": "6. Many models: memory budget, cold and held classification, listing and /metrics",
    "targets": "7. The speed targets side by side with bogofilter: compiled and pure-Python cores",
}


def print_part(name: str, result: dict[str, Any]) -> None:
    if "error" in result:
        print(f"\n{TITLES[name]}\n  FAILED: {result['error']}")
        return
    print_table(TITLES[name], result.get("table", []))
    if name == "tokenize":
        print_table(
            "2b. Tokenizing: linear cost (seconds per message size)", result["linearity_table"]
        )
    if name == "bogofilter" and "version" not in result.get("bogofilter", {}):
        print(f"  bogofilter ABSENT: {result['bogofilter']['status']}")
    for note in result.get("notes", []):
        print(f"  note: {note}")
    if name == "targets":
        print("\n7b. The same as markdown, ready to paste:\n")
        print("\n".join(result["markdown"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="where to write the results (default bench/results/bench[-quick].json)",
    )
    parser.add_argument(
        "--postgres", default=None, help="PostgreSQL server URL for throw-away databases"
    )
    parser.add_argument(
        "--models",
        type=int,
        default=None,
        help="models in the many-models part (default 1000, 20 with --quick); for 10,000 see "
        "python -m bench.many_models --database and --clone-from (resumable)",
    )
    args = parser.parse_args(argv)
    chosen = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in PARTS]
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {', '.join(PARTS)}")
    postgres_url = postgres_server_url(args.postgres)
    report: dict[str, Any] = {"quick": args.quick, "machine": machine(), "parts": {}}
    print(
        f"spamsift bench ({'quick' if args.quick else 'full'}) on {report['machine']['cpu']}, "
        f"{report['machine']['cpus']} CPUs, Python {report['machine']['python']}; "
        f"PostgreSQL: {'yes' if postgres_url else 'no (skipped)'}"
    )
    failed = False
    jobs = runners(args.quick, postgres_url, args.models)
    for name in chosen:
        started = time.perf_counter()
        try:
            result = jobs[name]()
        except Exception as error:  # report the part as failed, run the others
            failed = True
            result = {
                "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(),
            }
        result["seconds"] = round(time.perf_counter() - started, 1)
        report["parts"][name] = result
        print_part(name, result)
        sys.stdout.flush()
    out = args.json or Path("bench/results") / ("bench-quick.json" if args.quick else "bench.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nwrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
