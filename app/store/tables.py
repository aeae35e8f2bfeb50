"""The SQL schema. Every table is keyed by `model_id` first, so a deployment can distribute the
tables by model (e.g. Citus `create_distributed_table(..., 'model_id')`) without a schema change.

Token ids are dense per model (0, 1, 2, …, handed out from `models.n_tokens`), so a process can
keep a model's counts as arrays indexed by token id, and the ledgers store a message's tokens as
packed id arrays rather than text.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

MAX_TOKEN_BYTES = 200  # the tokenizer bounds tokens far below this; the column says so too
MAX_MESSAGE_ID_CHARS = 255


def _model_fk() -> Column[int]:
    return Column(
        "model_id", Integer, ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )


models = Table(
    "models",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("classes", JSON, nullable=False),
    Column("config", JSON, nullable=False),
    # Bumped by every write transaction on the model; it orders the change feed (SPEC §7).
    Column("generation", BigInteger, nullable=False, default=0),
    Column("n_tokens", BigInteger, nullable=False, default=0),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Tokens counted in at least one trained message, kept by every write (/metrics and the
    # model list read it instead of loading the model).
    Column("vocabulary", BigInteger, nullable=False, default=0, server_default="0"),
    # Bumped when tokens expire (rows deleted, which the change feed cannot show): a process
    # holding the model reloads it.
    Column("epoch", BigInteger, nullable=False, default=0, server_default="0"),
    # The model whose counts this one's are merged with when classifying (a personal model
    # backed by a global one); NULL: none. One level: a backing model is backed by none.
    Column("backed_by", Integer, nullable=True),
    # Whether feedback on this model also trains its backing model.
    Column(
        "feedback_trains_backing",
        Boolean,
        nullable=False,
        default=False,
        server_default=false(),
    ),
    Index("ix_models_backed_by", "backed_by"),
)

class_totals = Table(
    "class_totals",
    metadata,
    _model_fk(),
    Column("class_index", SmallInteger, primary_key=True),
    Column("docs", BigInteger, nullable=False, default=0),
    Column("terms", BigInteger, nullable=False, default=0),
    CheckConstraint("docs >= 0 AND terms >= 0", name="totals_not_negative"),
)


def _model_key() -> Column[int]:
    """`model_id` without a foreign key, for the token tables that batch training fills:
    PostgreSQL checks a key row by row (60 % of its CPU for a COPY of new tokens). Their rows
    are written only under the model's row lock, and `delete_model` deletes them explicitly."""
    return Column("model_id", Integer, primary_key=True, autoincrement=False)


# A model's token texts under their ids. Training adds ~100 rows a message, so each B-tree
# costs: on SQLite the table is its primary key (WITHOUT ROWID: no row id B-tree beside it),
# and no index serves the change feed, which reads new tokens as a range of ids (ids are
# given out in generation order). `generation` is the write that added the token.
tokens = Table(
    "tokens",
    metadata,
    _model_key(),
    Column("token_id", BigInteger, primary_key=True, autoincrement=False),
    Column("text", String(MAX_TOKEN_BYTES), nullable=False),
    Column("generation", BigInteger, nullable=False),
    UniqueConstraint("model_id", "text", name="uq_tokens_model_id_text"),
    sqlite_with_rowid=False,
)

# A model's counts, CHUNK_IDS token ids a row (app.store.chunks): per token its docs and terms
# per class and the generation that last changed it, packed little-endian int64. `generation`
# is the latest of its entries', for the change feed. No CHECK can see into the blob: the
# writer refuses a negative count before it stores one (`app.store.chunks.NegativeCount`).
count_chunks = Table(
    "count_chunks",
    metadata,
    _model_key(),
    Column("chunk", BigInteger, primary_key=True, autoincrement=False),
    Column("generation", BigInteger, nullable=False),
    Column("counts", LargeBinary, nullable=False),
    Index("ix_count_chunks_model_id_generation", "model_id", "generation"),
)

# Count changes not yet folded into `count_chunks`: one row per write, its whole delta
# ((token id, class index, docs, terms) little-endian int64 per cell). The writer folds it
# once it holds JOURNAL_CELLS cells; readers add it to what the chunks hold.
count_journal = Table(
    "count_journal",
    metadata,
    _model_key(),
    Column("generation", BigInteger, primary_key=True, autoincrement=False),
    Column("cells", Integer, nullable=False),
    Column("delta", LargeBinary, nullable=False),
)

# The Gaussian of each numeric attribute per class: n, Σx and Σx² of the trained messages that
# gave it. The sums are exact rationals written "p/q" (any float is one), so train then forget
# restores them exactly; a few rows per model, read whole. A row is kept at n = 0, so the
# change feed (rows newer than a generation) shows a cell emptied by forget.
attribute_sums = Table(
    "attribute_sums",
    metadata,
    _model_fk(),
    Column("name", String(64), primary_key=True),
    Column("class_index", SmallInteger, primary_key=True),
    Column("n", BigInteger, nullable=False),
    Column("total", Text, nullable=False),
    Column("squares", Text, nullable=False),
    Column("generation", BigInteger, nullable=False),
    CheckConstraint("n >= 0", name="attribute_n_not_negative"),
    Index("ix_attribute_sums_model_id_generation", "model_id", "generation"),
)

# What each trained message added, so forget and relabel subtract exactly that (SPEC §7).
trained_messages = Table(
    "trained_messages",
    metadata,
    _model_fk(),
    # sha256 over the client's message_id and the digest of the message's tokens.
    Column("message_key", String(64), primary_key=True),
    Column("message_id", String(MAX_MESSAGE_ID_CHARS), nullable=False),
    Column("class_index", SmallInteger, nullable=False),
    Column("token_ids", LargeBinary, nullable=False),  # little-endian uint32, ascending
    Column("token_terms", LargeBinary, nullable=False),  # little-endian uint32, same order
    Column("trained_at", DateTime(timezone=True), nullable=False),
    # sha256 of raw mail's body (app.service.messages.body_digest), with the message_id how a
    # reported copy with more header fields finds the message; null for text and older rows.
    Column("body_digest", String(64), nullable=True),
    # The message's numeric attributes, {name: number} (JSON keeps a float's every digit), so
    # forget and relabel take exactly these from `attribute_sums`; null: none.
    Column("attributes", JSON(none_as_null=True), nullable=True),
    Index("ix_trained_messages_model_id_message_id", "model_id", "message_id"),
)

# Recent classifications: token ids and counts only, never text, kept `retention_days`.
classifications = Table(
    "classifications",
    metadata,
    _model_fk(),
    Column("message_key", String(64), primary_key=True),
    Column("message_id", String(MAX_MESSAGE_ID_CHARS), nullable=False),
    Column("token_ids", LargeBinary, nullable=False),
    Column("token_terms", LargeBinary, nullable=False),
    Column("verdict", String(64), nullable=False),
    Column("classified_at", DateTime(timezone=True), nullable=False),
    Column("body_digest", String(64), nullable=True),  # as trained_messages.body_digest
    Index("ix_classifications_model_id_message_id", "model_id", "message_id"),
    Index("ix_classifications_classified_at", "classified_at"),
)

# Hourly activity counters for the dashboard (SPEC §6.2): trained, forgotten, classified,
# corrections, verdict:<label>.
activity = Table(
    "activity",
    metadata,
    _model_fk(),
    Column("hour", DateTime(timezone=True), primary_key=True),
    Column("event", String(80), primary_key=True),
    Column("count", BigInteger, nullable=False),
)

# API keys (SPEC §8): the one table not keyed by model, since a key may serve several models.
# `models` holds the names a key was made for (JSON list; NULL: every model); what a limited key
# may use is its rows in `api_key_models`, bound to the models' ids, so a model deleted and made
# again under its old name is not the one the key was for. Only a hash of each key is kept;
# `key_id`, the key's public part, finds the row and `keys list` shows it.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key_id", String(16), nullable=False, unique=True),
    Column("key_hash", String(64), nullable=False),  # sha256 hex of the whole key
    Column("name", String(100), nullable=False),
    Column("scopes", JSON, nullable=False),
    Column("models", JSON(none_as_null=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

# The models a limited key may use. Deleting a model deletes its rows (and the service revokes
# a key left with none), so SQLite reusing the id for a new model grants the old key nothing.
api_key_models = Table(
    "api_key_models",
    metadata,
    Column("api_key_id", Integer, ForeignKey("api_keys.id", ondelete="CASCADE"), primary_key=True),
    Column("model_id", Integer, ForeignKey("models.id", ondelete="CASCADE"), primary_key=True),
    Index("ix_api_key_models_model_id", "model_id"),
)

# One row: bumped by every change to the keys, so a server process re-reads its in-memory
# keys only when this (and the count of api_key_models rows) changed.
api_key_changes = Table(
    "api_key_changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("generation", BigInteger, nullable=False),
)
