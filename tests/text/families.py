"""What tokenizer tests about words leave out of an exact comparison."""

from app.text.tokenize import DERIVED_PREFIXES


def words_only(token_counts: dict[str, int]) -> dict[str, int]:
    """Return the token counts without word pairs and shape tokens (tested on their own)."""
    return {t: n for t, n in token_counts.items() if not t.startswith(DERIVED_PREFIXES)}
