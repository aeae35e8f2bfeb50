"""Which token core runs: the compiled extension (app.text._core) or the pure-Python reference.

Both give the same tokens (tests/text/test_core_parity.py). The compiled one is built at
install time when a C compiler is present; without one the Python functions run. The rest of
the text room calls the hot functions through `active()`, so the choice is made once per
process (`use_core`, from the SPAMSIFT_TOKENIZER setting) and never per message.
"""

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

from app.text import counts, headers, pairs, words
from app.text.limits import TokenizerLimits

if TYPE_CHECKING:
    from app.text.hashed import HashedTokens

CoreChoice = Literal["auto", "python", "compiled"]


@dataclass(frozen=True)
class TokenCore:
    """The hot functions of one implementation, named as in app.text.headers, words, pairs,
    counts and hashed."""

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
    hash_raw: Callable[[str | bytes, TokenizerLimits], "HashedTokens"]
    hash_text: Callable[[str, TokenizerLimits], "HashedTokens"]


# The hash path's reference is the string tokenizer, whose modules import this one: imported
# when first called.
def _python_hash_raw(raw: str | bytes, limits: TokenizerLimits) -> "HashedTokens":
    from app.text import hashed

    return hashed.reference_hash_raw(raw, limits)


def _python_hash_text(text: str, limits: TokenizerLimits) -> "HashedTokens":
    from app.text import hashed

    return hashed.reference_hash_text(text, limits)


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
    hash_raw=_python_hash_raw,
    hash_text=_python_hash_text,
)


def _compiled() -> TokenCore | None:
    try:
        from app.text import _core  # type: ignore[attr-defined]  # built by setup.py, optional
    except ImportError:
        return None
    return compiled_from(_core)


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
    if missing:
        warnings.warn(
            f"the compiled token core is out of date (no {', '.join(missing)}): using the "
            "Python core; reinstall spamsift (pip install -e .) to rebuild it",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return TokenCore(name="compiled", **functions)  # type: ignore[arg-type]


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
