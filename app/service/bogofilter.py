"""Use case: move a bogofilter user over without retraining, from a wordlist dump.

`bogoutil -d wordlist.db` prints one line per token, `token spamcount hamcount [date]`, where
the counts are the spam and ham messages the token appeared in, and the line
`.MSG_COUNT spam ham` holds the numbers of trained messages. What carries over:

- message counts per class become the class totals;
- each token's document counts become its `docs`. bogofilter counts presence only, so the
  multinomial `terms` are set equal to `docs` (a token counted once per message);
- tokens are renamed to spamsift's spelling where the two tokenizers meet: NFKC and case
  folding (bogofilter keeps case, so `Free` and `free` add up, never beyond the class's
  message count), `subj:` → `subject:`, `rcvd:` → `received:`, `rtrn:` → `return-path:`.
  `head:` tokens (bogofilter's words of other headers) have no counterpart and are skipped.

What cannot: bogofilter keeps no ledger of trained messages, so imported messages cannot be
forgotten or relabelled one by one (later training, feedback and forgetting work as usual
on top); tokens spamsift's tokenizer never emits (bogofilter's own spellings of URLs,
header words, IP addresses) stay unused until mail makes them.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from app.errors import InvalidConfig, InvalidInput, ModelNotFound
from app.live.models import LiveModels
from app.live.write import ModelWrite, create_and_write, write_model
from app.service.runtime import engine_config
from app.store.engine import Database
from app.store.models import insert_model
from app.store.tables import MAX_TOKEN_BYTES
from app.token_texts import HashedTexts

RENAMED_PREFIXES = {"subj:": "subject:", "rcvd:": "received:", "rtrn:": "return-path:"}
SKIPPED_PREFIXES = ("head:",)
MESSAGE_COUNT_LINE = ".MSG_COUNT"


@dataclass
class Wordlist:
    """A bogofilter wordlist read into spamsift's token spelling."""

    spam_messages: int = 0
    ham_messages: int = 0
    tokens: dict[str, list[int]] = field(default_factory=dict)  # token -> [spam docs, ham docs]
    read_lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> tokens
    found_message_counts: bool = False


@dataclass(frozen=True)
class BogofilterImport:
    model: str
    created: bool
    spam_messages: int
    ham_messages: int
    tokens: int  # distinct spamsift tokens whose counts were added
    read_lines: int
    skipped: dict[str, int]


def read_wordlist(lines: Iterable[bytes]) -> Wordlist:
    """Read `bogoutil -d` output; InvalidInput naming the line when one is not a dump line."""
    wordlist = Wordlist()
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 3 or not fields[1].isdigit() or not fields[2].isdigit():
            raise InvalidInput(
                f"line {number}: not a bogoutil -d line (token spamcount hamcount [date])"
            )
        wordlist.read_lines += 1
        spam, ham = int(fields[1]), int(fields[2])
        if fields[0].startswith(b"."):
            if fields[0] == MESSAGE_COUNT_LINE.encode():
                wordlist.spam_messages, wordlist.ham_messages = spam, ham
                wordlist.found_message_counts = True
            continue  # .ENCODING, .WORDLIST_VERSION, .ROBX: bogofilter's own settings
        token, reason = _spamsift_token(fields[0])
        if token is None:
            wordlist.skipped[reason] += 1
            continue
        counts = wordlist.tokens.setdefault(token, [0, 0])
        counts[0] += spam
        counts[1] += ham
    if not wordlist.found_message_counts:
        raise InvalidInput(f"no {MESSAGE_COUNT_LINE} line: not a complete bogoutil -d dump")
    for counts in wordlist.tokens.values():  # merged spellings: never more than the messages
        counts[0] = min(counts[0], wordlist.spam_messages)
        counts[1] = min(counts[1], wordlist.ham_messages)
    return wordlist


def import_bogofilter(
    db: Database,
    *,
    model_name: str,
    wordlist: Wordlist,
    models: LiveModels | None = None,
) -> BogofilterImport:
    """Add a bogofilter wordlist's counts to a ham/spam model (made if missing), in one write
    to the model (one transaction), as any training is: through `ModelWrite`.

    `models` is the process's live models (a server's); without it the import holds its own.
    """
    models = (
        models
        if models is not None
        else LiveModels(db, sync_interval_seconds=0, engine_config=engine_config)
    )
    texts = sorted(token for token, (spam, ham) in wordlist.tokens.items() if spam or ham)

    def work(write: ModelWrite, created: bool) -> BogofilterImport:
        if set(write.classes) != {"ham", "spam"}:
            raise InvalidConfig("classes", f"model {model_name!r} is not a ham/spam model")
        ids = write.token_ids(HashedTexts.from_strings(texts))
        spam_index, ham_index = write.classes.index("spam"), write.classes.index("ham")
        spam = np.array([wordlist.tokens[text][0] for text in texts], dtype=np.int64)
        ham = np.array([wordlist.tokens[text][1] for text in texts], dtype=np.int64)
        token_ids = np.concatenate([ids, ids])
        class_indices = np.repeat(np.array([spam_index, ham_index], dtype=np.int64), len(ids))
        docs = np.concatenate([spam, ham])
        counted = docs > 0
        class_docs = np.zeros(len(write.classes), dtype=np.int64)
        class_docs[spam_index], class_docs[ham_index] = (
            wordlist.spam_messages,
            wordlist.ham_messages,
        )
        write.add_counts(
            token_ids[counted],
            class_indices[counted],
            docs[counted],
            docs[counted].copy(),  # presence only: each token counted once per message
            class_docs=class_docs,
        )
        return BogofilterImport(
            model=model_name,
            created=created,
            spam_messages=wordlist.spam_messages,
            ham_messages=wordlist.ham_messages,
            tokens=len(texts),
            read_lines=wordlist.read_lines,
            skipped=dict(wordlist.skipped),
        )

    try:
        return models.use(
            model_name, lambda live: write_model(db, models, live, lambda w: work(w, False))
        )
    except ModelNotFound:
        pass
    # A new model: made and filled in the same transaction, so a failed import leaves none.
    return create_and_write(
        db,
        models,
        lambda conn: insert_model(conn, name=model_name, classes=("ham", "spam"), config={}),
        lambda write: work(write, True),
    )


def _spamsift_token(raw: bytes) -> tuple[str | None, str]:
    """Return bogofilter's token in spamsift's spelling, or None and why it is skipped."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    if text.startswith(SKIPPED_PREFIXES):
        return None, "header words (head:) have no spamsift counterpart"
    for prefix, renamed in RENAMED_PREFIXES.items():
        if text.startswith(prefix):
            text = renamed + text[len(prefix) :]
            break
    text = unicodedata.normalize("NFKC", text).casefold()
    if not text.isprintable() or len(text.encode("utf-8")) > MAX_TOKEN_BYTES:
        return None, f"unprintable or longer than {MAX_TOKEN_BYTES} bytes"
    return text, ""
