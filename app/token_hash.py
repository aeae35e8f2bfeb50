"""The 64-bit hash of a token: what a message's hashed tokens (app.text) and a model's token
index (app.bayes) must agree on, so scoring can look a message's tokens up by hash alone.

It is CPython's hash (SipHash-1-3, keyed at random per process, PEP 456) of the token's UTF-8
bytes. For an ASCII token, nearly every one, that is the `hash()` cached on the str, so the
Python path pays nothing. Not the str's own `hash()` for the others: CPython hashes a str's
internal buffer, so "\u3066" (U+3066, held as the bytes 66 30) and "f0" (66 30) have equal
`hash()` under any key; their UTF-8 bytes differ. UTF-8 gives each text one byte string, so
only the keyed function's chance collisions remain (about n / 2^64 per lookup): nobody can
craft two tokens with one hash without the process's key. Being keyed per process, a hash is
never stored. The compiled token core computes the same from the bytes it holds
(`_Py_HashBytes`; tests/text/test_hash_parity.py).

A module of its own, importing nothing of spamsift's: text and bayes import no other room.
"""

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray


def token_hash(text: str) -> int:
    """The hash of `text`'s UTF-8 bytes: `hash(text)` for an ASCII text."""
    return hash(text) if text.isascii() else hash(text.encode("utf-8", "surrogatepass"))


def token_hashes(texts: Sequence[str]) -> NDArray[np.int64]:
    """`token_hash` of each text, int64; one pass of `hash()` over the (nearly all) ASCII."""
    hashes = np.fromiter(map(hash, texts), np.int64, len(texts))
    ascii_ = np.fromiter(map(str.isascii, texts), np.bool_, len(texts))
    if not ascii_.all():
        other = np.flatnonzero(~ascii_)
        hashes[other] = [token_hash(texts[i]) for i in other.tolist()]
    return hashes
