"""Message -> token counts: the public entry points of the text room, and its one pipeline.

Tokens come from small functions, one per kind of evidence (family), as in the SpamBayes
tokenizer. The pipeline here says once, for every core, which families a message gives, in
which order, where the time budget is checked and where the caps apply; it puts the tokens
into a sink (app.text.core.TokenSink): a `TokenList` of `str` (`tokenize_raw`), or the
compiled core's HashCounter, which counts them by hash (`hash_raw`). The compiled core
provides only the loops inside a family and that counter.
Body words are emitted bare ("viagra") and every other token carries a prefix
("subject:viagra", "url:example.org"), so a model's stop-word set, which the naive Bayes
vocabulary applies to token text, can only ever drop body words.
"""

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import islice

from app.text import defects
from app.text.core import TokenCore, TokenSink
from app.text.families import ALL_FAMILIES, DERIVED_PREFIXES, Family
from app.text.hashed import HashedTokens
from app.text.limits import DEFAULT_LIMITS, TokenizerLimits
from app.text.mime import ParsedMessage, parse_message
from app.text.shape import shape_of
from app.text.words import normalize_text, url_tokens

_MIME_TYPE = re.compile(r"[a-z0-9!#$&^_.+-]{1,40}/[a-z0-9!#$&^_.+-]{1,60}")
_MAILTO_DOMAIN = re.compile(r"mailto:[^@\s]{0,64}@([a-z0-9.-]{1,255})")


@dataclass(frozen=True)
class TokenizedMessage:
    """Tokens of one message and what was wrong with it."""

    token_counts: dict[str, int]  # token -> occurrences; insertion order = first emission
    defects: tuple[str, ...]  # sorted unique codes from app.text.defects


class TokenList:
    """The string sink: a message's tokens as `str` in emission order, made by one core's
    string functions."""

    def __init__(self, token_core: TokenCore) -> None:
        self.core = token_core
        self.tokens: list[str] = []

    @property
    def emitted(self) -> int:
        return len(self.tokens)

    @property
    def url_tokens(self) -> int:
        return self.core.count_prefixed(self.tokens, "url:")  # compiled: no call per token

    def extend(self, tokens: list[str]) -> None:
        self.tokens += tokens

    def header_tokens(self, headers: Sequence[tuple[str, str]], limits: TokenizerLimits) -> None:
        self.tokens += self.core.header_tokens(headers, limits)

    def body_text(self, text: str, max_chars: int, pairs: bool) -> None:
        found = self.core.text_tokens(text, max_chars)
        self.tokens += found
        if pairs:
            self.tokens += self.core.pair_tokens(found, max_chars)

    def hidden_text(self, text: str, max_chars: int) -> None:
        self.tokens += map("hidden:".__add__, self.core.word_tokens(text, max_chars))

    def counts(self, max_distinct: int) -> tuple[dict[str, int], bool]:
        """The first `max_distinct` distinct tokens with their counts, in first-emission
        order, and whether there were more (as HashCounter.result)."""
        counts = Counter(self.tokens)  # keeps first-emission order; counts in C
        if len(counts) <= max_distinct:
            return dict(counts), False
        return dict(islice(counts.items(), max_distinct)), True


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


def evidence_count(tokens: HashedTokens, *, core: TokenCore) -> int:
    """Return the distinct tokens read from a message, without word pairs and shape tokens.

    What a floor on the tokens needed to train counts: pairs and shape add no evidence of
    their own to a message of too few words.
    """
    return len(tokens) - tokens.count_prefixed(DERIVED_PREFIXES, core=core)


def token_lines(token_counts: dict[str, int], *, core: TokenCore) -> bytes:
    """Return the lines "token<TAB>count" in token order, UTF-8: what a message key hashes."""
    return core.token_lines(token_counts)


# The pipeline: the token families, their order, the time budget and the caps, written once
# for every core and sink.


def _message_into(
    sink: TokenSink, message: ParsedMessage, limits: TokenizerLimits, families: frozenset[Family]
) -> None:
    """Put a parsed message's tokens into `sink`, family by family.

    The time budget is checked before the headers, before each text, before the links and
    before each hidden text; once it has run out the rest is skipped.
    """
    found = message.defects
    if limits.out_of_time(found):
        return
    sink.header_tokens(message.headers, limits)
    sink.extend(part_tokens(message))
    _texts_into(sink, message.texts, limits, found, families)
    if limits.out_of_time(found):
        return
    sink.extend(link_tokens(message.links, limits))
    # What a reader never sees is still evidence: spam hides words in comments to poison
    # word counts, and its CSS differs from a mail client's. Prefixed `hidden:`, so that it
    # never counts as a visible word.
    for text in message.hidden_texts:
        if limits.out_of_time(found):
            break
        sink.hidden_text(normalize_text(text), limits.max_token_chars)


def _texts_into(
    sink: TokenSink,
    texts: Iterable[str],
    limits: TokenizerLimits,
    found: set[str],
    families: frozenset[Family],
) -> None:
    """Put the words, `url:host`, `email:domain` and (if on) word pairs of body texts."""
    pairs = "word_pairs" in families
    for text in texts:
        if limits.out_of_time(found):
            break
        sink.body_text(normalize_text(text), limits.max_token_chars, pairs)


def _shape_into(
    sink: TokenSink,
    size: Callable[[], int],
    part_types: list[str] | None,
    found: set[str],
    families: frozenset[Family],
) -> None:
    """Put the shape tokens (app.text.shape) if on, only beside other evidence: an empty
    message stays empty (and is refused for training); past the deadline, nothing more."""
    if "shape_tokens" in families and sink.emitted and defects.TIME_BUDGET not in found:
        sink.extend(shape_of(size(), sink.url_tokens, part_types))


def _raw_into(
    sink: TokenSink,
    raw: str | bytes,
    limits: TokenizerLimits,
    core: TokenCore,
    families: frozenset[Family],
) -> set[str]:
    """Put a raw message's tokens into `sink`; return its defects so far."""
    message = parse_message(raw, limits=limits, core=core)
    _message_into(sink, message, limits, families)
    # The size of the visible text, not of the raw message: headers (spamsift's own marks,
    # relays) and encodings do not change it, and a text gets the same measure.
    _shape_into(
        sink,
        lambda: sum(map(_utf8_size, message.texts)),
        message.part_types,
        message.defects,
        families,
    )
    return message.defects


def _text_into(
    sink: TokenSink, text: str, limits: TokenizerLimits, families: frozenset[Family]
) -> set[str]:
    """Put a plain text's tokens (body tokens only) into `sink`; return its defects."""
    found: set[str] = set()
    text = cap_text(text, limits.max_scan_bytes, found)
    _texts_into(sink, [text], limits, found, families)
    _shape_into(sink, lambda: _utf8_size(text), None, found, families)
    return found


# Every entry point takes the core (app.text.core.TokenCore) whose loops run: the process
# root chose it. `families` are the derived families (app.text.families) to make: one that is
# off costs no time.


def tokenize_raw(
    raw: str | bytes,
    *,
    limits: TokenizerLimits = DEFAULT_LIMITS,
    core: TokenCore,
    families: frozenset[Family] = ALL_FAMILIES,
) -> TokenizedMessage:
    """Tokenize a raw RFC 822 message (bytes, or a str already decoded); never raise."""
    return _tokenized(
        partial(_raw_into, raw=raw, limits=limits, core=core, families=families), limits, core
    )


def tokenize_text(
    text: str,
    *,
    limits: TokenizerLimits = DEFAULT_LIMITS,
    core: TokenCore,
    families: frozenset[Family] = ALL_FAMILIES,
) -> TokenizedMessage:
    """Tokenize plain text (an SMS, a pasted body): body tokens only; never raise."""
    return _tokenized(
        partial(_text_into, text=text, limits=limits, families=families), limits, core
    )


def hash_raw(
    raw: str | bytes,
    *,
    limits: TokenizerLimits = DEFAULT_LIMITS,
    core: TokenCore,
    families: frozenset[Family] = ALL_FAMILIES,
) -> HashedTokens:
    """Tokenize a raw RFC 822 message into hashed tokens (app.text.hashed); never raise."""
    return _hashed(
        partial(_raw_into, raw=raw, limits=limits, core=core, families=families), limits, core
    )


def hash_text(
    text: str,
    *,
    limits: TokenizerLimits = DEFAULT_LIMITS,
    core: TokenCore,
    families: frozenset[Family] = ALL_FAMILIES,
) -> HashedTokens:
    """Tokenize plain text into hashed tokens; never raise."""
    return _hashed(partial(_text_into, text=text, limits=limits, families=families), limits, core)


def _hashed(
    into: Callable[[TokenSink], set[str]], limits: TokenizerLimits, core: TokenCore
) -> HashedTokens:
    if core.hash_counter is None:  # the reference: the string tokens, each hashed
        tokenized = _tokenized(into, limits, core)
        return HashedTokens.of(tokenized.token_counts, tokenized.defects, core=core)
    counter = core.hash_counter()
    try:
        found = into(counter)
        hashes, counts, digest, texts, utf8, offsets, truncated = counter.result(
            limits.max_distinct_tokens
        )
    finally:
        counter.release()
    return HashedTokens(
        hashes=hashes,
        counts=counts,
        digest=digest,
        defects=_defects(found, truncated),
        texts=texts,
        utf8=(utf8, offsets),
    )


def _tokenized(
    into: Callable[[TokenSink], set[str]], limits: TokenizerLimits, core: TokenCore
) -> TokenizedMessage:
    sink = TokenList(core)
    found = into(sink)
    token_counts, truncated = sink.counts(limits.max_distinct_tokens)
    return TokenizedMessage(token_counts=token_counts, defects=_defects(found, truncated))


def _defects(found: set[str], truncated: bool) -> tuple[str, ...]:
    """The cap on distinct tokens keeps the first ones in emission order; say so if it cut."""
    if truncated:
        found.add(defects.TRUNCATED)
    return tuple(sorted(found))


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


def text_only(raw: str | bytes, *, core: TokenCore) -> str:
    """Return the decoded Subject and the text of every text part (HTML without tags).

    This is the "text only" view of `spamsift evaluate --text-only`: no other header and no
    MIME structure, to be passed to `tokenize_text`.
    """
    message = parse_message(raw, limits=DEFAULT_LIMITS, core=core)
    return "\n".join([message.subject, *message.texts])
