"""Which token core runs: the compiled extension (app.text._core) or the pure-Python reference.

Both give the same tokens (tests/text/test_core_parity.py). The compiled one is built at
install time when a C compiler is present; without one the Python functions run. Each
process root chooses its core once (`resolve`, from the SPAMSIFT_TOKENIZER setting) and
passes it to the text room's entry points, which pass it on: the room holds no choice of its
own.
"""

import importlib
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from app.text import counts, headers, pairs, words
from app.text.limits import TokenizerLimits

CoreChoice = Literal["auto", "python", "compiled"]


class TokenSink(Protocol):
    """Where the tokenizer pipeline (app.text.tokenize) puts a message's tokens, family by
    family: a `TokenList` of `str`, or the compiled core's HashCounter. `emitted` counts the
    tokens put so far, `url_tokens` those of them starting with `url:`."""

    @property
    def emitted(self) -> int: ...
    @property
    def url_tokens(self) -> int: ...
    def extend(self, tokens: list[str]) -> None: ...  # tokens made whole in Python
    def header_tokens(
        self, headers: Sequence[tuple[str, str]], limits: TokenizerLimits
    ) -> None: ...
    def body_text(self, text: str, max_chars: int, pairs: bool) -> None: ...  # then pairs
    def hidden_text(self, text: str, max_chars: int) -> None: ...  # words, `hidden:` before


class HashCounter(TokenSink, Protocol):
    """A sink that counts each distinct token by its hash (app.token_hash) as it is put."""

    def result(
        self, max_distinct: int
    ) -> tuple[
        NDArray[np.int64],
        NDArray[np.int64],
        str,
        Callable[[], list[str]],
        bytes,
        NDArray[np.int64],
        bool,
    ]:
        """Hashes, counts, digest, texts (made when called) and UTF-8 (the bytes back to back
        and each token's offset, one more for the end) of the first `max_distinct` distinct
        tokens, in first-emission order, and whether there were more."""

    def release(self) -> None: ...  # done with the message: the thread may reuse the counter


@dataclass(frozen=True)
class TokenCore:
    """The hot functions of one implementation, named as in app.text.headers, words, pairs
    and counts, and the compiled core's HashCounter."""

    name: Literal["python", "compiled"]
    split_header_block: Callable[[str, TokenizerLimits], headers.HeaderBlock]
    header_tokens: Callable[[Sequence[tuple[str, str]], TokenizerLimits], list[str]]
    text_tokens: Callable[[str, int], list[str]]
    word_tokens: Callable[[str, int], list[str]]
    decode_header_values: Callable[
        [Sequence[tuple[str, str]], str | None, set[str]], list[tuple[str, str]]
    ]
    content_fields: Callable[[Sequence[tuple[str, str]]], tuple[str | None, str | None, str]]
    pair_tokens: Callable[[list[str], int], list[str]]
    count_prefixed: Callable[[Iterable[str], str | tuple[str, ...]], int]
    count_prefixed_utf8: Callable[[bytes, NDArray[np.int64], str | tuple[str, ...]], int]
    token_lines: Callable[[dict[str, int]], bytes]
    # This thread's counter, emptied; None in the Python core, whose hash path is the
    # reference: the string tokens, each hashed (tokenize.hash_raw).
    hash_counter: Callable[[], HashCounter] | None


PYTHON = TokenCore(
    name="python",
    split_header_block=headers.split_header_block,
    header_tokens=headers.header_tokens,
    text_tokens=words.text_tokens,
    word_tokens=words.word_tokens,
    decode_header_values=headers.decode_header_values,
    content_fields=headers.content_fields,
    pair_tokens=pairs.pair_tokens,
    count_prefixed=counts.count_prefixed,
    count_prefixed_utf8=counts.count_prefixed_utf8,
    token_lines=counts.token_lines,
    hash_counter=None,
)


def _compiled() -> TokenCore | None:
    try:  # by name: an import of the package's attribute would read as one of app.text itself
        compiled = importlib.import_module("app.text._core")  # built by setup.py, optional
    except ImportError:
        return None
    return compiled_from(compiled)


def compiled_from(module: object) -> TokenCore | None:
    """The compiled core made of `module`'s functions; None, with a warning, when it lacks one:
    an extension built from an older `_core.pyx` (a checkout updated without reinstalling)
    must not stop spamsift from starting, and the Python core gives the same tokens."""
    functions = {
        field.name: getattr(module, field.name, None)
        for field in fields(TokenCore)
        if field.name != "name"
    }
    missing = sorted(name for name, function in functions.items() if function is None)
    hash_counter = functions["hash_counter"]
    if hash_counter is not None and not _counter_is_current(hash_counter):
        missing = ["HashCounter.body_text(text, max_chars, pairs), result() with the UTF-8"]
    if missing:
        warnings.warn(
            f"the compiled token core is out of date (no {', '.join(missing)}): using the "
            "Python core; reinstall spamsift (pip install -e .) to rebuild it",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return TokenCore(name="compiled", **functions)  # type: ignore[arg-type]


def _counter_is_current(hash_counter: Callable[[], HashCounter]) -> bool:
    """Whether the compiled counter takes the `pairs` switch and its result holds the tokens'
    UTF-8 (builds before did not)."""
    counter = hash_counter()
    try:
        counter.body_text("", 1, False)
        return len(counter.result(0)) == 7
    except TypeError:
        return False
    finally:
        counter.release()


COMPILED = _compiled()  # None where the extension was not built


class CoreUnavailable(ValueError):
    """`compiled` was asked for and the extension is not built."""


def resolve(choice: CoreChoice) -> TokenCore:
    """Return the core `choice` names: auto is the compiled one where it is built."""
    if choice == "python":
        return PYTHON
    if COMPILED is None:
        if choice == "compiled":
            raise CoreUnavailable(
                "the compiled token core (app.text._core) is not built: install spamsift where "
                "a C compiler is present, or use auto"
            )
        return PYTHON
    return COMPILED
