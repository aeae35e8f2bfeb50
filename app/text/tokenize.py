"""Message -> token counts: the public entry points of the text room.

Tokens come from small functions, one per kind of evidence, as in the SpamBayes tokenizer;
each returns a list (cheaper than generators chained five deep).
Body words are emitted bare ("viagra") and every other token carries a prefix
("subject:viagra", "url:example.org"), so a model's stop-word set, which the naive Bayes
vocabulary applies to token text, can only ever drop body words.
"""

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice

from app.text import core, defects
from app.text.limits import DEFAULT_LIMITS, TokenizerLimits
from app.text.mime import ParsedMessage, parse_message
from app.text.shape import shape_tokens
from app.text.words import normalize_text, url_tokens

_MIME_TYPE = re.compile(r"[a-z0-9!#$&^_.+-]{1,40}/[a-z0-9!#$&^_.+-]{1,60}")
_MAILTO_DOMAIN = re.compile(r"mailto:[^@\s]{0,64}@([a-z0-9.-]{1,255})")


@dataclass(frozen=True)
class TokenizedMessage:
    """Tokens of one message and what was wrong with it."""

    token_counts: dict[str, int]  # token -> occurrences; insertion order = first emission
    defects: tuple[str, ...]  # sorted unique codes from app.text.defects


def part_tokens(message: ParsedMessage) -> list[str]:
    """Return the content type of every part and the type and extension of attachments."""
    tokens = [
        f"content-type:{content_type if _MIME_TYPE.fullmatch(content_type) else 'invalid'}"
        for content_type in message.part_types
    ]
    for attachment in message.attachments:
        content_type = attachment.content_type
        tokens.append(
            f"attachment:{content_type if _MIME_TYPE.fullmatch(content_type) else 'invalid'}"
        )
        if attachment.filename_extension is not None:
            tokens.append(f"filename:.{attachment.filename_extension}")
    return tokens


def body_tokens(
    texts: Iterable[str], limits: TokenizerLimits, found: set[str] | None = None
) -> list[str]:
    """Return the words, `url:host` and `email:domain` tokens of decoded body texts.

    Before each text the time budget is checked; once it has run out the rest is skipped and
    TIME_BUDGET noted in `found`.
    """
    tokens: list[str] = []
    chars = limits.max_token_chars
    for text in texts:
        if limits.out_of_time(found if found is not None else set()):
            break
        tokens.extend(with_pairs(core.active().text_tokens(normalize_text(text), chars), chars))
    return tokens


def with_pairs(tokens: list[str], max_token_chars: int) -> list[str]:
    """Return `tokens` followed by their word pairs (app.text.pairs)."""
    tokens.extend(core.active().pair_tokens(tokens, max_token_chars))
    return tokens


def link_tokens(links: Iterable[str], limits: TokenizerLimits) -> list[str]:
    """Return URL tokens for HTML link and image targets, `email:domain` for mailto links."""
    tokens: list[str] = []
    for link in links:
        target = normalize_text(link[:2048])
        if target.startswith(("http://", "https://", "ftp://", "//", "www.")):
            tokens.extend(url_tokens(target, limits.max_token_chars))
        elif target.startswith("mailto:"):
            match = _MAILTO_DOMAIN.match(target)
            if match:
                tokens.append(f"email:{match.group(1)[: limits.max_token_chars]}")
    return tokens


def tokenize(message: ParsedMessage, *, limits: TokenizerLimits) -> list[str]:
    """Return every token of a parsed message, headers first, in a deterministic order.

    The time budget is checked before the headers, before each text and before the links.
    """
    if limits.out_of_time(message.defects):
        return []
    tokens = core.active().header_tokens(message.headers, limits)
    tokens += part_tokens(message)
    tokens += body_tokens(message.texts, limits, message.defects)
    if limits.out_of_time(message.defects):
        return tokens
    tokens += link_tokens(message.links, limits)
    tokens += hidden_tokens(message.hidden_texts, limits, message.defects)
    return tokens


def hidden_tokens(texts: Iterable[str], limits: TokenizerLimits, found: set[str]) -> list[str]:
    """Return `hidden:word` for the words of HTML styles, scripts and comments.

    What a reader never sees is still evidence: spam hides words in comments to poison word
    counts, and its CSS differs from a mail client's. Prefixed, so that it never counts as a
    visible word.
    """
    tokens: list[str] = []
    for text in texts:
        if limits.out_of_time(found):
            break
        tokens.extend(
            map(
                "hidden:".__add__,
                core.active().word_tokens(normalize_text(text), limits.max_token_chars),
            )
        )
    return tokens


# Tokens derived from other tokens or from the message as a whole, not read from its text.
DERIVED_PREFIXES = ("pair:", "size:", "links:", "html:")


def evidence_count(token_counts: dict[str, int]) -> int:
    """Return the distinct tokens read from a message, without word pairs and shape tokens.

    What a floor on the tokens needed to train counts: pairs and shape add no evidence of
    their own to a message of too few words.
    """
    return len(token_counts) - core.active().count_prefixed(token_counts, DERIVED_PREFIXES)


def token_lines(token_counts: dict[str, int]) -> bytes:
    """Return the lines "token<TAB>count" in token order, UTF-8: what a message key hashes."""
    return core.active().token_lines(token_counts)


def count_tokens(
    tokens: Iterable[str], found: set[str], limits: TokenizerLimits
) -> TokenizedMessage:
    """Count tokens, keeping the first max_distinct_tokens distinct ones (ROBUSTNESS I29)."""
    counts = Counter(tokens)  # keeps first-emission order; counts in C
    if len(counts) > limits.max_distinct_tokens:
        found.add(defects.TRUNCATED)
        counts = Counter(dict(islice(counts.items(), limits.max_distinct_tokens)))
    return TokenizedMessage(token_counts=dict(counts), defects=tuple(sorted(found)))


def tokenize_raw(raw: str | bytes, *, limits: TokenizerLimits = DEFAULT_LIMITS) -> TokenizedMessage:
    """Tokenize a raw RFC 822 message (bytes, or a str already decoded); never raise."""
    message = parse_message(raw, limits=limits)
    tokens = tokenize(message, limits=limits)
    # Shape only beside other evidence: an empty message stays empty (and is refused for
    # training); past the deadline, nothing more.
    if tokens and defects.TIME_BUDGET not in message.defects:
        # the size of the visible text, not of the raw message: headers (spamsift's own marks,
        # relays) and encodings do not change it, and a text gets the same measure
        size = sum(map(_utf8_size, message.texts))
        tokens += shape_tokens(size, tokens, message.part_types)
    return count_tokens(tokens, message.defects, limits)


def _utf8_size(raw: str | bytes) -> int:
    if isinstance(raw, bytes):
        return len(raw)
    return len(raw) if raw.isascii() else len(raw.encode("utf-8", "surrogatepass"))


def cap_text(text: str, max_bytes: int, found: set[str]) -> str:
    """Return the longest prefix of `text` whose UTF-8 form fits in `max_bytes`."""
    if len(text) * 4 <= max_bytes:
        return text
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    found.add(defects.TRUNCATED)
    return encoded[:max_bytes].decode("utf-8", "ignore")


def tokenize_text(text: str, *, limits: TokenizerLimits = DEFAULT_LIMITS) -> TokenizedMessage:
    """Tokenize plain text (an SMS, a pasted body): body tokens only; never raise."""
    found: set[str] = set()
    text = cap_text(text, limits.max_scan_bytes, found)
    tokens = body_tokens([text], limits, found)
    if tokens and defects.TIME_BUDGET not in found:  # as in tokenize_raw
        tokens += shape_tokens(_utf8_size(text), tokens, None)
    return count_tokens(tokens, found, limits)


def text_only(raw: str | bytes) -> str:
    """Return the decoded Subject and the text of every text part (HTML without tags).

    This is the "text only" view of `spamsift evaluate --text-only`: no other header and no
    MIME structure, to be passed to `tokenize_text`.
    """
    message = parse_message(raw, limits=DEFAULT_LIMITS)
    return "\n".join([message.subject, *message.texts])
