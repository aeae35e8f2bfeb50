"""Message -> tokens, pure: no I/O but its packaged stop-word lists, no other room imported.

Public interface: `tokenize_raw`, `tokenize_text`, `text_only`, `load_stop_words`,
`TokenizerLimits`, `TokenizedMessage`, `evidence_count`, `token_lines`; hashed tokens:
`hash_raw`, `hash_text`, `HashedTokens`, `token_hash`, `token_digest`; defect codes in
`app.text.defects`. Each entry point is given the token core (`app.text.core.TokenCore`) its
process chose once (`app.text.core.resolve`); the room keeps no choice of its own.
"""

from app.text.hashed import HashedTokens, token_digest
from app.text.limits import TokenizerLimits
from app.text.mime import ParsedMessage, parse_message
from app.text.stop_words import load_stop_words
from app.text.tokenize import (
    TokenizedMessage,
    evidence_count,
    hash_raw,
    hash_text,
    text_only,
    token_lines,
    tokenize_raw,
    tokenize_text,
)
from app.token_hash import token_hash

__all__ = [
    "HashedTokens",
    "ParsedMessage",
    "TokenizedMessage",
    "TokenizerLimits",
    "evidence_count",
    "hash_raw",
    "hash_text",
    "load_stop_words",
    "parse_message",
    "text_only",
    "token_digest",
    "token_hash",
    "token_lines",
    "tokenize_raw",
    "tokenize_text",
]
