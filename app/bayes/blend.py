"""Merged counts: how a personal model and the model backing it classify together.

DSPAM's merged groups: the counts of the two models are summed token by token (by text, since
each model numbers its tokens its own way) and class by class, and the message is scored on
the sum as on one model:

    D_cw = D_cw(personal) + D_cw(backing),   T_cw = T_cw(personal) + T_cw(backing)
    N_c  = N_c(personal)  + N_c(backing),    T_c  = T_c(personal)  + T_c(backing)

This is exactly the model that would have been trained on both models' messages, for every
event model (multinomial, Bernoulli and Robinson-Fisher read nothing but these counts), so no
weight is to tune: a new personal model scores as its backing model, and its own mail counts
more as it is trained (its messages are added to the backing model's, one for one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.bayes.counts import CountArray, CountTable, IntArray
from app.bayes.naive_bayes import NaiveBayesConfig, vocabulary_totals
from app.bayes.scorers.base import VocabularyTotals


def merge_counts(base: CountTable, extra: CountTable, *, base_weight: int = 1) -> CountTable:
    """Return a new table: `base`'s counts (times `base_weight`) plus `extra`'s, token by
    token text.

    The result numbers `base`'s tokens as `base` does and appends `extra`'s other tokens after
    them; neither table changes. Slots without a text (expired tokens) are skipped.
    """
    return merge_counts_mapped(base, extra, base_weight=base_weight)[0]


def merge_counts_mapped(
    base: CountTable, extra: CountTable, *, base_weight: int = 1
) -> tuple[CountTable, IntArray]:
    """`merge_counts`, and for each of `extra`'s ids the merged table's id of its token (-1
    for a slot without a text)."""
    if base_weight < 1:
        raise ValueError(f"base_weight must be >= 1, got {base_weight}")
    if base.classes != extra.classes:
        raise ValueError(
            f"merged tables need the same classes, got {list(base.classes)} and "
            f"{list(extra.classes)}"
        )
    merged = base.copy()
    if base_weight != 1:
        n = merged.n_tokens
        ids = np.tile(np.arange(n, dtype=np.int64), len(base.classes))
        classes = np.repeat(np.arange(len(base.classes), dtype=np.int64), n)
        merged.set_counts(
            ids,
            classes,
            base.token_docs.ravel().astype(np.int64) * base_weight,
            base.token_terms.ravel().astype(np.int64) * base_weight,
        )
    texts = extra.tokens[:]
    extra_ids = np.fromiter((index for index, text in enumerate(texts) if text), np.int64, count=-1)
    extra_to_merged = np.full(len(texts), -1, dtype=np.int64)
    if extra_ids.size:
        kept_texts = [texts[index] for index in extra_ids.tolist()]
        merged_ids = merged.lookup(kept_texts, exact=True)
        unknown = np.flatnonzero(merged_ids < 0)
        if unknown.size:
            new_ids = np.arange(merged.n_tokens, merged.n_tokens + unknown.size, dtype=np.int64)
            merged.place(new_ids, [kept_texts[index] for index in unknown.tolist()])
            merged_ids[unknown] = new_ids
        _add_cells(
            merged, merged_ids, extra.token_docs[:, extra_ids], extra.token_terms[:, extra_ids]
        )
        extra_to_merged[extra_ids] = merged_ids
    merged.set_class_totals(
        base.class_docs * base_weight + extra.class_docs,
        base.class_terms * base_weight + extra.class_terms,
    )
    return merged, extra_to_merged


def merged_vocabulary_totals(
    base: CountTable, extra: CountTable, config: NaiveBayesConfig, *, base_weight: int = 1
) -> VocabularyTotals:
    """V's sums over the merged counts of `base` (times `base_weight`) and `extra`: what
    multinomial and Bernoulli need beyond a message's own rows to score it on the merge
    (`merge_rows`), so a blend is scored without merging the whole tables per message.
    O(K·(n_base + n_extra)); not for a max_vocab cut, which ranks every token."""
    # Sums over the union do not depend on the order: with no weight, the bigger table is
    # copied and the smaller one's tokens looked up in it (a personal model's few, not a
    # global model's hundreds of thousands).
    if base_weight == 1 and base.n_tokens < extra.n_tokens:
        base, extra = extra, base
    merged = merge_counts(base, extra, base_weight=base_weight)
    stop_word_ids = None
    if config.stop_words:
        ids = merged.lookup(sorted(config.stop_words), exact=True)
        stop_word_ids = ids[ids >= 0]
    if config.excluded_prefixes:
        prefixed = np.flatnonzero(merged.tokens.starting_with(config.excluded_prefixes))
        stop_word_ids = (
            prefixed if stop_word_ids is None else np.concatenate([stop_word_ids, prefixed])
        )
    return vocabulary_totals(
        merged.token_docs.astype(np.int64, copy=False),
        merged.token_terms.astype(np.int64, copy=False),
        merged.class_docs,
        alpha=config.alpha,
        min_df=config.min_df,
        stop_word_ids=stop_word_ids,
    )


def restrict(table: CountTable, texts: Sequence[str]) -> CountTable:
    """Return a table of `texts`' rows of `table` only (those it knows), with its class totals.

    Enough to score messages made of `texts` where a scorer reads nothing but a message's own
    tokens and the class totals (Robinson-Fisher).
    """
    distinct = list(dict.fromkeys(texts))
    ids = table.lookup(distinct, exact=True) if distinct else np.zeros(0, dtype=np.int64)
    known = np.flatnonzero(ids >= 0)
    part = CountTable(table.classes)
    if known.size:
        part.place(np.arange(known.size, dtype=np.int64), [distinct[i] for i in known.tolist()])
        source = ids[known]
        _add_cells(
            part,
            np.arange(known.size, dtype=np.int64),
            table.token_docs[:, source],
            table.token_terms[:, source],
        )
    part.set_class_totals(table.class_docs, table.class_terms)
    return part


def _add_cells(table: CountTable, token_ids: IntArray, docs: CountArray, terms: CountArray) -> None:
    """Add (n_classes, len(token_ids)) docs and terms to `table`'s cells of `token_ids`.

    Summed as int64: two int32 counts can add up past int32 (the table widens to hold them).
    """
    n_classes = len(table.classes)
    ids = np.tile(token_ids, n_classes)
    classes = np.repeat(np.arange(n_classes, dtype=np.int64), token_ids.size)
    table.set_counts(
        ids,
        classes,
        table.token_docs[classes, ids].astype(np.int64) + docs.ravel(),
        table.token_terms[classes, ids].astype(np.int64) + terms.ravel(),
    )


@dataclass(frozen=True)
class Rows:
    """Some texts' rows of one table: each text's id in it (-1: unknown), their counts
    (zero where unknown), and the table's class totals."""

    ids: IntArray
    docs: IntArray  # (n_classes, len(texts))
    terms: IntArray
    class_docs: IntArray
    class_terms: IntArray


def rows_of(table: CountTable, texts: Sequence[str]) -> Rows:
    """The rows of distinct `texts` in `table` (the caller holds whatever guards `table`)."""
    ids = table.lookup(list(texts), exact=True) if texts else np.zeros(0, dtype=np.int64)
    known = ids >= 0
    safe = np.where(known, ids, 0)
    n_classes = len(table.classes)
    if table.n_tokens:
        docs = np.where(known, table.token_docs[:, safe], 0)
        terms = np.where(known, table.token_terms[:, safe], 0)
    else:
        docs = terms = np.zeros((n_classes, len(texts)), dtype=np.int64)
    return Rows(ids, docs, terms, table.class_docs.copy(), table.class_terms.copy())


def merge_rows(
    classes: Sequence[str], texts: Sequence[str], parts: Sequence[Rows], weights: Sequence[int]
) -> tuple[CountTable, list[IntArray]]:
    """One table of the distinct `texts` any part knows, each cell the weighted sum of the
    parts' (`merge_counts` for a message's tokens only, without building a table per part);
    and for each part its ids of the table's tokens (-1: it does not know one)."""
    known = np.zeros(len(texts), dtype=np.bool_)
    for part in parts:
        known |= part.ids >= 0
    kept = np.flatnonzero(known)
    table = CountTable(classes)
    n_classes = len(table.classes)
    docs = np.zeros((n_classes, kept.size), dtype=np.int64)
    terms = np.zeros((n_classes, kept.size), dtype=np.int64)
    class_docs = np.zeros(n_classes, dtype=np.int64)
    class_terms = np.zeros(n_classes, dtype=np.int64)
    for part, weight in zip(parts, weights, strict=True):
        docs += weight * part.docs[:, kept]
        terms += weight * part.terms[:, kept]
        class_docs += weight * part.class_docs
        class_terms += weight * part.class_terms
    if kept.size:
        local = np.arange(kept.size, dtype=np.int64)
        table.place(local, [texts[i] for i in kept.tolist()])
        table.set_counts(
            np.tile(local, n_classes),
            np.repeat(np.arange(n_classes, dtype=np.int64), kept.size),
            docs.ravel(),
            terms.ravel(),
        )
    table.set_class_totals(class_docs, class_terms)
    return table, [part.ids[kept] for part in parts]
