"""What is read off a message's tokens once they are made: prefixed tokens counted, and the
lines a message's identity hashes.

The pure-Python reference; app.text._core has the same functions compiled (one typed pass,
no Python object per token), and tests/text/test_core_parity.py proves them equal.
"""

from collections.abc import Iterable


def count_prefixed(tokens: Iterable[str], prefixes: str | tuple[str, ...]) -> int:
    """Return how many of `tokens` start with `prefixes` (one, or any of several)."""
    return sum(1 for token in tokens if token.startswith(prefixes))


def token_lines(token_counts: dict[str, int]) -> bytes:
    """Return the lines "token<TAB>count" in token order, UTF-8 (strict: a lone surrogate
    raises).

    A message key hashes these bytes (app.service.messages.token_digest), and stored keys
    depend on them: they must never change.
    """
    lines = [f"{token}\t{token_counts[token]}\n" for token in sorted(token_counts)]
    return "".join(lines).encode()
