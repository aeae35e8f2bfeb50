"""A TCP relay to the database that can be cut: after `cut()` it forwards nothing more, in
either direction, and the connections stay open, as a database behind a dead network does."""

from __future__ import annotations

import contextlib
import socket
import threading

from sqlalchemy.engine import make_url


class CutLink:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.open = threading.Event()
        self.open.set()
        self.sockets: list[socket.socket] = [self.listener]
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @classmethod
    def to_database(cls, database_url: str) -> tuple[CutLink, str]:
        """A link to the PostgreSQL server of `database_url`, and the URL through it."""
        url = make_url(database_url)
        link = cls(url.host or "127.0.0.1", url.port or 5432)
        relayed = url.set(host="127.0.0.1", port=link.port)
        return link, relayed.render_as_string(hide_password=False)

    def cut(self) -> None:
        self.open.clear()

    def close(self) -> None:
        self.open.clear()
        with self.lock:
            self.closed = True
            # shutdown first: close alone leaves the accepting thread in accept() on Linux, the
            # port listening, and a new database connection waiting there for ever.
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _keep(self, sock: socket.socket) -> bool:
        """Remember `sock` to close it; False (and closed) when the link is closed already."""
        with self.lock:
            if self.closed:
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
            if not self._keep(client) or not self.open.is_set():
                continue  # accepted, never answered
            server = socket.create_connection(self.target)
            if not self._keep(server):
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
                return
            if not self.open.is_set():
                continue  # swallowed: the peer waits for an answer that never comes
            try:
                sink.sendall(data)
            except OSError:
                return
