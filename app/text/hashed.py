"""Message -> its distinct tokens as 64-bit hashes with their counts: what scoring needs.

Scoring a message needs each distinct token's identity and count, and the message key needs
the digest of its "token<TAB>count" lines; neither needs a `str` per token. `HashedTokens`
carries exactly that: hashes and counts in first-emission order (the order of
`TokenizedMessage.token_counts`, so the cap on distinct tokens keeps the same ones), the
digest, the defects, and the texts only when asked for (training's new tokens, clues, the
partial read of a model not held).

The hash is `app.token_hash`, the one a model's token index uses: CPython's SipHash-1-3 of
the token's UTF-8 bytes, keyed at random per process, never stored.

`tokenize.hash_raw` and `hash_text` run the one tokenizer pipeline into their core's
HashCounter: the compiled one counts the tokens by hash in C as its loops find them, with the
word pairs and the digest, and makes a `str` only for the rarer tokens (URLs, domains, header
names, part, link and shape tokens, `skip:`), never for a word, whatever its script. The
pure-Python core has none: its reference is the string tokens (`TokenizedMessage`), each text
hashed and the digest taken from `token_lines` (`HashedTokens.of`);
tests/text/test_hash_parity.py proves the two give the same answers. The compiled core also
hands over the distinct tokens' UTF-8 back to back (`encoded`): a writer compares those bytes
with a model's and makes a `str` only of the tokens new to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from app.text.core import TokenCore
from app.token_hash import token_hashes
from app.token_texts import EncodedTexts, HashedTexts

HashArray = NDArray[np.int64]


def token_digest(token_counts: dict[str, int], *, core: TokenCore) -> str:
    """sha256 (hex) of the lines "token<TAB>count" in token order: stored in message keys,
    so the bytes hashed must never change."""
    return hashlib.sha256(core.token_lines(token_counts)).hexdigest()


class HashedTokens:
    """A message's distinct tokens by hash, their counts, its digest and defects; texts on
    demand."""

    __slots__ = (
        "_encoded",
        "_make_texts",
        "_token_counts",
        "_utf8",
        "counts",
        "defects",
        "digest",
        "hashes",
    )

    def __init__(
        self,
        *,
        hashes: HashArray,
        counts: HashArray,
        digest: str,
        defects: tuple[str, ...],
        texts: Callable[[], list[str]],
        utf8: tuple[bytes, HashArray] | None = None,
    ) -> None:
        self.hashes = hashes  # int64, one per distinct token, first-emission order
        self.counts = counts  # int64, beside them
        self.digest = digest  # token_digest of the token counts
        self.defects = defects  # sorted unique codes from app.text.defects
        self._make_texts = texts  # the distinct tokens' texts, in the order of `hashes`
        # … and their UTF-8 back to back with each one's offset (and the end's), where the core
        # gave it: made an EncodedTexts only when a writer asks (classify never does)
        self._utf8 = utf8
        self._encoded: EncodedTexts | None = None
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

    def encoded(self) -> EncodedTexts:
        """The distinct tokens' UTF-8, in the order of `hashes`: the compiled core's bytes as
        it found them, or the texts encoded (kept)."""
        if self._encoded is None:
            if self._utf8 is not None:
                self._encoded = EncodedTexts.from_offsets(*self._utf8)
            else:
                self._encoded = EncodedTexts.from_strings(list(self.token_counts))
        return self._encoded

    def count_prefixed(self, prefixes: str | tuple[str, ...], *, core: TokenCore) -> int:
        """How many of the distinct tokens start with `prefixes`: read off the core's UTF-8
        where it gave it (no `str` per token, no array made), else off the texts."""
        if self._utf8 is not None:
            return core.count_prefixed_utf8(*self._utf8, prefixes)
        return core.count_prefixed(self.token_counts, prefixes)

    def hashed_texts(self) -> HashedTexts:
        """The distinct tokens as a writer looks them up: UTF-8 and hashes."""
        return HashedTexts(self.hashes, self.encoded())

    def __reduce__(self) -> tuple[object, ...]:
        # A hash is keyed per process: another process (a tokenizing worker's result) gets
        # the texts and hashes them anew.
        token_counts = self.token_counts
        return (_rehashed, (token_counts, self.digest, self.defects))

    @classmethod
    def of(
        cls, token_counts: dict[str, int], defects: tuple[str, ...], *, core: TokenCore
    ) -> HashedTokens:
        """The reference: a string tokenizer's counts, each text hashed."""
        return _rehashed(token_counts, token_digest(token_counts, core=core), defects)


def _rehashed(token_counts: dict[str, int], digest: str, defects: tuple[str, ...]) -> HashedTokens:
    n = len(token_counts)
    hashed = HashedTokens(
        hashes=token_hashes(list(token_counts)),
        counts=np.fromiter(token_counts.values(), np.int64, n),
        digest=digest,
        defects=defects,
        texts=lambda: list(token_counts),
    )
    hashed._token_counts = token_counts
    return hashed
