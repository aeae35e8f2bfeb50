"""The milter protocol (version 6, as Sendmail's libmilter and Postfix speak it): packets of a
4-byte big-endian length, a command byte and its data.

Only what spamsift uses is named here; see Sendmail's libmilter/docs and Postfix's
MILTER_README for the rest.
"""

from __future__ import annotations

import asyncio
import struct

VERSION = 6
MAX_PACKET_BYTES = 1024 * 1024  # a body chunk is at most 64 KiB; more is no MTA speaking

# Commands from the MTA.
ABORT = b"A"
BODY = b"B"
CONNECT = b"C"
MACRO = b"D"
BODYEOB = b"E"
HELO = b"H"
QUIT_NC = b"K"
HEADER = b"L"
MAIL = b"M"
EOH = b"N"
OPTNEG = b"O"
QUIT = b"Q"
RCPT = b"R"
DATA = b"T"
UNKNOWN = b"U"

# Replies.
ACCEPT = b"a"
CONTINUE = b"c"
ADDHEADER = b"h"
CHGHEADER = b"m"
QUARANTINE = b"q"
REPLYCODE = b"y"

# Actions the filter may take (SMFIF_*).
ACTION_ADDHDRS = 0x01
ACTION_CHGHDRS = 0x10
ACTION_QUARANTINE = 0x20
ACTIONS = ACTION_ADDHDRS | ACTION_CHGHDRS | ACTION_QUARANTINE

# Protocol steps the filter asks the MTA to leave out or not to wait for (SMFIP_*): no
# connect, HELO, MAIL FROM, end-of-header, unknown or DATA event, and no reply expected to
# recipients, headers and body chunks. The MTA drops what it does not offer.
NOCONNECT, NOHELO, NOMAIL = 0x01, 0x02, 0x04
NOEOH, NOUNKNOWN, NODATA = 0x40, 0x100, 0x200  # (0x08, 0x10, 0x20: no RCPT, body, headers)
NR_RCPT, NR_HDR, NR_BODY = 0x8000, 0x80, 0x80000
WANTED_STEPS = NOCONNECT | NOHELO | NOMAIL | NOEOH | NOUNKNOWN | NODATA | NR_RCPT | NR_HDR | NR_BODY


class ProtocolError(Exception):
    """The peer spoke something that is not the milter protocol."""


async def read_packet(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """Return (command, data), or None when the peer closed the connection between packets."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise ProtocolError("connection closed inside a packet length") from None
        return None
    (length,) = struct.unpack(">I", head)
    if not 1 <= length <= MAX_PACKET_BYTES:
        raise ProtocolError(f"packet length {length}")
    try:
        packet = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ProtocolError("connection closed inside a packet") from None
    return packet[:1], packet[1:]


def packet(command: bytes, data: bytes = b"") -> bytes:
    return struct.pack(">I", len(data) + 1) + command + data


def negotiate(data: bytes) -> bytes:
    """The reply to the MTA's OPTNEG: our version, actions and the steps it may leave out."""
    if len(data) < 12:
        raise ProtocolError("short option negotiation")
    version, offered_actions, offered_steps = struct.unpack(">III", data[:12])
    if version < 2:
        raise ProtocolError(f"milter protocol version {version}")
    return packet(
        OPTNEG,
        struct.pack(
            ">III", min(version, VERSION), ACTIONS & offered_actions, WANTED_STEPS & offered_steps
        ),
    )


def strings(data: bytes) -> list[bytes]:
    """The NUL-terminated strings of a packet's data."""
    return data.split(b"\0")[:-1] if data.endswith(b"\0") else data.split(b"\0")


def add_header(name: str, value: str) -> bytes:
    return packet(ADDHEADER, _c(name) + _c(value))


def delete_header(index: int, name: str) -> bytes:
    """Remove the `index`-th (from 1) field called `name`."""
    return packet(CHGHEADER, struct.pack(">I", index) + _c(name) + _c(""))


def reply_code(text: str) -> bytes:
    """An SMTP reply ("550 5.7.1 …") for the message; the MTA refuses it with that."""
    return packet(REPLYCODE, _c(text))


def quarantine(reason: str) -> bytes:
    return packet(QUARANTINE, _c(reason))


def _c(text: str) -> bytes:
    return text.encode("utf-8", "replace").replace(b"\0", b"") + b"\0"
