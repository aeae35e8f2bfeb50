"""A TCP relay to the test's PostgreSQL server that a test can break, as a database outage
really looks to the app: its connections go through the relay, and nothing is mocked.

Two kinds of outage: `silence()` forwards nothing more in either direction while every
connection stays open (a database behind a dead network: reads hang until a timeout), and
`refuse()` closes every connection and refuses new ones (a database that went down: reads fail
at once). `restore()` lets new connections through again.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from sqlalchemy.engine import make_url


class DatabaseLink:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.state = "open"  # "open" | "silent" | "refusing" | "closed"
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @classmethod
    def to_database(cls, database_url: str) -> tuple[DatabaseLink, str]:
        """A link to the PostgreSQL server of `database_url`, and the URL through it."""
        url = make_url(database_url)
        link = cls(url.host or "127.0.0.1", url.port or 5432)
        relayed = url.set(host="127.0.0.1", port=link.port)
        return link, relayed.render_as_string(hide_password=False)

    def silence(self) -> None:
        self.state = "silent"

    def refuse(self) -> None:
        with self.lock:
            self.state = "refusing"
            self._close_connections()

    def restore(self) -> None:
        self.state = "open"

    def close(self) -> None:
        with self.lock:
            self.state = "closed"
            self._close_connections()
            # shutdown first: close alone leaves the accepting thread in accept() on Linux, the
            # port listening, and a new database connection waiting there for ever.
            with contextlib.suppress(OSError):
                self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()

    def _close_connections(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.sockets.clear()

    def _keep(self, sock: socket.socket) -> bool:
        """Remember `sock` to close it; False (and closed) when the link takes none now."""
        with self.lock:
            if self.state in ("refusing", "closed"):
                sock.close()
                return False
            self.sockets.append(sock)
            return True

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self._keep(client) or self.state == "silent":
                continue  # refused, or accepted and never answered
            server = socket.create_connection(self.target)
            if not self._keep(server):
                client.close()
                continue
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                for end in (source, sink):
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)
                return
            if self.state == "silent":
                continue  # swallowed: the peer waits for an answer that never comes
            try:
                sink.sendall(data)
            except OSError:
                return
