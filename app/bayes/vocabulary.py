"""The effective vocabulary V of SPEC §3: which token ids take part in scoring."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from app.bayes.counts import BoolArray, CountTable, IntArray
from app.bayes.tokens import TokenIndex


def select_vocabulary(
    table: CountTable,
    *,
    min_df: int = 1,
    max_vocab: int | None = None,
    stop_words: frozenset[str] = frozenset(),
    excluded_prefixes: tuple[str, ...] = (),
) -> BoolArray:
    """Return the mask of V over the table's ids, shape (n_tokens,).

    V holds the tokens whose total docs over all classes is >= min_df (never a token with no
    docs), minus stop words (exact token text) and the tokens starting with one of
    `excluded_prefixes` (a derived token family that is off), cut to the max_vocab tokens of
    highest total docs, ties broken by token text.
    """
    return vocabulary_mask(
        table.token_docs.sum(axis=0),
        table.tokens,
        min_df=min_df,
        max_vocab=max_vocab,
        stop_words=stop_words,
        excluded_prefixes=excluded_prefixes,
        token_lookup=table.tokens.lookup_words,
    )


def vocabulary_mask(
    total_docs: IntArray,
    tokens: Sequence[str],
    *,
    min_df: int = 1,
    max_vocab: int | None = None,
    stop_words: frozenset[str] = frozenset(),
    excluded_prefixes: tuple[str, ...] = (),
    token_lookup: Callable[[frozenset[str]], IntArray] | None = None,
) -> BoolArray:
    """Return the mask of V given total docs per token, shape (n_tokens,), and token texts."""
    mask = candidate_mask(
        total_docs,
        tokens,
        min_df=min_df,
        stop_words=stop_words,
        excluded_prefixes=excluded_prefixes,
        token_lookup=token_lookup,
    )
    if max_vocab is None or int(mask.sum()) <= max_vocab:
        return mask
    candidates = np.flatnonzero(mask)
    docs = total_docs[candidates]
    # The max_vocab-th highest docs value splits the candidates: all above it are in, and
    # the places left go to the tokens equal to it, in token-text order.
    cutoff = np.partition(docs, docs.size - max_vocab)[docs.size - max_vocab]
    above = candidates[docs > cutoff]
    tied = candidates[docs == cutoff]
    places = max_vocab - above.size
    tied_by_text = sorted(tied.tolist(), key=tokens.__getitem__)[:places]
    selected = np.zeros_like(mask)
    selected[above] = True
    selected[np.asarray(tied_by_text, dtype=np.int64)] = True
    return selected


def candidate_mask(
    total_docs: IntArray,
    tokens: Sequence[str],
    *,
    min_df: int = 1,
    stop_words: frozenset[str] = frozenset(),
    excluded_prefixes: tuple[str, ...] = (),
    token_ids: IntArray | None = None,
    token_lookup: Callable[[frozenset[str]], IntArray] | None = None,
) -> BoolArray:
    """Return which tokens pass min_df, the stop words and the excluded prefixes, before the
    max_vocab cut.

    With token_ids, total_docs and the mask are for those ids only (incremental refresh).
    With token_lookup (a set of words -> their ids, -1 if unknown), the stop words are looked
    up rather than every token's text checked: a few hundred lookups instead of a million
    Python objects made and dropped (time, and memory the allocator keeps), or, for the few
    hundred ids a trained message touched, instead of a text made per id (0.65 ms of a "mark
    as spam" click's refresh).
    """
    mask = np.asarray(total_docs >= max(min_df, 1), dtype=np.bool_)
    if stop_words and token_lookup is not None:
        ids = token_lookup(stop_words)
        if token_ids is None:
            mask[ids[(ids >= 0) & (ids < mask.size)]] = False
        else:
            mask &= ~np.isin(token_ids, ids[ids >= 0])
    elif stop_words:
        positions = np.flatnonzero(mask)
        ids = positions if token_ids is None else token_ids[positions]
        stopped = [
            position
            for position, token_id in zip(positions.tolist(), ids.tolist(), strict=True)
            if tokens[token_id] in stop_words
        ]
        mask[np.asarray(stopped, dtype=np.int64)] = False
    if excluded_prefixes:
        mask &= ~prefixed(tokens, excluded_prefixes, mask.size, token_ids)
    return mask


def prefixed(
    tokens: Sequence[str],
    prefixes: tuple[str, ...],
    size: int,
    token_ids: IntArray | None = None,
) -> BoolArray:
    """Return which of `size` tokens (ids 0..size-1, or `token_ids`) start with `prefixes`.

    A `TokenIndex` compares the bytes of every text at once; other sequences (a handful of
    tokens) are checked text by text.
    """
    if isinstance(tokens, TokenIndex):
        if token_ids is not None:
            return tokens.starting_with(prefixes, token_ids)
        found = tokens.starting_with(prefixes)
        return np.concatenate([found, np.zeros(max(size - found.size, 0), np.bool_)])[:size]
    ids = range(min(size, len(tokens))) if token_ids is None else token_ids.tolist()
    found = np.zeros(size, dtype=np.bool_)
    for position, token_id in enumerate(ids):
        found[position] = tokens[token_id].startswith(prefixes)
    return found
