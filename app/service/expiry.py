"""Use case: token expiry, so that a model's database rows stop growing with its mail.

A model keeps at most `max_tokens` tokens (its own option, else the server's
`max_tokens_per_model`, else no maximum: `ModelConfig.max_tokens_within`): expiry deletes
first every token whose counts all fell to zero, then, past `max_tokens`, the tokens least
recently seen (the generation of the last write that changed their counts), the least
informative first among those seen equally long ago. A model with `pair_probation` K also
loses its word pairs counted in one trained message that none of its K newest messages (the
ledger's) trained. The rules: `app.bayes.expiry`.

The tokens to delete are chosen from a read of the model (no lock held), then deleted in
chunks of EXPIRY_CHUNK_TOKENS, each chunk one short write to the model (`ModelWrite`), like
training: a trainer waits for one chunk at most, never for the whole expiry (one transaction
for a 155 k-token model held PostgreSQL's lock ~22 s). A chosen token whose counts changed
since the read (trained meanwhile: seen just now) is kept. In each chunk the class term
totals lose the deleted tokens' terms, the message counts stay, and the ledger keeps the
messages whole, so forgetting or relabelling a message later subtracts only its tokens that
remain.

The ledger itself is bounded too, by `max_ledger_messages_per_model`: only the newest trained
messages keep their entry. Dropping an entry changes no count (the message stays trained);
it only means that message can no longer be forgotten (404) or moved to another class by
feedback, which trains it as a message never seen. Entries go in chunks of PRUNE_CHUNK_ROWS,
each its own short transaction, so a writer of the model waits for one chunk at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from app.bayes.expiry import choose_expired, on_probation
from app.errors import InvalidInput
from app.live.held import LiveModel
from app.live.records import PRUNE_CHUNK_ROWS
from app.live.write import ModelWrite, write_model
from app.service.model_config import ModelConfig, parse_config
from app.service.runtime import Runtime
from app.store import Connection
from app.store.counts import changed_since, read_class_totals, read_token_ages
from app.store.ledger import delete_trained, newest_trained_token_ids, trained_beyond
from app.store.models import find_model, list_models
from app.text.families import FAMILY_PREFIXES

# Tokens deleted per transaction. Deleting the 155 k tokens of one model in one transaction
# held PostgreSQL's lock ~22 s, about 0.15 ms a token with its choice: 2,000 a chunk keeps a
# chunk well under a second on either database.
EXPIRY_CHUNK_TOKENS = 2_000


@dataclass(frozen=True)
class ExpiryResult:
    model: str
    removed: int  # tokens deleted
    trained_removed: int  # of those, tokens that still counted some message
    kept: int  # tokens left


# A model with pair_probation is expired by the server's periodic run once its tokens grew by
# this share since its last expiry: each run reads every count row of the model.
PROBATION_GROWTH = 0.1

# What "no maximum" keeps: every token that still counts a message (dead tokens go).
NO_MAXIMUM = 2**62


def expire_tokens(rt: Runtime, *, model_name: str, max_tokens: int | None = None) -> ExpiryResult:
    """Keep at most `max_tokens` tokens in the model (None: its own maximum, `max_tokens_within`;
    only its dead tokens where it has none); delete dead tokens in any case, and the word
    pairs its `pair_probation` ends."""
    if max_tokens is not None and max_tokens < 0:
        raise InvalidInput(f"max_tokens must be >= 0, got {max_tokens}")

    def expire(live: LiveModel) -> ExpiryResult:
        config = parse_config(live.options, classes=live.classes)
        limit = max_tokens if max_tokens is not None else _maximum(rt, config)
        return _expire(rt, live, NO_MAXIMUM if limit is None else limit, config.pair_probation)

    return rt.models.use(model_name, expire)


def expire_all(
    rt: Runtime,
    *,
    max_tokens: int | None = None,
    over_maximum_only: bool = False,
    left: dict[int, int] | None = None,
) -> list[ExpiryResult]:
    """Expire every model (`spamsift expire`) to `max_tokens`, or (None) each to its own
    maximum (`max_tokens_within`), and end its `pair_probation`. With `over_maximum_only` (the
    server's run every five minutes), only the models whose trained tokens are past their
    maximum, as their rows count them, and those with a `pair_probation` whose tokens grew
    by PROBATION_GROWTH since their last expiry in this process, or since this process first
    saw them (`left`: model id -> tokens then, updated here): expiring a model loads it, and
    a server of many models under the maximum would otherwise read every one of them each
    time (a model under it keeps its dead tokens until it passes the maximum, or until
    `spamsift expire`)."""
    left = {} if left is None else left
    results = []
    for row in rt.db.run(list_models, write=False):
        config = parse_config(row.config, classes=row.classes)
        limit = max_tokens if max_tokens is not None else _maximum(rt, config)
        if over_maximum_only:
            over = limit is not None and row.vocabulary > limit
            grown = False
            if config.pair_probation is not None:
                baseline = left.setdefault(row.id, row.vocabulary)  # first seen: from now on
                grown = row.vocabulary > (1 + PROBATION_GROWTH) * baseline
            if not (over or grown):
                continue
        result = expire_tokens(
            rt, model_name=row.name, max_tokens=NO_MAXIMUM if limit is None else limit
        )
        left[row.id] = result.kept
        results.append(result)
    return results


def _maximum(rt: Runtime, config: ModelConfig) -> int | None:
    return config.max_tokens_within(rt.settings.max_tokens_per_model)


@dataclass(frozen=True)
class LedgerPruning:
    model: str
    removed: int  # ledger entries dropped (their messages stay trained)


# Keys read per round of pruning: bounds the memory of a first pruning of a long ledger.
LEDGER_KEYS_PER_ROUND = 50_000


def prune_ledger(
    rt: Runtime, *, model_name: str, keep: int, chunk_rows: int = PRUNE_CHUNK_ROWS
) -> LedgerPruning:
    """Drop the ledger entries of the model's trained messages beyond its `keep` newest."""
    if keep < 0:
        raise InvalidInput(f"keep must be >= 0, got {keep}")
    model_id = rt.db.run(lambda conn: find_model(conn, model_name).id, write=False)
    removed = 0
    while True:
        keys = rt.db.run(
            lambda conn: trained_beyond(conn, model_id, keep=keep, limit=LEDGER_KEYS_PER_ROUND),
            write=False,
        )
        for start in range(0, len(keys), chunk_rows):
            chunk = keys[start : start + chunk_rows]
            rt.db.run(partial(delete_trained, model_id=model_id, message_keys=chunk))
            removed += len(chunk)
        if len(keys) < LEDGER_KEYS_PER_ROUND:
            return LedgerPruning(model=model_name, removed=removed)


def prune_ledgers(rt: Runtime, *, keep: int) -> list[LedgerPruning]:
    """Prune every model's ledger (the server runs this periodically)."""
    names = rt.db.run(lambda conn: [row.name for row in list_models(conn)], write=False)
    return [prune_ledger(rt, model_name=name, keep=keep) for name in names]


def _expire(
    rt: Runtime, live: LiveModel, max_tokens: int, pair_probation: int | None
) -> ExpiryResult:
    """Choose from a read of the model, then delete in chunks (see the module docstring)."""
    chosen, kept, generation = rt.db.run(
        lambda conn: _choose(conn, live, max_tokens, pair_probation), write=False
    )
    removed = trained = 0
    for start in range(0, chosen.size, EXPIRY_CHUNK_TOKENS):
        chunk = chosen[start : start + EXPIRY_CHUNK_TOKENS]

        def work(write: ModelWrite, chunk: np.ndarray = chunk) -> tuple[int, int]:
            seen = changed_since(
                write.conn, write.model_id, chunk.tolist(), generation, len(write.classes)
            )
            going = np.setdiff1d(chunk, seen, assume_unique=True)
            return int(going.size), write.remove_tokens(going)

        gone, gone_trained = rt.models.use(
            live.name, lambda current: write_model(rt.db, rt.models, current, work)
        )
        removed += gone
        trained += gone_trained
        kept += int(chunk.size) - gone
    return ExpiryResult(model=live.name, removed=removed, trained_removed=trained, kept=kept)


def _choose(
    conn: Connection, live: LiveModel, max_tokens: int, pair_probation: int | None
) -> tuple[np.ndarray, int, int]:
    """Return the token ids to delete (sorted), how many tokens remain, and the model's
    generation they were chosen at."""
    generation = find_model(conn, live.name).generation
    ages = read_token_ages(conn, live.id, len(live.classes))
    n_classes = len(live.classes)
    token_ids, position = np.unique(ages.token_ids, return_inverse=True)
    docs = np.zeros((n_classes, token_ids.size), dtype=np.int64)
    terms = np.zeros((n_classes, token_ids.size), dtype=np.int64)
    docs[ages.class_indices, position] = ages.docs
    terms[ages.class_indices, position] = ages.terms
    last_seen = np.zeros(token_ids.size, dtype=np.int64)
    np.maximum.at(last_seen, position, ages.generations)
    class_docs = read_class_totals(conn, live.id, n_classes)[0]
    choice = choose_expired(token_ids, docs, terms, last_seen, class_docs, max_tokens)
    expired, kept = choice.expired, choice.kept
    recent_ids = (
        None
        if pair_probation is None
        else newest_trained_token_ids(conn, live.id, messages=pair_probation)
    )
    if recent_ids is not None:
        pairs = _word_pairs(live, token_ids)
        ending = token_ids[on_probation(docs, pairs, np.isin(token_ids, recent_ids))]
        kept -= int(np.setdiff1d(ending, expired, assume_unique=True).size)
        expired = np.union1d(expired, ending)
    return expired, kept, generation


def _word_pairs(live: LiveModel, token_ids: np.ndarray) -> np.ndarray:
    """Which of `token_ids` (ascending) are word pairs, by the held model's texts; a token
    newer than the held copy (trained by another process since its last sync) is recent and
    counts as none."""
    pairs = np.zeros(token_ids.size, dtype=np.bool_)
    with live.lock:
        index = live.table.tokens
        known = token_ids < len(index)
        pairs[known] = index.starting_with(FAMILY_PREFIXES["word_pairs"], token_ids[known])
    return pairs
