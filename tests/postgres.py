"""Throw-away PostgreSQL databases on the test server, so that test runs never share tables."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

POSTGRES_URL = os.environ.get("SPAMSIFT_TEST_POSTGRES_URL")


@contextmanager
def throwaway_database(server_url: str, prefix: str) -> Iterator[str]:
    """Create an empty database beside the one `server_url` names; yield its URL; drop it."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    server = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with server.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        server.dispose()
