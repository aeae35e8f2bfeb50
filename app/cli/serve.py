"""`spamsift serve`, `spamsift db upgrade` and `spamsift db vacuum`: run the HTTP API,
migrate the schema, rebuild the database to its live rows."""

from __future__ import annotations

import argparse
import socket
import sys


def add_serve_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="run the HTTP API (brings the schema up to date)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    serve.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    serve.add_argument(
        "--limit-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="answer 503 at once beyond N requests and connections in flight per worker, "
        "instead of queueing them (uvicorn's limit_concurrency; default: no limit)",
    )
    serve.add_argument(
        "--allow-no-authentication",
        action="store_true",
        help="with no API key, serve on a non-loopback --host anyway: every endpoint open to "
        "anyone who reaches it (default: refuse; SPAMSIFT_ALLOW_NO_AUTHENTICATION=true)",
    )
    serve.set_defaults(run=run_serve)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(title="db commands")
    upgrade = db_commands.add_parser("upgrade", help="apply pending schema migrations")
    upgrade.set_defaults(run=run_db_upgrade)
    vacuum = db_commands.add_parser(
        "vacuum",
        help="rebuild the database to its live rows (SQLite: once for a file made by an older "
        "version, so that pruning gives space back from then on)",
        description="SQLite: VACUUM, rewriting the file without its free pages and switching it "
        "to incremental auto-vacuum (files made by this version have it; older ones need this "
        "once). It needs free disk space the size of the database and holds the write lock "
        "while it runs: stop the servers or run it at a quiet hour. PostgreSQL: VACUUM "
        "(ANALYZE), which autovacuum does anyway.",
    )
    vacuum.set_defaults(run=run_db_vacuum)


EXIT_CANNOT_LISTEN = 3  # uvicorn's own status for a failed start; docs/cli.md


def run_serve(args: argparse.Namespace) -> int:
    from app.serving import ServeError, serve

    busy = why_not_listen(args.host, args.port)
    if busy is not None:  # said before the schema is touched, in one line
        print(f"spamsift serve: {busy}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    try:  # app/serving.py: settings checked, JSON logs, schema upgraded, then uvicorn
        serve(
            host=args.host,
            port=args.port,
            workers=args.workers,
            allow_no_authentication=args.allow_no_authentication,
            limit_concurrency=args.limit_concurrency,
        )
    except ServeError as error:  # a bad setting, an unusable database, an open server: exit 2
        print(f"spamsift serve: {error}", file=sys.stderr)
        return 2
    return 0


def why_not_listen(host: str, port: int) -> str | None:
    """Why `serve` could not listen on host:port (in use, a privileged port, an unknown
    address), or None. A probe bound and closed at once, with SO_REUSEADDR as uvicorn binds;
    a port taken between probe and start still stops uvicorn with the same status."""
    where = f"{host}:{port}"
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as error:
        return f"cannot listen on {where}: {error}"
    family, kind, protocol, _, address = found[0]
    with socket.socket(family, kind, protocol) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            return f"cannot listen on {where}: {(error.strerror or str(error)).lower()}"
    return None


def run_db_upgrade(_: argparse.Namespace) -> int:
    from app.serving import ServeError, describe_database, load_settings, upgrade_database

    try:  # a bad setting or an unusable database: one line, exit 2 (as serve)
        settings = load_settings()
        where = describe_database(settings.database_url)
        print(f"spamsift db upgrade: database {where}", file=sys.stderr)
        revision = upgrade_database(settings)
    except ServeError as error:
        print(f"spamsift db upgrade: {error}", file=sys.stderr)
        return 2
    print(f"database at revision {revision}")
    return 0


def run_db_vacuum(_: argparse.Namespace) -> int:
    from app.serving import ServeError, describe_database, load_settings, vacuum_database

    try:
        settings = load_settings()
    except ServeError as error:
        print(f"spamsift db vacuum: {error}", file=sys.stderr)
        return 2
    where = describe_database(settings.database_url)
    print(f"spamsift db vacuum: database {where}", file=sys.stderr)
    try:
        before, after = vacuum_database(settings)
    except ServeError as error:
        print(f"spamsift db vacuum: {error}", file=sys.stderr)
        return 1
    print(f"database {before:,} bytes before, {after:,} after")
    return 0
