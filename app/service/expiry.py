"""Use case: token expiry, so that a model's database rows stop growing with its mail.

As SpamAssassin (at most `bayes_expiry_max_db_size` tokens, by last use) and `bogoutil -a`
do: a model keeps at most `max_tokens` tokens. Expiry deletes first every token whose counts
all fell to zero (forgotten messages leave them behind), then, past `max_tokens`, the tokens
least recently seen (the generation of the last write that changed their counts), and among
those seen equally long ago the least informative (the smallest spread of their per-class
message rates: a token as frequent in ham as in spam says nothing).

Expiry is one write to the model (`ModelWrite`), like training: the class term totals lose
the deleted tokens' terms, the message counts stay, and the ledger keeps the messages whole,
so forgetting or relabelling a message later subtracts only its tokens that remain.

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

from app.errors import InvalidInput
from app.live.models import LiveModel
from app.live.records import PRUNE_CHUNK_ROWS
from app.live.write import ModelWrite, write_model
from app.service.runtime import Runtime
from app.store.counts import read_token_ages
from app.store.ledger import delete_trained, trained_beyond
from app.store.models import find_model, list_models


@dataclass(frozen=True)
class ExpiryResult:
    model: str
    removed: int  # tokens deleted
    trained_removed: int  # of those, tokens that still counted some message
    kept: int  # tokens left


def expire_tokens(rt: Runtime, *, model_name: str, max_tokens: int) -> ExpiryResult:
    """Keep at most `max_tokens` tokens in the model; delete dead tokens in any case."""
    if max_tokens < 0:
        raise InvalidInput(f"max_tokens must be >= 0, got {max_tokens}")
    return rt.models.use(model_name, lambda live: _expire(rt, live, max_tokens))


def expire_all(rt: Runtime, *, max_tokens: int) -> list[ExpiryResult]:
    """Expire every model (the server runs this periodically)."""
    names = rt.db.run(lambda conn: [row.name for row in list_models(conn)], write=False)
    return [expire_tokens(rt, model_name=name, max_tokens=max_tokens) for name in names]


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


def _expire(rt: Runtime, live: LiveModel, max_tokens: int) -> ExpiryResult:
    def work(write: ModelWrite) -> ExpiryResult:
        chosen, kept = _choose(write, max_tokens)
        trained = write.remove_tokens(chosen)
        return ExpiryResult(
            model=live.name, removed=int(chosen.size), trained_removed=trained, kept=kept
        )

    return write_model(rt.db, rt.models, live, work)


def _choose(write: ModelWrite, max_tokens: int) -> tuple[np.ndarray, int]:
    """Return the token ids to delete and how many tokens remain."""
    ages = read_token_ages(write.conn, write.model_id)
    n_classes = len(write.classes)
    token_ids, position = np.unique(ages.token_ids, return_inverse=True)
    docs = np.zeros((n_classes, token_ids.size), dtype=np.int64)
    terms = np.zeros((n_classes, token_ids.size), dtype=np.int64)
    docs[ages.class_indices, position] = ages.docs
    terms[ages.class_indices, position] = ages.terms
    last_seen = np.zeros(token_ids.size, dtype=np.int64)
    np.maximum.at(last_seen, position, ages.generations)
    dead = (docs.sum(axis=0) == 0) & (terms.sum(axis=0) == 0)
    alive = np.flatnonzero(~dead)
    excess = alive.size - max_tokens
    chosen = [token_ids[dead]]
    if excess > 0:
        with write.live.lock:
            class_docs = np.maximum(write.live.table.class_docs, 1).astype(np.float64)
        rates = docs[:, alive] / class_docs[:, None]
        spread = rates.max(axis=0) - rates.min(axis=0)
        order = np.lexsort((token_ids[alive], spread, last_seen[alive]))  # oldest, then weakest
        chosen.append(token_ids[alive[order[:excess]]])
    removed = np.sort(np.concatenate(chosen))
    return removed, int(alive.size - max(excess, 0))
