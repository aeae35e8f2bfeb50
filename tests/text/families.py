"""What tokenizer tests about words leave out of an exact comparison."""

# Families every message gets beside its words: word pairs and shape (size, links, HTML share).
ADDED_PREFIXES = ("pair:", "size:", "links:", "html:")


def words_only(token_counts: dict[str, int]) -> dict[str, int]:
    """Return the token counts without word pairs and shape tokens (tested on their own)."""
    return {t: n for t, n in token_counts.items() if not t.startswith(ADDED_PREFIXES)}
