"""The command-line tests' fixtures (`cli`, `server`), and a folder other users can enter."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import cli, server

__all__ = ["cli", "open_folder", "server"]


def make_open_folder() -> Path:
    """A new folder under /tmp that every user may enter (0755): pytest's own temporary
    folders are root's alone, and the mail programs run as other users."""
    folder = Path(tempfile.mkdtemp(prefix="spamsift-mail-"))
    folder.chmod(0o755)
    return folder


@pytest.fixture
def open_folder() -> Iterator[Path]:
    folder = make_open_folder()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
