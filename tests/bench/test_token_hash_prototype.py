"""The token-hash prototype (bench/prototypes/hash_tokens_core.pyx) gives the string path's
answers: the same (hash, count) list in first-emission order, the same defects and the same
message-key digest, on crafted messages and a sample of SpamAssassin.

Its numbers (docs/token-hashes.md) hold only if it does the same work; the whole corpus is
checked by `python -m bench.prototypes.hash_tokens check`. Skipped without Cython, a C
compiler or the compiled token core.
"""

import shutil

import pytest

from app.text import core

pytest.importorskip("pyximport")
if core.COMPILED is None or shutil.which("cc") is None:
    pytest.skip("needs the compiled token core and a C compiler", allow_module_level=True)

from bench import data
from bench.prototypes import hash_tokens

CRAFTED = [
    b"From: Cheap Pills <deals@spam.example>\nTo: you@example.org\nSubject: $100 off, call "
    b"0800123456 now\n\nBuy the pills now at http://spam.example/buy/now?x=1 or mail "
    b"sales@spam.example. Price $19.99 for 1234 pills; "
    + b"a" * 60
    + b" superlongwordnumberoneandthensome superlongwordnumbertwoandthensome\n",
    "Subject: =?utf-8?b?5L2g5aW9?=\nContent-Type: text/plain; charset=utf-8\n\n"
    "\u4f60\u597d\u4e16\u754c free \u00e9t\u00e9 caf\u00e9 \uff21\uff22\uff23 12345\n".encode(),
    b"Content-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain\n\nhi "
    b"there friend\n--b\nContent-Type: text/html\n\n<p>hi <a href='http://x.example/a'>there"
    b"</a><!-- hidden words --><style>p{color:red}</style></p>\n--b--\n",
    b"no headers at all, just words words words",
    b"",
]


@pytest.mark.parametrize("mode", ["python-utf8", "python-hash", "siphash24"])
def test_prototype_equals_the_string_path(mode: str) -> None:
    hash_tokens.prototype.configure(hash_tokens.MODES[mode], *hash_tokens.KEY)
    token_hash = {"python-hash": hash, "python-utf8": hash_tokens.utf8_hash}.get(
        mode, hash_tokens.prototype.token_hash
    )
    counter = hash_tokens.prototype.HashCounter()
    messages = list(CRAFTED)
    if data.corpus_path("spamassassin").exists():
        messages += [m.raw or b"" for m in data.load("spamassassin", limit=60)]
    try:
        for raw in messages:
            assert hash_tokens.hashed(counter, raw) == hash_tokens.reference(raw, token_hash)
    finally:
        hash_tokens.prototype.configure(0)
