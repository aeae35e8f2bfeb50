"""What is read off a message's tokens once they are made: prefixed tokens counted, and the
lines a message's identity hashes.

The pure-Python reference; app.text._core has the same functions compiled (one typed pass,
no Python object per token), and tests/text/test_core_parity.py proves them equal.
"""

from collections.abc import Iterable
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray


def count_prefixed(tokens: Iterable[str], prefixes: str | tuple[str, ...]) -> int:
    """Return how many of `tokens` start with `prefixes` (one, or any of several)."""
    return sum(1 for token in tokens if token.startswith(prefixes))


def count_prefixed_utf8(
    utf8: bytes, offsets: NDArray[np.int64], prefixes: str | tuple[str, ...]
) -> int:
    """`count_prefixed` of tokens given as UTF-8 back to back, token i from `offsets[i]` to
    `offsets[i + 1]` (the compiled HashCounter's result): no `str` made per token."""
    wanted = tuple(
        prefix.encode("utf-8", "surrogatepass")
        for prefix in ((prefixes,) if isinstance(prefixes, str) else prefixes)
    )
    bounds = _checked_bounds(len(utf8), offsets)
    return sum(1 for start, end in pairwise(bounds) if utf8.startswith(wanted, start, end))


def _checked_bounds(size: int, offsets: NDArray[np.int64]) -> list[int]:
    bounds: list[int] = np.asarray(offsets, dtype=np.int64).tolist()
    if bounds and (bounds[0] < 0 or bounds[-1] > size or any(np.diff(bounds) < 0)):
        raise ValueError("offsets must ascend within the UTF-8")
    return bounds


def token_lines(token_counts: dict[str, int]) -> bytes:
    """Return the lines "token<TAB>count" in token order, UTF-8 (strict: a lone surrogate
    raises).

    A message key hashes these bytes (app.service.messages.token_digest), and stored keys
    depend on them: they must never change.
    """
    lines = [f"{token}\t{token_counts[token]}\n" for token in sorted(token_counts)]
    return "".join(lines).encode()
