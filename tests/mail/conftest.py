"""The command-line tests' fixtures (`cli`, `server`), for the mail scripts' tests."""

from tests.cli.conftest import cli, server

__all__ = ["cli", "server"]
