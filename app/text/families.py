"""The token families derived from a message's words, each a model option of the same name.

A derived family is evidence the tokenizer makes from other tokens or from the message as a
whole, not read from its text: word pairs (app.text.pairs) and the message's shape
(app.text.shape). Each is named by the prefixes of its tokens, declared here once: the
tokenizer skips a family that is off, a model's writer does not store its tokens, and its
vocabulary leaves out those it stored while the family was on.
"""

from typing import Literal, get_args

Family = Literal["word_pairs", "shape_tokens"]
FAMILIES: tuple[Family, ...] = get_args(Family)

FAMILY_PREFIXES: dict[Family, tuple[str, ...]] = {
    "word_pairs": ("pair:",),
    "shape_tokens": ("size:", "links:", "html:"),
}

ALL_FAMILIES: frozenset[Family] = frozenset(FAMILIES)

# Every derived token's prefix: what a floor on the tokens needed to train does not count.
DERIVED_PREFIXES: tuple[str, ...] = tuple(
    prefix for family in FAMILIES for prefix in FAMILY_PREFIXES[family]
)


def prefixes_left_out(families: frozenset[Family]) -> tuple[str, ...]:
    """The prefixes of the derived families not in `families` (those that are off)."""
    return tuple(
        prefix
        for family in FAMILIES
        if family not in families
        for prefix in FAMILY_PREFIXES[family]
    )
