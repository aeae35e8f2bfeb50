"""Which tokens expiry deletes: the rules alone, on a model's counts, whoever holds them.

As SpamAssassin (at most `bayes_expiry_max_db_size` tokens, by last use) and `bogoutil -a`
do: first every token whose counts all fell to zero (forgotten messages leave them behind),
then, past `max_tokens`, the tokens least recently seen, and among those seen equally long
ago the least informative (the smallest spread of their per-class message rates: a token as
frequent in ham as in spam says nothing), then the one made first (`choose_expired`). Besides,
with pair probation, the word pairs counted in one trained message only once that message is
no longer among the recent ones (`on_probation`). The service applies them to the rows it
reads (`app.service.expiry`), the evaluation harness to a model in memory between the
messages of a stream, so that what an evaluation measures is what expiry does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.bayes.counts import BoolArray, CountArray, IntArray


@dataclass(frozen=True)
class ExpiryChoice:
    expired: IntArray  # token ids to delete, ascending
    kept: int  # tokens with a count left once they are gone


def choose_expired(
    token_ids: IntArray,
    docs: CountArray,
    terms: CountArray,
    last_seen: IntArray,
    class_docs: IntArray,
    max_tokens: int,
    *,
    made: IntArray | None = None,
) -> ExpiryChoice:
    """The tokens to delete so that at most `max_tokens` keep a count.

    `docs` and `terms` are (classes, tokens) counts of `token_ids` (ascending), `last_seen`
    each token's last change (a generation, or a message's position in a stream; larger is
    newer), `class_docs` the messages trained per class, `made` the order the tokens were
    made in (larger is later; by default their ids, which the service gives in that order,
    a token deleted and seen again getting a new one).
    """
    made = token_ids if made is None else made
    dead = (docs.sum(axis=0) == 0) & (terms.sum(axis=0) == 0)
    alive = np.flatnonzero(~dead)
    excess = alive.size - max_tokens
    chosen = [token_ids[dead]]
    if excess > 0:
        rates = docs[:, alive] / np.maximum(class_docs, 1).astype(np.float64)[:, None]
        spread = rates.max(axis=0) - rates.min(axis=0)
        order = np.lexsort((made[alive], spread, last_seen[alive]))  # oldest, then weakest
        chosen.append(token_ids[alive[order[:excess]]])
    return ExpiryChoice(
        expired=np.sort(np.concatenate(chosen)), kept=int(alive.size - max(excess, 0))
    )


def on_probation(docs: CountArray, candidates: BoolArray, recent: BoolArray) -> BoolArray:
    """Which tokens pair probation deletes: of the `candidates` (a family's tokens, word
    pairs), those counted in one trained message only where that message is not one of the
    recent ones (`recent`: the token was trained by one of them).

    A token seen in one message says nothing of any other until it recurs; most word pairs
    never do. Kept while their message is recent, a campaign's next copies still meet them.
    `docs` is (classes, tokens), aligned with the two masks.
    """
    single: BoolArray = docs.sum(axis=0) == 1
    return candidates & single & ~recent
