"""Tests of the benchmark suite: each runs one `python -m bench…` module end to end (most on a
slice of the shared corpora) as a user would, and reads the JSON it writes; none imports bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BenchRun:
    report: dict[str, Any]  # the JSON the module wrote
    stdout: str  # its tables


def run_bench(
    module: str,
    *arguments: str,
    needs: str | None = None,
    folder: Path,
    timeout_seconds: float = 580,
) -> BenchRun:
    """Run `python -m module *arguments --json FILE` in the repository with the shared corpora;
    skip where the corpus `needs` is absent, fail with the output's end where it fails."""
    corpora = Path(os.environ.get("SPAMSIFT_CORPORA", REPO.parent / "shared" / "corpora"))
    if needs is not None and not (corpora / needs / "messages.jsonl.gz").exists():
        pytest.skip(f"no shared corpora at {corpora}")
    out = folder / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", module, *arguments, "--json", str(out)],
        cwd=REPO,
        env={**os.environ, "SPAMSIFT_CORPORA": str(corpora)},
        capture_output=True,
        text=True,
        timeout=timeout_seconds,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return BenchRun(json.loads(out.read_text()), done.stdout)
