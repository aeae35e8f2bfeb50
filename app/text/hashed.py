"""Message -> its distinct tokens as 64-bit hashes with their counts: what scoring needs.

Scoring a message needs each distinct token's identity and count, and the message key needs
the digest of its "token<TAB>count" lines; neither needs a `str` per token. `HashedTokens`
carries exactly that: hashes and counts in first-emission order (the order of
`TokenizedMessage.token_counts`, so the cap on distinct tokens keeps the same ones), the
digest, the defects, and the texts only when asked for (training's new tokens, clues, the
partial read of a model not held).

The hash is `token_hash`: CPython's SipHash-1-3 of the token's UTF-8 bytes, keyed at random
per process (PEP 456). For an ASCII token (nearly all) that is the `str`'s own `hash()`, cached
on it, so the pure-Python path pays nothing; a compiled core computes it from the bytes it
holds (`_Py_HashBytes`). UTF-8 gives each text one byte string, so only the keyed function's
chance collisions remain (about n / 2^64 per lookup): nobody can craft two tokens with one
hash without the process's key. Being keyed per process, a hash is never stored.

`hash_raw` and `hash_text` run the active token core (app.text.core): the compiled one counts
the tokens by hash in C as its loops find them, with the word pairs, the shape tokens and the
digest, and makes a `str` only for the rarer tokens (URLs, domains, header names, part and
link tokens, `skip:`), never for a word, whatever its script. The pure-Python reference, and
the fallback, is `tokenize_raw` / `tokenize_text`, then each text hashed and the digest taken
from `token_lines`: tests/text/test_hash_parity.py proves the two give the same answers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from app.text import core
from app.text.limits import DEFAULT_LIMITS, TokenizerLimits
from app.text.tokenize import TokenizedMessage, token_lines, tokenize_raw, tokenize_text

HashArray = NDArray[np.int64]


def token_hash(text: str) -> int:
    """CPython's hash of `text`'s UTF-8 bytes: `hash(text)` for an ASCII text.

    app.bayes.tokens.token_hashes computes the same function over many texts: a model's index
    and a message's tokens must agree (tests/text/test_hashed.py checks it).
    """
    return hash(text) if text.isascii() else hash(text.encode("utf-8", "surrogatepass"))


def token_digest(token_counts: dict[str, int]) -> str:
    """sha256 (hex) of the lines "token<TAB>count" in token order: stored in message keys,
    so the bytes hashed must never change."""
    return hashlib.sha256(token_lines(token_counts)).hexdigest()


class HashedTokens:
    """A message's distinct tokens by hash, their counts, its digest and defects; texts on
    demand."""

    __slots__ = ("_make_texts", "_token_counts", "counts", "defects", "digest", "hashes")

    def __init__(
        self,
        *,
        hashes: HashArray,
        counts: HashArray,
        digest: str,
        defects: tuple[str, ...],
        texts: Callable[[], list[str]],
    ) -> None:
        self.hashes = hashes  # int64, one per distinct token, first-emission order
        self.counts = counts  # int64, beside them
        self.digest = digest  # token_digest of the token counts
        self.defects = defects  # sorted unique codes from app.text.defects
        self._make_texts = texts  # the distinct tokens' texts, in the order of `hashes`
        self._token_counts: dict[str, int] | None = None

    def __len__(self) -> int:
        return int(self.hashes.size)

    @property
    def token_counts(self) -> dict[str, int]:
        """token -> count in first-emission order, made on first use and kept."""
        if self._token_counts is None:
            texts = self._make_texts()
            self._token_counts = dict(zip(texts, self.counts.tolist(), strict=True))
        return self._token_counts

    def __reduce__(self) -> tuple[object, ...]:
        # A hash is keyed per process: another process (a tokenizing worker's result) gets
        # the texts and hashes them anew.
        token_counts = self.token_counts
        return (_rehashed, (token_counts, self.digest, self.defects))

    @classmethod
    def of(cls, tokenized: TokenizedMessage) -> HashedTokens:
        """The reference: a string tokenizer's counts, each text hashed."""
        token_counts = tokenized.token_counts
        return _rehashed(token_counts, token_digest(token_counts), tokenized.defects)


def _rehashed(token_counts: dict[str, int], digest: str, defects: tuple[str, ...]) -> HashedTokens:
    n = len(token_counts)
    hashed = HashedTokens(
        hashes=np.fromiter(map(token_hash, token_counts), np.int64, n),
        counts=np.fromiter(token_counts.values(), np.int64, n),
        digest=digest,
        defects=defects,
        texts=lambda: list(token_counts),
    )
    hashed._token_counts = token_counts
    return hashed


def hash_raw(raw: str | bytes, *, limits: TokenizerLimits = DEFAULT_LIMITS) -> HashedTokens:
    """Tokenize a raw RFC 822 message into hashed tokens; never raise."""
    return core.active().hash_raw(raw, limits)


def hash_text(text: str, *, limits: TokenizerLimits = DEFAULT_LIMITS) -> HashedTokens:
    """Tokenize plain text into hashed tokens; never raise."""
    return core.active().hash_text(text, limits)


def reference_hash_raw(raw: str | bytes, limits: TokenizerLimits) -> HashedTokens:
    """`hash_raw` of the pure-Python core: the string tokenizer's counts, each text hashed."""
    return HashedTokens.of(tokenize_raw(raw, limits=limits))


def reference_hash_text(text: str, limits: TokenizerLimits) -> HashedTokens:
    """`hash_text` of the pure-Python core."""
    return HashedTokens.of(tokenize_text(text, limits=limits))
