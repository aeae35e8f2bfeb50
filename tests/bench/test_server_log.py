"""A failure while bench.server's `spamsift serve` runs carries the server's log with it: the
benchmark's folder is often a temporary one, gone by the time the failure is read."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from bench.server import serve


def _fail_while_served(url: str, folder: Path) -> None:
    with serve(url, workers=1, folder=folder) as server:
        with urllib.request.urlopen(f"{server.base_url}/readyz", timeout=10) as answer:
            assert answer.status == 200
        raise RuntimeError("the load failed")


@pytest.mark.slow
def test_an_error_inside_a_served_block_carries_the_servers_log(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="the load failed") as raised:
        _fail_while_served(f"sqlite:///{tmp_path / 'served.db'}", tmp_path)
    (note,) = raised.value.__notes__
    assert note.startswith("spamsift serve's log (")
    log = next(tmp_path.glob("server-*.log")).read_text()
    assert log.strip(), "the server wrote nothing to quote"
    assert log[-4000:] in note
