"""Candidate token families measured by `python -m bench.accuracy --add FAMILY` / `--keep-case`.

These are tried in the harness before any of them goes into the tokenizer: each adds tokens to
the tokens a message already has (or, for case, tokenizes with case kept), so a run with and a
run without differ only by that family.

- `char4`: hashed character 4-grams of the first 3,000 characters of the message (the raw
  message, headers and body, in the full view; the text of the text-only views and SMS), binary
  (one count per distinct 4-gram), hashed by CRC-32 to 2^20 buckets: the features of the TREC
  2007 Spam Track's leading filters (Sculley and Wachman's ROSVM; the OSBF-Lua family).
- `hour`: the hour of the Date header (UTC) as `hour:h`, full view of raw mail only. (Size,
  links and share of HTML, measured here first, are now the tokenizer's `app.text.shape`.)

    python -m bench.token_experiments MESSAGE --json OUT [--text]

writes what the families make of one message (raw mail, or with --text a text) in each view,
and with --text its tokens with case folded and kept: what tests/bench checks them by.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import re
import unicodedata
import zlib
from collections.abc import Callable, Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from app.service.corpus import LabelledMessage
from app.text import text_only, tokenize_text
from app.text.core import resolve

CHAR4_PREFIX_CHARS = 3000
CHAR4_BUCKETS = 1 << 20


def message_text(message: LabelledMessage, text_only_view: bool) -> str:
    if message.raw is None:
        return message.text or ""
    if text_only_view:
        return text_only(message.raw, core=resolve("auto"))
    return message.raw.decode("latin-1")


def char4_tokens(
    message: LabelledMessage, text_only_view: bool, tokens: dict[str, int]
) -> dict[str, int]:
    text = message_text(message, text_only_view)[:CHAR4_PREFIX_CHARS]
    grams = {text[i : i + 4] for i in range(max(len(text) - 3, 0))}
    return {
        f"c4:{zlib.crc32(gram.encode('utf-8', 'surrogatepass')) % CHAR4_BUCKETS:05x}": 1
        for gram in grams
    }


_DATE = re.compile(rb"^date:[ \t]*([^\r\n]{1,200})", re.IGNORECASE | re.MULTILINE)


def hour_tokens(
    message: LabelledMessage, text_only_view: bool, tokens: dict[str, int]
) -> dict[str, int]:
    """`hour:h`, the hour (UTC) of the Date header, in the full view of raw mail."""
    if message.raw is None or text_only_view:
        return {}
    head = message.raw.split(b"\n\n", 1)[0]
    match = _DATE.search(head)
    hour = "none"
    if match:
        with contextlib.suppress(TypeError, ValueError, IndexError, OverflowError):
            stamp = parsedate_to_datetime(match.group(1).decode("latin-1").strip())
            offset = stamp.utcoffset()
            hour = str((stamp - offset).hour if offset is not None else stamp.hour)
    return {f"hour:{hour}": 1}


ADDED: dict[str, Callable[[LabelledMessage, bool, dict[str, int]], dict[str, int]]] = {
    "char4": char4_tokens,
    "hour": hour_tokens,
}


@contextlib.contextmanager
def case_kept() -> Iterator[None]:
    """Tokenize with case kept, as bogofilter does ("FREE" and "free" are two tokens).

    Words of bodies and headers keep their case; URL schemes and hosts, and e-mail domains,
    are still matched and given in lower case (hosts are case-insensitive). The English stop
    word list is lower case, so capitalised stop words are kept.
    """
    headers = importlib.import_module("app.text.headers")
    tokenize = importlib.import_module("app.text.tokenize")
    words = importlib.import_module("app.text.words")

    saved = (
        tokenize.normalize_text,
        headers.normalize_text,
        words._URL,
        words._AT_DOMAIN,
        words.url_host,
    )

    def normalize_keeping_case(text: str) -> str:
        """`words.normalize_text` without its final casefold."""
        if not text.isascii():
            text = words._INVISIBLE.sub("", text)
            text = unicodedata.normalize("NFKC", text)
            return words._INVISIBLE.sub("", text)
        if "\x00" in text or "\x1b" in text:
            return words._INVISIBLE.sub("", text)
        return text

    def url_host_folded(url: str, max_token_chars: int) -> str:
        return saved[4](url.lower(), max_token_chars)

    tokenize.normalize_text = normalize_keeping_case  # type: ignore[assignment]
    headers.normalize_text = normalize_keeping_case  # type: ignore[assignment]
    words._URL = re.compile(words._URL.pattern, re.IGNORECASE)
    words._AT_DOMAIN = re.compile(words._AT_DOMAIN.pattern, re.IGNORECASE)
    words.url_host = url_host_folded  # type: ignore[assignment]
    try:
        yield
    finally:
        (
            tokenize.normalize_text,
            headers.normalize_text,
            words._URL,
            words._AT_DOMAIN,
            words.url_host,
        ) = saved  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description="what the candidate families make of a message")
    parser.add_argument("message", type=Path, help="a raw message (or a text, with --text)")
    parser.add_argument("--text", action="store_true", help="the file is a text, not mail")
    parser.add_argument("--json", type=Path, required=True, help="where to write the figures")
    args = parser.parse_args()
    content = args.message.read_bytes()
    message = (
        LabelledMessage(id="m", label="ham", text=content.decode("utf-8"))
        if args.text
        else LabelledMessage(id="m", label="ham", raw=content)
    )
    report: dict[str, Any] = {
        "char4_prefix_chars": CHAR4_PREFIX_CHARS,
        **{
            view: {family: added(message, text_only_view, {}) for family, added in ADDED.items()}
            for view, text_only_view in (("full", False), ("text_only", True))
        },
    }
    if message.text is not None:
        core = resolve("auto")
        with case_kept():
            report["tokens_case_kept"] = sorted(tokenize_text(message.text, core=core).token_counts)
        # case folded again
        report["tokens_after"] = sorted(tokenize_text(message.text, core=core).token_counts)
    args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
