# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled token core: the hot loops of app.text.headers and app.text.words in Cython.

Each function here gives exactly the tokens of its pure-Python twin (the reference, kept as
the fallback when this extension is not built): tests/text/test_core_parity.py proves it on
every corpus message and with Hypothesis. What it saves is the interpreter, not the work:
one typed pass over the `str` buffer instead of translate + split + filter + map, and a
prefixed token ("subject:prize") built in one step instead of a word then a concatenation.
The rare paths (URLs, e-mail domains, over-long words, RFC 2047) call the Python functions,
so there is one definition of each of them.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_1BYTE_DATA, PyUnicode_1BYTE_KIND, PyUnicode_KIND
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcmp, memcpy


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)

from app.text import defects
from app.text.headers import (
    _ADDRESS_HEADERS,
    _DENIED_WORD_HEADER_PREFIXES,
    _DENIED_WORD_HEADERS,
    _DOMAIN,
    OWN_HEADER_PREFIX,
    HeaderBlock,
    decode_header_value,
)
from app.text.pairs import _SKIPPED_WORDS
from app.text.words import _INVISIBLE, _URL, skip_token, url_tokens
from app.text.words import normalize_text as _normalize_non_ascii


cdef inline bint _ascii_alnum(Py_UCS4 c) noexcept:
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122)


cdef inline bint _alnum(Py_UCS4 c) noexcept:
    # The regular expression [^\W_] of the Python path is str.isalnum: Py_UNICODE_ISALNUM.
    if c < 128:
        return _ascii_alnum(c)
    return c.isalnum()


cdef inline bint _currency(Py_UCS4 c) noexcept:
    return c == 0x24 or c == 0xA3 or c == 0x20AC or c == 0xA5


cdef inline bint _cjk(Py_UCS4 c) noexcept:
    # The ranges of words._CJK_RUN.
    if c < 0x1100:
        return False
    return (
        c <= 0x11FF
        or 0x3040 <= c <= 0x30FF
        or 0x3130 <= c <= 0x318F
        or 0x31F0 <= c <= 0x31FF
        or 0x3400 <= c <= 0x4DBF
        or 0x4E00 <= c <= 0x9FFF
        or 0xA960 <= c <= 0xA97F
        or 0xAC00 <= c <= 0xD7FF
        or 0xF900 <= c <= 0xFAFF
        or 0x20000 <= c <= 0x3134F
    )


# One str per distinct token, not per occurrence: a (prefix, word) seen before in the same
# call (a body text, or a message's headers) is appended as the same object, found by its
# FNV-1a hash in this small open-addressing table. Saves making the string and, in the
# Counter after, hashing it again (a str caches its hash). A slot is valid only in the
# generation (one public call) that filled it; its reference is borrowed from the token list
# that call is building, which holds every token it made until it returns. Each call takes a
# new generation and compares with its own, never the global one: another thread may take
# the next while this one waits for the GIL in a Python call, and its slots then read as
# empty here.
cdef enum:
    _SLOTS = 4096  # a power of two
    _PROBES = 4


cdef struct _Slot:
    uint64_t hash
    PyObject *token
    Py_ssize_t generation


cdef _Slot _slots[_SLOTS]
cdef Py_ssize_t _generation = 0


cdef inline Py_ssize_t _new_generation() noexcept:
    global _generation
    _generation += 1
    return _generation


cdef object _one_byte_word(
    const uint8_t *data,
    str text,
    Py_ssize_t start,
    Py_ssize_t end,
    str prefix,
    Py_ssize_t generation,
):
    """prefix + text[start:end], both of one-byte kind, the object made before if any."""
    cdef uint64_t hash = 14695981039346656037ULL
    cdef Py_ssize_t i, probe, length = end - start
    cdef Py_ssize_t prefix_length = len(prefix)
    cdef const uint8_t *prefix_data = <const uint8_t *>PyUnicode_1BYTE_DATA(prefix)
    cdef const uint8_t *token_data
    cdef Py_ssize_t index
    cdef _Slot *slot
    cdef str word
    for i in range(prefix_length):
        hash = (hash ^ prefix_data[i]) * 1099511628211ULL
    for i in range(start, end):
        hash = (hash ^ data[i]) * 1099511628211ULL
    index = <Py_ssize_t>(hash & (_SLOTS - 1))
    for probe in range(_PROBES):
        slot = &_slots[(index + probe) & (_SLOTS - 1)]
        if slot.generation != generation:
            word = prefix + text[start:end] if prefix_length else text[start:end]
            slot.hash = hash
            slot.token = <PyObject *>word
            slot.generation = generation
            return word
        if slot.hash == hash and len(<str>slot.token) == prefix_length + length:
            token_data = <const uint8_t *>PyUnicode_1BYTE_DATA(<str>slot.token)
            if (
                memcmp(token_data, prefix_data, prefix_length) == 0
                and memcmp(token_data + prefix_length, data + start, length) == 0
            ):
                return <str>slot.token
    # The probed slots hold other words: make this one.
    return prefix + text[start:end] if prefix_length else text[start:end]


cdef void _words(
    str text,
    Py_ssize_t start,
    Py_ssize_t end,
    int max_chars,
    str prefix,
    list tokens,
    Py_ssize_t generation,
) except *:
    """words._words of text[start:end], each token prefixed, appended to `tokens`.

    A word is a maximal run of letters and digits with the currency sign just before it; a
    run of 4 or more ASCII digits (nothing alphanumeric either side) also gives `digits:N`,
    after the piece's words.
    """
    cdef Py_ssize_t i = start
    cdef Py_ssize_t run_start, word_start
    cdef Py_UCS4 c
    cdef bint digits_only
    cdef list numbers = None
    cdef str word
    cdef bint shared = (
        PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND
        and PyUnicode_KIND(prefix) == PyUnicode_1BYTE_KIND
    )
    cdef const uint8_t *data = <const uint8_t *>PyUnicode_1BYTE_DATA(text) if shared else NULL
    while i < end:
        c = text[i]
        if not _alnum(c):
            i += 1
            continue
        run_start = i
        word_start = i - 1 if i > start and _currency(text[i - 1]) else i
        digits_only = True
        while i < end:
            c = text[i]
            if 48 <= c <= 57:
                i += 1
            elif _alnum(c):
                digits_only = False
                i += 1
            else:
                break
        if i - word_start > max_chars:
            tokens.append(prefix + skip_token(text[word_start:i]))
        elif shared:
            tokens.append(_one_byte_word(data, text, word_start, i, prefix, generation))
        else:
            tokens.append(prefix + text[word_start:i] if prefix else text[word_start:i])
        if digits_only and i - run_start >= 4:
            if numbers is None:
                numbers = []
            numbers.append(min(i - run_start, 100))
    if numbers is not None:
        for length in numbers:
            tokens.append(f"{prefix}digits:{length}")


cdef void _word_tokens(
    str text, int max_chars, str prefix, list tokens, Py_ssize_t generation
) except *:
    """words.word_tokens: words, and overlapping bigrams of CJK runs, in order."""
    cdef Py_ssize_t length = len(text)
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t piece_start = 0
    cdef Py_ssize_t run_start, k
    if text.isascii():
        _words(text, 0, length, max_chars, prefix, tokens, generation)
        return
    while i < length:
        if not _cjk(text[i]):
            i += 1
            continue
        _words(text, piece_start, i, max_chars, prefix, tokens, generation)
        run_start = i
        while i < length and _cjk(text[i]):
            i += 1
        if i - run_start == 1:
            tokens.append(prefix + text[run_start:i])
        else:
            for k in range(run_start, i - 1):
                tokens.append(prefix + text[k : k + 2])
        piece_start = i
    _words(text, piece_start, length, max_chars, prefix, tokens, generation)


cdef inline bint _domain_character(Py_UCS4 c) noexcept:
    # [a-z0-9-]
    return (97 <= c <= 122) or (48 <= c <= 57) or c == 0x2D


cdef Py_ssize_t _label_end(str text, Py_ssize_t i, Py_ssize_t length):
    """End of `[a-z0-9-]{1,63}` from i (greedy): i if none."""
    cdef Py_ssize_t limit = min(i + 63, length)
    while i < limit and _domain_character(text[i]):
        i += 1
    return i


cdef list _email_domains(str text):
    """words.email_domains: `@([a-z0-9][a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,63}){1,8})` after an
    address character ([\w.+-]), scanned as finditer does: a match, used or not, is skipped.
    """
    cdef list domains = []
    cdef Py_ssize_t length = len(text)
    cdef Py_ssize_t at = text.find("@")
    cdef Py_ssize_t first_end, end, labels, label_end
    cdef Py_UCS4 c, before
    while 0 <= at < length:
        if at + 1 < length:
            c = text[at + 1]
        else:
            break
        # The first label starts with [a-z0-9] and runs to 63 characters; a longer run
        # cannot be followed by the dot the pattern needs, so it does not match.
        if not ((97 <= c <= 122) or (48 <= c <= 57)):
            at = text.find("@", at + 1)
            continue
        first_end = _label_end(text, at + 1, length)
        end = first_end
        labels = 0
        while labels < 8 and end + 1 < length and text[end] == "." and _domain_character(
            text[end + 1]
        ):
            label_end = _label_end(text, end + 1, length)
            end = label_end
            labels += 1
        if labels == 0:
            at = text.find("@", at + 1)
            continue
        if at > 0:
            before = text[at - 1]
            if _alnum(before) or before == 0x5F or before == 0x2E or before == 0x2B or (
                before == 0x2D
            ):
                domains.append(text[at + 1 : end])
        at = text.find("@", end)
    return domains


cdef str _normalize_text(str text):
    """words.normalize_text, its ASCII case without a Python call."""
    if not text.isascii():
        return _normalize_non_ascii(text)
    if "\x00" in text or "\x1b" in text:
        text = _INVISIBLE.sub("", text)
    return text.casefold()


def normalize_text(str text) -> str:
    """Return `text` NFKC-normalised, case-folded, without invisible characters."""
    return _normalize_text(text)


def email_domains(str text) -> list:
    """Return the domains of the e-mail addresses in `text`, in order."""
    return _email_domains(text)


cdef void _text_tokens(
    str text, int max_chars, str prefix, list tokens, Py_ssize_t generation
) except *:
    """words.text_tokens: URL tokens, `email:domain`, then words."""
    cdef list urls
    if "://" in text or "www." in text:
        urls = _URL.findall(text)
        if urls:
            text = _URL.sub(" ", text)
            for url in urls:
                for token in url_tokens(url, max_chars):
                    tokens.append(prefix + token)
    if "@" in text:
        for domain in _email_domains(text):
            tokens.append(f"{prefix}email:{domain[:max_chars]}")
    _word_tokens(text, max_chars, prefix, tokens, generation)


def word_tokens(str text, int max_token_chars) -> list:
    """Return the words and CJK bigrams of already normalised text, in order."""
    cdef list tokens = []
    _word_tokens(text, max_token_chars, "", tokens, _new_generation())
    return tokens


def text_tokens(str text, int max_token_chars) -> list:
    """Return the tokens of a normalised text: URL tokens, `email:domain`, then words."""
    cdef list tokens = []
    _text_tokens(text, max_token_chars, "", tokens, _new_generation())
    return tokens


def header_tokens(headers, limits) -> list:
    """headers.header_tokens: header tokens, each prefixed by its lower-case header name."""
    cdef int max_chars = limits.max_token_chars
    cdef set seen_names = set()
    cdef list tokens = []
    cdef Py_ssize_t generation = _new_generation()  # one for the whole header block
    cdef str name, value, normalized, display
    for name, value in headers:
        if name.startswith(OWN_HEADER_PREFIX):
            continue
        if name not in seen_names and len(name) <= max_chars:
            seen_names.add(name)
            tokens.append("header:" + name)
        if name in _ADDRESS_HEADERS:
            normalized = _normalize_text(value)
            for domain in _DOMAIN.findall(normalized):
                tokens.append(f"{name}:{domain[:max_chars]}")
            if name == "from":
                display = " ".join(
                    [p for p in normalized.partition("<")[0].split() if "@" not in p]
                )
                _word_tokens(display, max_chars, "from:word:", tokens, generation)
        elif (
            not name.startswith(_DENIED_WORD_HEADER_PREFIXES)
            and name not in _DENIED_WORD_HEADERS
            and len(name) <= max_chars
        ):
            _text_tokens(_normalize_text(value), max_chars, name + ":", tokens, generation)
    return tokens


cdef inline bint _field_name_character(Py_UCS4 c) noexcept:
    # [!-9;-~]: printable ASCII but the colon.
    return 0x21 <= c <= 0x7E and c != 0x3A


cdef Py_ssize_t _field_name_end(str text, Py_ssize_t start, Py_ssize_t end):
    """Where headers._FIELD_NAME's group ends in text[start:end] (-1: no match).

    `[!-9;-~]{1,200}[ \\t]*:`: a name character is neither blank nor colon, so the name
    is the whole run of them; longer than 200 it cannot be followed by blanks or a colon.
    """
    cdef Py_ssize_t i = start
    while i < end and _field_name_character(text[i]):
        i += 1
    if i == start or i - start > 200:
        return -1
    return i


cdef Py_ssize_t _after_colon(str text, Py_ssize_t i, Py_ssize_t end):
    """Skip `[ \\t]*` from i and return the index after the colon there (-1: none)."""
    cdef Py_UCS4 c
    while i < end:
        c = text[i]
        if c == 0x3A:
            return i + 1
        if c != 0x20 and c != 0x09:
            return -1
        i += 1
    return -1


cdef bint _first_field_name(str text):
    """headers._FIRST_FIELD_NAME.match(text): `[A-Za-z][A-Za-z0-9_.-]{0,199}[ \\t]*:`."""
    cdef Py_ssize_t length = len(text)
    cdef Py_ssize_t i = 1
    cdef Py_UCS4 c
    if length == 0:
        return False
    c = text[0]
    if not ((65 <= c <= 90) or (97 <= c <= 122)):
        return False
    while i < length:
        c = text[i]
        if _ascii_alnum(c) or c == 0x5F or c == 0x2E or c == 0x2D:
            i += 1
        else:
            break
    if i > 200:
        return False
    return _after_colon(text, i, length) >= 0


def split_header_block(str text, limits):
    """headers.split_header_block: header fields (unfolded, capped) and the body after them."""
    if not _first_field_name(text):
        return HeaderBlock(fields=[], body=text)
    cdef Py_ssize_t end = text.find("\n\n")
    cdef str block, body
    if end < 0:
        block, body = text, ""
    else:
        block, body = text[:end], text[end + 2 :]
    cdef set found = set()
    cdef list fields = []
    cdef str name = ""
    cdef list pieces = []
    cdef Py_ssize_t size = 0
    cdef Py_ssize_t max_value = limits.max_header_value_bytes
    cdef Py_ssize_t max_fields = limits.max_header_fields
    cdef Py_ssize_t block_length = len(block)
    cdef Py_ssize_t position = 0
    cdef Py_ssize_t line_end, name_end, value_start
    cdef Py_UCS4 first
    cdef str line, rest
    while True:
        line_end = block.find("\n", position)
        if line_end < 0:
            line_end = block_length
        first = block[position] if position < line_end else 0
        if first == 0x20 or first == 0x09:
            if name and size < max_value:
                line = block[position:line_end]
                pieces.append(line)
                size += line_end - position
            elif name:
                found.add(defects.TRUNCATED)
        else:
            name_end = _field_name_end(block, position, line_end)
            value_start = _after_colon(block, name_end, line_end) if name_end >= 0 else -1
            if value_start < 0:
                found.add(defects.HEADER_PARSE_ERROR)
                rest = block[position:]
                body = rest + "\n\n" + body if end >= 0 else rest
                break
            if name:
                fields.append(_finish_field(name, pieces, max_value, found))
            if len(fields) >= max_fields:
                found.add(defects.TRUNCATED)
                name = ""
                break
            name = block[position:name_end].lower()
            line = block[value_start:line_end].lstrip(" \t")
            pieces = [line]
            size = len(line)
        if line_end >= block_length:
            break
        position = line_end + 1
    if name:
        fields.append(_finish_field(name, pieces, max_value, found))
    return HeaderBlock(fields=fields, body=body, defects=found)


cdef tuple _finish_field(str name, list pieces, Py_ssize_t max_value, set found):
    cdef str value = "".join(pieces)
    if len(value) > max_value:
        found.add(defects.TRUNCATED)
        value = value[:max_value]
    return name, value.strip()


def decode_header_values(fields, charset, set found) -> list:
    """headers.decode_header_values: an ASCII value without "=?" is kept as it is."""
    cdef list decoded = []
    cdef str name, value
    for name, value in fields:
        if value.isascii() and "=?" not in value:
            decoded.append((name, value))
        else:
            decoded.append((name, decode_header_value(value, charset, found)))
    return decoded


def content_fields(fields) -> tuple:
    """headers.content_fields: first Content-Type and -Disposition, last -Transfer-Encoding."""
    cdef object content_type = None
    cdef object disposition = None
    cdef str transfer_encoding = "7bit"
    cdef str name, value
    for name, value in fields:
        if name.startswith("content-"):
            if name == "content-type":
                if content_type is None:
                    content_type = value
            elif name == "content-disposition":
                if disposition is None:
                    disposition = value
            elif name == "content-transfer-encoding":
                transfer_encoding = value.strip().lower()
    return content_type, disposition, transfer_encoding


cdef frozenset _skipped_words = _SKIPPED_WORDS


def pair_tokens(list tokens, int max_token_chars) -> list:
    """pairs.pair_tokens: `pair:a b` for each two adjacent content words, in order, in one
    pass (the reference filters the words into a list first)."""
    cdef list pairs = []
    cdef str previous = None
    cdef str word
    for word in tokens:
        if word in _skipped_words or ":" in word:
            continue
        if previous is not None:
            if len(previous) + len(word) < max_token_chars:
                pairs.append(f"pair:{previous} {word}")
            else:
                pairs.append(f"pair:{(previous + ' ' + word)[:max_token_chars]}")
        previous = word
    return pairs


# What is read off the finished tokens (app.text.counts): a loop over the strings' own bytes
# instead of a Python call per token.


def count_prefixed(tokens, prefixes) -> int:
    """counts.count_prefixed: how many of `tokens` start with `prefixes` (one, or a tuple)."""
    cdef tuple wanted = (prefixes,) if isinstance(prefixes, str) else tuple(prefixes)
    cdef Py_ssize_t count = 0
    cdef Py_ssize_t length, prefix_length
    cdef const uint8_t *data
    cdef str prefix
    cdef bint one_byte_prefixes = True
    for prefix in wanted:
        one_byte_prefixes = one_byte_prefixes and PyUnicode_KIND(prefix) == PyUnicode_1BYTE_KIND
    for token in tokens:
        if not (one_byte_prefixes and type(token) is str):
            count += token.startswith(wanted)
        elif PyUnicode_KIND(token) != PyUnicode_1BYTE_KIND:
            # Wider characters: a one-byte prefix cannot be compared byte by byte.
            count += (<str>token).startswith(wanted)
        else:
            data = <const uint8_t *>PyUnicode_1BYTE_DATA(token)
            length = len(<str>token)
            for prefix in wanted:
                prefix_length = len(prefix)
                if prefix_length <= length and memcmp(
                    data, PyUnicode_1BYTE_DATA(prefix), prefix_length
                ) == 0:
                    count += 1
                    break
    return count


cdef struct _Buffer:
    char *data
    Py_ssize_t size
    Py_ssize_t capacity


cdef int _append(_Buffer *buffer, const char *data, Py_ssize_t length) except -1:
    cdef Py_ssize_t capacity
    cdef char *grown
    if buffer.size + length > buffer.capacity:
        capacity = max(buffer.size + length, 2 * buffer.capacity, 4096)
        grown = <char *>PyMem_Realloc(buffer.data, capacity)
        if grown == NULL:
            raise MemoryError()
        buffer.data = grown
        buffer.capacity = capacity
    memcpy(buffer.data + buffer.size, data, length)
    buffer.size += length
    return 0


cdef int _append_decimal(_Buffer *buffer, long long value) except -1:
    """The digits of `value` as str(value) writes them."""
    cdef char digits[24]
    cdef int start = 24
    cdef unsigned long long rest = (
        <unsigned long long>(-(value + 1)) + 1 if value < 0 else <unsigned long long>value
    )
    while True:
        start -= 1
        digits[start] = <char>(48 + rest % 10)
        rest //= 10
        if rest == 0:
            break
    if value < 0:
        start -= 1
        digits[start] = 45  # "-"
    return _append(buffer, digits + start, 24 - start)


cdef int _append_text(_Buffer *buffer, object value) except -1:
    """f"{value}" in strict UTF-8: an ASCII str is copied as it is."""
    cdef bytes encoded
    if type(value) is str and PyUnicode_IS_ASCII(value):
        return _append(buffer, <const char *>PyUnicode_1BYTE_DATA(value), len(<str>value))
    encoded = f"{value}".encode()
    return _append(buffer, encoded, len(encoded))


def token_lines(dict token_counts) -> bytes:
    """counts.token_lines: the lines "token<TAB>count" in token order, UTF-8, in one buffer
    (the Python reference makes a str per line, then joins and encodes them)."""
    cdef list tokens = sorted(token_counts)
    cdef _Buffer buffer
    cdef long long value
    cdef int overflow
    buffer.data = NULL
    buffer.size = 0
    buffer.capacity = 0
    try:
        for token in tokens:
            count = token_counts[token]
            _append_text(&buffer, token)
            _append(&buffer, "\t", 1)
            overflow = 1
            if type(count) is int:
                value = PyLong_AsLongLongAndOverflow(count, &overflow)
            if overflow:
                _append_text(&buffer, count)
            else:
                _append_decimal(&buffer, value)
            _append(&buffer, "\n", 1)
        return PyBytes_FromStringAndSize(buffer.data, buffer.size)
    finally:
        PyMem_Free(buffer.data)
