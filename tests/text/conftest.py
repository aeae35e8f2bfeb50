"""Locating the shared corpora (SPAMSIFT_CORPORA, default ../shared/corpora from the repo)."""

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.text.core import COMPILED, TokenCore, resolve

REPO_ROOT = Path(__file__).resolve().parents[2]


def corpora_dir() -> Path:
    """Return the corpora folder: $SPAMSIFT_CORPORA, relative to the repo root if relative."""
    configured = Path(os.environ.get("SPAMSIFT_CORPORA", "../shared/corpora"))
    return configured if configured.is_absolute() else REPO_ROOT / configured


def corpus_path(name: str) -> Path:
    """Return the messages file of corpus `name`, or skip the test saying where it looked."""
    path = corpora_dir() / name / "messages.jsonl.gz"
    if not path.is_file():
        pytest.skip(f"corpus {name!r} not found at {path} (set SPAMSIFT_CORPORA)")
    return path


def read_corpus(name: str) -> Iterator[dict[str, Any]]:
    """Yield the records of corpus `name` (id, label, text and, for e-mail, encoding)."""
    with gzip.open(corpus_path(name), "rt", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def raw_bytes(record: dict[str, Any]) -> bytes:
    """Return the original bytes of an e-mail record (its text in its recorded encoding)."""
    return str(record["text"]).encode(record["encoding"])


TOKEN_CORES = ["python", "compiled"]


@pytest.fixture(params=TOKEN_CORES)
def token_core(request: pytest.FixtureRequest) -> TokenCore:
    """Each token core in turn, the compiled one skipped where it is not built."""
    if request.param == "compiled" and COMPILED is None:
        pytest.skip("the compiled token core (app.text._core) is not built")
    return resolve(request.param)
