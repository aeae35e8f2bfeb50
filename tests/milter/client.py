"""A small milter client (the MTA's side of the protocol), to test the server as Postfix uses it."""

from __future__ import annotations

import socket
import struct

ALL_ACTIONS = 0x1FF
ALL_STEPS = 0x1FFFFF  # every step Postfix 3.7 offers to leave out
FINAL = {b"a", b"c", b"r", b"t", b"y", b"d"}


class MilterClient:
    def __init__(self, host: str, port: int, *, steps: int = ALL_STEPS) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Postfix writes
        self.send(b"O", struct.pack(">III", 6, ALL_ACTIONS, steps))
        command, data = self.read()
        assert command == b"O"
        self.version, self.actions, self.no_reply = struct.unpack(">III", data[:12])

    def send(self, command: bytes, data: bytes = b"") -> None:
        self.sock.sendall(struct.pack(">I", len(data) + 1) + command + data)

    def read(self) -> tuple[bytes, bytes]:
        head = self._exactly(4)
        (length,) = struct.unpack(">I", head)
        packet = self._exactly(length)
        return packet[:1], packet[1:]

    def _exactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("milter closed the connection")
            data += chunk
        return data

    def _step(self, command: bytes, data: bytes, no_reply_bit: int) -> None:
        self.send(command, data)
        if not self.no_reply & no_reply_bit:
            assert self.read()[0] == b"c"

    def message(
        self, raw: bytes, recipients: list[str], queue_id: str = "ABC123"
    ) -> list[tuple[bytes, bytes]]:
        """Send one message as Postfix does; return the replies to its end, the final one last."""
        self.send(b"D", b"R{i}\0" + queue_id.encode() + b"\0")
        # As Postfix does, leave out what the milter asked not to be sent (SMFIP_NORCPT, NOHDRS,
        # NOBODY): a milter that asks so by mistake sees no header, no body.
        for recipient in recipients if not self.no_reply & 0x08 else []:
            self._step(b"R", f"<{recipient}>\0".encode(), 0x8000)
        head, _, body = raw.replace(b"\r\n", b"\n").partition(b"\n\n")
        fields: list[bytes] = []
        for line in head.split(b"\n"):
            if line[:1] in (b" ", b"\t") and fields:
                fields[-1] += b"\n" + line
            else:
                fields.append(line)
        for field in fields if not self.no_reply & 0x20 else []:
            name, _, value = field.partition(b":")
            self._step(b"L", name + b"\0" + value.lstrip(b" ") + b"\0", 0x80)
        body = body.replace(b"\n", b"\r\n")
        for start in range(0, len(body), 65535) if not self.no_reply & 0x10 else []:
            self._step(b"B", body[start : start + 65535], 0x80000)
        self.send(b"E")
        replies = []
        while True:
            command, data = self.read()
            replies.append((command, data))
            if command in FINAL:
                return replies

    def close(self) -> None:
        self.send(b"Q")
        self.sock.close()


def added_headers(replies: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The fields the milter added (name -> value)."""
    added = {}
    for command, data in replies:
        if command == b"h":
            name, value, _ = data.split(b"\0")
            added[name.decode()] = value.decode()
    return added
