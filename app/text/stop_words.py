"""Stop-word lists: built-in (packaged as stopwords/*.txt), none, or the model's own words.

The tokenizer does not drop stop words; the naive Bayes vocabulary drops tokens equal to one,
so a model's list can change without retraining. Words are normalised as body words are.
"""

from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources

from app.text.limits import DEFAULT_LIMITS
from app.text.words import normalize_text, word_tokens

BUILT_IN_LISTS = ("english", "chinese")


@cache
def _built_in(name: str) -> frozenset[str]:
    path = resources.files("app.text").joinpath("stopwords", f"{name}.txt")
    lines = path.read_text(encoding="utf-8").splitlines()
    return _normalize_words(line for line in lines if line and not line.startswith("#"))


def _normalize_words(words: Iterable[str]) -> frozenset[str]:
    normalized: set[str] = set()
    for word in words:
        normalized.update(word_tokens(normalize_text(word), DEFAULT_LIMITS.max_token_chars))
    return frozenset(normalized)


def load_stop_words(choice: str | Sequence[str]) -> frozenset[str]:
    """Return the stop words for a model's `stop_words` config.

    `choice` is "english" or "chinese" (built-in lists), "none" (no stop words), or a list
    of words. Each word is normalised like a body word: "Don't" gives "don" and "t", and a
    Chinese word gives its character bigrams, the tokens it would match in a message.
    Raise ValueError for an unknown list name.
    """
    if isinstance(choice, str):
        if choice == "none":
            return frozenset()
        if choice not in BUILT_IN_LISTS:
            raise ValueError(
                f"stop_words must be one of {', '.join(BUILT_IN_LISTS)}, none or a list, "
                f"got {choice!r}"
            )
        return _built_in(choice)
    return _normalize_words(choice)
