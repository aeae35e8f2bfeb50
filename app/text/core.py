"""Which token core runs: the compiled extension (app.text._core) or the pure-Python reference.

Both give the same tokens (tests/text/test_core_parity.py). The compiled one is built at
install time when a C compiler is present; without one the Python functions run. The rest of
the text room calls the hot functions through `active()`, so the choice is made once per
process (`use_core`, from the SPAMSIFT_TOKENIZER setting) and never per message.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from app.text import counts, headers, pairs, words
from app.text.limits import TokenizerLimits

CoreChoice = Literal["auto", "python", "compiled"]


@dataclass(frozen=True)
class TokenCore:
    """The hot functions of one implementation, named as in app.text.headers, words, pairs
    and counts."""

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
    token_lines: Callable[[dict[str, int]], bytes]


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
    token_lines=counts.token_lines,
)


def _compiled() -> TokenCore | None:
    try:
        from app.text import _core  # type: ignore[attr-defined]  # built by setup.py, optional
    except ImportError:
        return None
    return TokenCore(
        name="compiled",
        split_header_block=_core.split_header_block,
        header_tokens=_core.header_tokens,
        text_tokens=_core.text_tokens,
        word_tokens=_core.word_tokens,
        decode_header_values=_core.decode_header_values,
        content_fields=_core.content_fields,
        pair_tokens=_core.pair_tokens,
        count_prefixed=_core.count_prefixed,
        token_lines=_core.token_lines,
    )


COMPILED = _compiled()  # None where the extension was not built
_active = COMPILED or PYTHON


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


def use_core(choice: CoreChoice) -> TokenCore:
    """Make `choice` this process's core and return it; raise CoreUnavailable if not built."""
    global _active
    _active = resolve(choice)
    return _active


def active() -> TokenCore:
    """Return the core this process runs."""
    return _active
