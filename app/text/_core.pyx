# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled token core: the hot loops of app.text.headers, words, pairs and counts in
Cython, and the HashCounter the tokenizer pipeline (app.text.tokenize) counts into by hash.

Each function here gives exactly the tokens of its pure-Python twin (the reference, kept as
the fallback when this extension is not built): tests/text/test_core_parity.py and
tests/text/test_hash_parity.py prove it on every corpus message and with Hypothesis. What it
saves is the interpreter, not the work: one typed pass over the `str` buffer instead of
translate + split + filter + map, and a prefixed token ("subject:prize") built in one step
instead of a word then a concatenation. The rare paths (URLs, e-mail domains, over-long
words, RFC 2047, MIME) call the Python functions, so there is one definition of each; so
does the order of the families, the time budget and the caps (the pipeline, in Python).

The token loops write into a sink: a list of `str` for the string functions (`text_tokens`,
`header_tokens`, ...), or a `HashCounter`, which counts each distinct token by its 64-bit hash
in a C table and makes no `str` per word of an ASCII text.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.unicode cimport (
    PyUnicode_1BYTE_DATA,
    PyUnicode_1BYTE_KIND,
    PyUnicode_DecodeUTF8,
    PyUnicode_KIND,
)
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)
    Py_UCS4 PyUnicode_READ_CHAR(object text, Py_ssize_t index)
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL

# hash(bytes) from a buffer: private as _Py_HashBytes up to CPython 3.13, public from 3.14.
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030E0000
    #define spamsift_hash_bytes(data, length) Py_HashBuffer((data), (length))
    #else
    #define spamsift_hash_bytes(data, length) _Py_HashBytes((data), (length))
    #endif
    """
    Py_hash_t spamsift_hash_bytes(const void *data, Py_ssize_t length)

import hashlib
import threading
from functools import partial

import numpy as np

from app.text import defects
from app.text.headers import (
    ADDRESS_DOMAIN,
    ADDRESS_HEADERS,
    DENIED_WORD_HEADER_PREFIXES,
    DENIED_WORD_HEADERS,
    OWN_HEADER_PREFIX,
    HeaderBlock,
    decode_header_value,
)
from app.text.pairs import SKIPPED_WORDS
from app.text.words import cut_urls, skip_token, url_tokens
from app.text.words import normalize_text as _normalize_python

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

# Where the token loops put what they find, so that the rules of what a token is are written
# once for both paths: a `_TokenList` (the string functions) or a `HashCounter`.
cdef class _Sink:
    cdef int word(self, str text, Py_ssize_t start, Py_ssize_t end, str prefix) except -1:
        """A word or CJK token: prefix + text[start:end]."""
        raise NotImplementedError

    cdef int token(self, str token) except -1:
        """A token made whole in Python (URL, e-mail, domain, header name, `skip:`)."""
        raise NotImplementedError

    cdef int digits(self, str prefix, Py_ssize_t length) except -1:
        """prefix + `digits:length`."""
        raise NotImplementedError


cdef class _TokenList(_Sink):
    """Tokens as `str` in a list, a word met before in the same call as the same object."""

    cdef list tokens
    cdef Py_ssize_t generation

    def __cinit__(self):
        self.tokens = []
        self.generation = _new_generation()

    cdef int word(self, str text, Py_ssize_t start, Py_ssize_t end, str prefix) except -1:
        if (
            PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND
            and PyUnicode_KIND(prefix) == PyUnicode_1BYTE_KIND
        ):
            self.tokens.append(
                _one_byte_word(
                    <const uint8_t *>PyUnicode_1BYTE_DATA(text),
                    text,
                    start,
                    end,
                    prefix,
                    self.generation,
                )
            )
        else:
            self.tokens.append(prefix + text[start:end] if prefix else text[start:end])
        return 0

    cdef int token(self, str token) except -1:
        self.tokens.append(token)
        return 0

    cdef int digits(self, str prefix, Py_ssize_t length) except -1:
        self.tokens.append(f"{prefix}digits:{length}")
        return 0


cdef int _words(
    str text, Py_ssize_t start, Py_ssize_t end, int max_chars, str prefix, _Sink sink
) except -1:
    """words._words of text[start:end], each token prefixed, into `sink`.

    A word is a maximal run of letters and digits with the currency sign just before it; a
    run of 4 or more ASCII digits (nothing alphanumeric either side) also gives `digits:N`,
    after the piece's words.
    """
    cdef Py_ssize_t i = start
    cdef Py_ssize_t run_start, word_start, length
    cdef Py_UCS4 c
    cdef bint digits_only
    cdef list numbers = None
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
            sink.token(prefix + skip_token(text[word_start:i]))
        else:
            sink.word(text, word_start, i, prefix)
        if digits_only and i - run_start >= 4:
            if numbers is None:
                numbers = []
            numbers.append(min(i - run_start, 100))
    if numbers is not None:
        for length in numbers:
            sink.digits(prefix, length)
    return 0


cdef int _word_tokens(str text, int max_chars, str prefix, _Sink sink) except -1:
    """words.word_tokens: words, and overlapping bigrams of CJK runs, in order."""
    cdef Py_ssize_t length = len(text)
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t piece_start = 0
    cdef Py_ssize_t run_start, k
    if text.isascii():
        return _words(text, 0, length, max_chars, prefix, sink)
    while i < length:
        if not _cjk(text[i]):
            i += 1
            continue
        _words(text, piece_start, i, max_chars, prefix, sink)
        run_start = i
        while i < length and _cjk(text[i]):
            i += 1
        if i - run_start == 1:
            sink.word(text, run_start, i, prefix)
        else:
            for k in range(run_start, i - 1):
                sink.word(text, k, k + 2, prefix)
        piece_start = i
    return _words(text, piece_start, length, max_chars, prefix, sink)




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
    """words.normalize_text, its common case (ASCII, no control character to remove) without
    a Python call."""
    if not text.isascii() or "\x00" in text or "\x1b" in text:
        return _normalize_python(text)
    return text.casefold()


def normalize_text(str text) -> str:
    """Return `text` NFKC-normalised, case-folded, without invisible characters."""
    return _normalize_text(text)


def email_domains(str text) -> list:
    """Return the domains of the e-mail addresses in `text`, in order."""
    return _email_domains(text)


cdef int _text_tokens(str text, int max_chars, str prefix, _Sink sink) except -1:
    """words.text_tokens: URL tokens, `email:domain`, then words."""
    cdef list urls
    if "://" in text or "www." in text:
        text, urls = cut_urls(text)
        for url in urls:
            for token in url_tokens(url, max_chars):
                sink.token(prefix + token)
    if "@" in text:
        for domain in _email_domains(text):
            sink.token(f"{prefix}email:{domain[:max_chars]}")
    return _word_tokens(text, max_chars, prefix, sink)


def word_tokens(str text, int max_token_chars) -> list:
    """Return the words and CJK bigrams of already normalised text, in order."""
    cdef _TokenList tokens = _TokenList()
    _word_tokens(text, max_token_chars, "", tokens)
    return tokens.tokens


def text_tokens(str text, int max_token_chars) -> list:
    """Return the tokens of a normalised text: URL tokens, `email:domain`, then words."""
    cdef _TokenList tokens = _TokenList()
    _text_tokens(text, max_token_chars, "", tokens)
    return tokens.tokens


def header_tokens(headers, limits) -> list:
    """headers.header_tokens: header tokens, each prefixed by its lower-case header name."""
    cdef _TokenList tokens = _TokenList()  # one generation for the whole header block
    _header_tokens(headers, limits.max_token_chars, tokens)
    return tokens.tokens


cdef int _header_tokens(headers, int max_chars, _Sink sink) except -1:
    cdef set seen_names = set()
    cdef str name, value, normalized, display
    for name, value in headers:
        if name.startswith(OWN_HEADER_PREFIX):
            continue
        if name not in seen_names and len(name) <= max_chars:
            seen_names.add(name)
            sink.token("header:" + name)
        if name in ADDRESS_HEADERS:
            normalized = _normalize_text(value)
            for domain in ADDRESS_DOMAIN.findall(normalized):
                sink.token(f"{name}:{domain[:max_chars]}")
            if name == "from":
                display = " ".join(
                    [p for p in normalized.partition("<")[0].split() if "@" not in p]
                )
                _word_tokens(display, max_chars, "from:word:", sink)
        elif (
            not name.startswith(DENIED_WORD_HEADER_PREFIXES)
            and name not in DENIED_WORD_HEADERS
            and len(name) <= max_chars
        ):
            _text_tokens(_normalize_text(value), max_chars, name + ":", sink)
    return 0




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


cdef frozenset _skipped_words = SKIPPED_WORDS


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



def count_prefixed_utf8(bytes utf8, offsets, prefixes) -> int:
    """counts.count_prefixed_utf8: how many of the tokens in `utf8` (token i from
    `offsets[i]` to `offsets[i + 1]`) start with `prefixes` (one, or a tuple)."""
    cdef tuple wanted = tuple(
        prefix.encode("utf-8", "surrogatepass")
        for prefix in ((prefixes,) if isinstance(prefixes, str) else prefixes)
    )
    cdef const int64_t[::1] bounds = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef const uint8_t *data = <const uint8_t *>PyBytes_AS_STRING(utf8)
    cdef Py_ssize_t n = bounds.shape[0] - 1, i, count = 0, length, size
    cdef bytes prefix
    if n >= 0 and (bounds[0] < 0 or bounds[n] > len(utf8)):
        raise ValueError("offsets must ascend within the UTF-8")
    for i in range(n):
        length = bounds[i + 1] - bounds[i]
        if length < 0:
            raise ValueError("offsets must ascend within the UTF-8")
        for prefix in wanted:
            size = len(prefix)
            if size <= length and memcmp(data + bounds[i], PyBytes_AS_STRING(prefix), size) == 0:
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


# The hash path (app.text.hashed): a message's tokens counted by hash, in C.

cdef struct _Entry:
    int64_t hash  # token_hash: CPython's hash of the token's UTF-8 bytes
    Py_ssize_t offset  # of those bytes in the arena, which holds them in first-emission order
    Py_ssize_t length
    int64_t count


cdef struct _Line:
    # A distinct token as the digest sorts it; `key` is its first 8 bytes, big-endian,
    # zero-padded, which decide most comparisons without reading the bytes.
    const uint8_t *data
    Py_ssize_t length
    int64_t count
    uint64_t key


cdef inline bint _before(const _Line *x, const _Line *y) noexcept nogil:
    """Whether x's bytes sort before y's (memcmp order, a prefix first)."""
    cdef Py_ssize_t shorter
    cdef int order
    if x.key != y.key:
        # No token holds a NUL byte, so the zero padding sorts a prefix first, as memcmp
        # and then the length do.
        return x.key < y.key
    shorter = x.length if x.length < y.length else y.length
    order = memcmp(x.data, y.data, shorter)
    if order:
        return order < 0
    return x.length < y.length


# The digest sorts a message's distinct tokens (about 470 of a mail): an introsort with the
# comparison inlined, 3 to 4 times faster than libc's qsort calling one through a pointer.
# Its depth limit hands a range to heapsort, so a sender who orders tokens to defeat the
# pivots still gets n log n.
cdef void _sort_lines(_Line *lines, Py_ssize_t low, Py_ssize_t high, int depth) noexcept nogil:
    """Sort lines[low:high + 1]."""
    cdef Py_ssize_t i, j
    cdef _Line pivot, moved
    while high - low >= 16:
        if depth == 0:
            _heap_sort_lines(lines + low, high - low + 1)
            return
        depth -= 1
        pivot = lines[low + (high - low) // 2]
        i = low - 1
        j = high + 1
        while True:  # Hoare's partition: [low, j] then [j + 1, high], neither empty
            i += 1
            while _before(&lines[i], &pivot):
                i += 1
            j -= 1
            while _before(&pivot, &lines[j]):
                j -= 1
            if i >= j:
                break
            moved = lines[i]
            lines[i] = lines[j]
            lines[j] = moved
        if j - low < high - j:  # recurse into the smaller side: depth log n at most
            _sort_lines(lines, low, j, depth)
            low = j + 1
        else:
            _sort_lines(lines, j + 1, high, depth)
            high = j
    for i in range(low + 1, high + 1):
        moved = lines[i]
        j = i - 1
        while j >= low and _before(&moved, &lines[j]):
            lines[j + 1] = lines[j]
            j -= 1
        lines[j + 1] = moved


cdef void _heap_sort_lines(_Line *lines, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t start, end
    cdef _Line moved
    for start in range(n // 2 - 1, -1, -1):
        _sift_down(lines, start, n)
    for end in range(n - 1, 0, -1):
        moved = lines[0]
        lines[0] = lines[end]
        lines[end] = moved
        _sift_down(lines, 0, end)


cdef void _sift_down(_Line *lines, Py_ssize_t root, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t child
    cdef _Line moved
    while True:
        child = 2 * root + 1
        if child >= n:
            return
        if child + 1 < n and _before(&lines[child], &lines[child + 1]):
            child += 1
        if not _before(&lines[root], &lines[child]):
            return
        moved = lines[root]
        lines[root] = lines[child]
        lines[child] = moved
        root = child


cdef inline int _sort_depth(Py_ssize_t n) noexcept:
    cdef int depth = 0
    while n > 1:
        n >>= 1
        depth += 2
    return depth


def sorted_utf8(list tokens, int depth=-1) -> list:
    """The UTF-8 bytes of `tokens` in the digest's order, by the digest's sort; `depth` 0
    sorts by heapsort alone (a test of that path), -1 as the digest does."""
    cdef Py_ssize_t n = len(tokens), i
    cdef list encoded = [token.encode() for token in tokens]
    cdef _Line *lines = <_Line *>_resized(NULL, n * sizeof(_Line) + 1)
    cdef bytes text
    try:
        for i in range(n):
            text = encoded[i]
            _set_line(&lines[i], <const uint8_t *>(<char *>text), len(text), 1)
        _sort_lines(lines, 0, n - 1, _sort_depth(n) if depth < 0 else depth)
        return [PyBytes_FromStringAndSize(<char *>lines[i].data, lines[i].length) for i in range(n)]
    finally:
        PyMem_Free(lines)


cdef inline void _set_line(
    _Line *line, const uint8_t *data, Py_ssize_t length, int64_t count
) noexcept:
    cdef Py_ssize_t b
    cdef uint64_t key = 0
    line.data = data
    line.length = length
    line.count = count
    for b in range(8):
        key <<= 8
        if b < length:
            key |= data[b]
    line.key = key


cdef void *_resized(void *block, Py_ssize_t size) except NULL:
    """PyMem_Realloc that raises MemoryError and leaves `block` to its owner on failure."""
    cdef void *grown = PyMem_Realloc(block, size)
    if grown == NULL:
        raise MemoryError()
    return grown


cdef inline Py_ssize_t _code_points(const uint8_t *data, Py_ssize_t length) noexcept:
    """The characters of UTF-8 bytes: every byte but continuation bytes starts one."""
    cdef Py_ssize_t i, n = 0
    for i in range(length):
        n += (data[i] & 0xC0) != 0x80
    return n


cdef inline Py_ssize_t _first_code_points(
    const uint8_t *data, Py_ssize_t length, Py_ssize_t wanted
) noexcept:
    """How many bytes of UTF-8 `data` its first `wanted` characters take."""
    cdef Py_ssize_t i = 0
    while i < length:
        if (data[i] & 0xC0) != 0x80:
            if wanted == 0:
                return i
            wanted -= 1
        i += 1
    return length


cdef Py_ssize_t _encode_utf8(str text, Py_ssize_t start, Py_ssize_t end, uint8_t *out):
    """text[start:end] as UTF-8 into `out` (4 bytes a character at most); its length."""
    cdef Py_ssize_t i, n = 0
    cdef uint32_t c  # an integer: Cython makes a Py_UCS4 into a str in some expressions
    for i in range(start, end):
        c = PyUnicode_READ_CHAR(text, i)
        if c < 0x80:
            out[n] = <uint8_t>c
            n += 1
        elif c < 0x800:
            out[n] = <uint8_t>(0xC0 | (c >> 6))
            out[n + 1] = <uint8_t>(0x80 | (c & 0x3F))
            n += 2
        elif c < 0x10000:
            out[n] = <uint8_t>(0xE0 | (c >> 12))
            out[n + 1] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
            out[n + 2] = <uint8_t>(0x80 | (c & 0x3F))
            n += 3
        else:
            out[n] = <uint8_t>(0xF0 | (c >> 18))
            out[n + 1] = <uint8_t>(0x80 | ((c >> 12) & 0x3F))
            out[n + 2] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
            out[n + 3] = <uint8_t>(0x80 | (c & 0x3F))
            n += 4
    return n


cdef inline Py_ssize_t _decimal_length(int64_t value) noexcept:
    cdef Py_ssize_t n = 1
    while value >= 10:
        value //= 10
        n += 1
    return n


cdef class HashCounter(_Sink):
    """The distinct tokens of one message: hash, count and UTF-8 bytes, in first-emission
    order, in an open-addressing table. One per thread, reused message after message: its
    buffers grow to the largest message seen and stay."""

    cdef uint8_t *arena  # the distinct tokens' bytes, back to back, in first-emission order
    cdef Py_ssize_t arena_size, arena_capacity
    cdef _Entry *entries
    cdef Py_ssize_t n_entries, entries_capacity
    cdef int *slots  # entry index or -1, by hash
    cdef Py_ssize_t mask
    cdef uint8_t *scratch  # a token being put together (prefix + word, a pair)
    cdef Py_ssize_t scratch_capacity
    # The entries of the current body text's words that take part in word pairs, in order.
    cdef Py_ssize_t *pair_words
    cdef Py_ssize_t n_pair_words, pair_capacity
    cdef readonly Py_ssize_t emitted  # tokens counted, repeats included
    cdef readonly Py_ssize_t url_tokens  # of them, those starting with "url:"
    cdef bint pairing  # a body text: its words are recorded for pairs
    cdef bint busy

    def __cinit__(self):
        self.arena_capacity = 1 << 16
        self.arena = <uint8_t *>_resized(NULL, self.arena_capacity)
        self.entries_capacity = 1 << 12
        self.entries = <_Entry *>_resized(NULL, self.entries_capacity * sizeof(_Entry))
        self.mask = (1 << 13) - 1
        self.slots = <int *>_resized(NULL, (self.mask + 1) * sizeof(int))
        memset(self.slots, 0xFF, (self.mask + 1) * sizeof(int))
        self.scratch_capacity = 1 << 10
        self.scratch = <uint8_t *>_resized(NULL, self.scratch_capacity)
        self.pair_capacity = 1 << 12
        self.pair_words = <Py_ssize_t *>_resized(NULL, self.pair_capacity * sizeof(Py_ssize_t))

    def __dealloc__(self):
        PyMem_Free(self.arena)
        PyMem_Free(self.entries)
        PyMem_Free(self.slots)
        PyMem_Free(self.scratch)
        PyMem_Free(self.pair_words)

    cdef void reset(self) noexcept:
        cdef Py_ssize_t i, slot
        if 8 * self.n_entries < self.mask:
            # Clear only the slots in use: a table grown by one big message stays cheap.
            for i in range(self.n_entries):
                slot = <Py_ssize_t>(<uint64_t>self.entries[i].hash & <uint64_t>self.mask)
                while self.slots[slot] != i:
                    slot = (slot + 1) & self.mask
                self.slots[slot] = -1
        else:
            memset(self.slots, 0xFF, (self.mask + 1) * sizeof(int))
        self.arena_size = 0
        self.n_entries = 0
        self.n_pair_words = 0
        self.emitted = 0
        self.url_tokens = 0
        self.pairing = False

    cdef int _reserve_scratch(self, Py_ssize_t size) except -1:
        if size > self.scratch_capacity:
            self.scratch = <uint8_t *>_resized(self.scratch, size)
            self.scratch_capacity = size
        return 0

    cdef int _grow_slots(self) except -1:
        cdef Py_ssize_t size = 2 * (self.mask + 1), i, slot
        self.slots = <int *>_resized(self.slots, size * sizeof(int))
        self.mask = size - 1
        memset(self.slots, 0xFF, size * sizeof(int))
        for i in range(self.n_entries):
            slot = <Py_ssize_t>(<uint64_t>self.entries[i].hash & <uint64_t>self.mask)
            while self.slots[slot] >= 0:
                slot = (slot + 1) & self.mask
            self.slots[slot] = <int>i
        return 0

    cdef Py_ssize_t add(self, const uint8_t *data, Py_ssize_t length) except -1:
        """Count one token given as UTF-8 bytes; return its entry."""
        cdef int64_t hash = spamsift_hash_bytes(data, length)
        cdef Py_ssize_t slot = <Py_ssize_t>(<uint64_t>hash & <uint64_t>self.mask)
        cdef Py_ssize_t capacity
        cdef int index
        cdef _Entry *entry
        self.emitted += 1
        while True:
            index = self.slots[slot]
            if index < 0:
                break
            entry = &self.entries[index]
            # Texts with equal hashes stay two tokens: the digest and the texts need both.
            if (
                entry.hash == hash
                and entry.length == length
                and memcmp(self.arena + entry.offset, data, length) == 0
            ):
                entry.count += 1
                return index
            slot = (slot + 1) & self.mask
        if self.arena_size + length > self.arena_capacity:
            capacity = max(2 * self.arena_capacity, self.arena_size + length)
            self.arena = <uint8_t *>_resized(self.arena, capacity)
            self.arena_capacity = capacity
        if self.n_entries == self.entries_capacity:
            self.entries = <_Entry *>_resized(
                self.entries, 2 * self.entries_capacity * sizeof(_Entry)
            )
            self.entries_capacity *= 2
        memcpy(self.arena + self.arena_size, data, length)
        entry = &self.entries[self.n_entries]
        entry.hash = hash
        entry.offset = self.arena_size
        entry.length = length
        entry.count = 1
        self.arena_size += length
        self.slots[slot] = <int>self.n_entries
        self.n_entries += 1
        if 2 * self.n_entries > self.mask:
            self._grow_slots()
        return self.n_entries - 1

    cdef int word(self, str text, Py_ssize_t start, Py_ssize_t end, str prefix) except -1:
        cdef Py_ssize_t prefix_length, length, index
        cdef const char *prefix_data = PyUnicode_AsUTF8AndSize(prefix, &prefix_length)
        cdef _Entry *entry
        if PyUnicode_IS_ASCII(text):
            length = end - start
            if prefix_length == 0:
                index = self.add(<const uint8_t *>PyUnicode_1BYTE_DATA(text) + start, length)
            else:
                self._reserve_scratch(prefix_length + length)
                memcpy(self.scratch, prefix_data, prefix_length)
                memcpy(
                    self.scratch + prefix_length, PyUnicode_1BYTE_DATA(text) + start, length
                )
                index = self.add(self.scratch, prefix_length + length)
        else:
            self._reserve_scratch(prefix_length + 4 * (end - start))
            memcpy(self.scratch, prefix_data, prefix_length)
            length = _encode_utf8(text, start, end, self.scratch + prefix_length)
            index = self.add(self.scratch, prefix_length + length)
        if self.pairing and prefix_length == 0:
            entry = &self.entries[index]
            if not _is_skipped_word(self.arena + entry.offset, entry.length):
                if self.n_pair_words == self.pair_capacity:
                    self.pair_words = <Py_ssize_t *>_resized(
                        self.pair_words, 2 * self.pair_capacity * sizeof(Py_ssize_t)
                    )
                    self.pair_capacity *= 2
                self.pair_words[self.n_pair_words] = index
                self.n_pair_words += 1
        return 0

    cdef int token(self, str token) except -1:
        cdef Py_ssize_t size
        cdef const char *data = PyUnicode_AsUTF8AndSize(token, &size)
        if size >= 4 and memcmp(data, b"url:", 4) == 0:
            self.url_tokens += 1
        self.add(<const uint8_t *>data, size)
        return 0

    # What the pipeline (app.text.tokenize) calls, as on its string sink.

    def extend(self, list tokens):
        """Count tokens made whole in Python (part, link and shape tokens)."""
        cdef str token
        for token in tokens:
            self.token(token)

    def header_tokens(self, headers, limits):
        """Count headers.header_tokens."""
        _header_tokens(headers, limits.max_token_chars, self)

    def body_text(self, str text, int max_chars, bint pairs):
        """Count a normalised body text's words.text_tokens, then its word pairs if `pairs`."""
        self.pairing = pairs
        try:
            _text_tokens(text, max_chars, "", self)
        finally:
            self.pairing = False
        if pairs:
            self.pairs(max_chars)

    def hidden_text(self, str text, int max_chars):
        """Count a normalised hidden text's words, prefixed `hidden:`."""
        _word_tokens(text, max_chars, "hidden:", self)

    def release(self):
        """Done with this message: the thread's next one may reuse the counter."""
        _release(self)

    cdef int digits(self, str prefix, Py_ssize_t length) except -1:
        cdef Py_ssize_t prefix_length, size, k
        cdef const char *prefix_data = PyUnicode_AsUTF8AndSize(prefix, &prefix_length)
        cdef Py_ssize_t digits = _decimal_length(length)
        size = prefix_length + 7 + digits
        self._reserve_scratch(size)
        memcpy(self.scratch, prefix_data, prefix_length)
        memcpy(self.scratch + prefix_length, b"digits:", 7)
        for k in range(digits):
            self.scratch[size - 1 - k] = <uint8_t>(48 + length % 10)
            length //= 10
        self.add(self.scratch, size)
        return 0

    cdef int pairs(self, Py_ssize_t max_chars) except -1:
        """pairs.pair_tokens of the words recorded since the last call: `pair:a b`, cut to
        `max_chars` characters after the prefix."""
        cdef Py_ssize_t k, first_offset, first_length, second_offset, second_length, size
        for k in range(self.n_pair_words - 1):
            # Read the entries anew each time: `add` may move them and the arena.
            first_offset = self.entries[self.pair_words[k]].offset
            first_length = self.entries[self.pair_words[k]].length
            second_offset = self.entries[self.pair_words[k + 1]].offset
            second_length = self.entries[self.pair_words[k + 1]].length
            size = first_length + 1 + second_length
            self._reserve_scratch(5 + size)
            memcpy(self.scratch, b"pair:", 5)
            memcpy(self.scratch + 5, self.arena + first_offset, first_length)
            self.scratch[5 + first_length] = 32
            memcpy(self.scratch + 6 + first_length, self.arena + second_offset, second_length)
            if (
                _code_points(self.arena + first_offset, first_length)
                + _code_points(self.arena + second_offset, second_length)
                >= max_chars
            ):
                size = _first_code_points(self.scratch + 5, size, max_chars)
            self.add(self.scratch, 5 + size)
        self.n_pair_words = 0
        return 0

    def result(self, Py_ssize_t max_distinct):
        """(hashes, counts, digest, texts, utf8, offsets, truncated) of the first
        `max_distinct` distinct tokens: `texts` a function that makes their `str`s, `utf8`
        a copy of their bytes back to back, token i at `offsets[i]` to `offsets[i + 1]`."""
        cdef Py_ssize_t n = min(self.n_entries, max_distinct), i
        cdef Py_ssize_t size = self.arena_size if n == self.n_entries else self.entries[n].offset
        hashes = np.empty(n, dtype=np.int64)
        counts = np.empty(n, dtype=np.int64)
        offsets = np.empty(n + 1, dtype=np.int64)
        cdef int64_t[::1] hash_view = hashes
        cdef int64_t[::1] count_view = counts
        cdef int64_t[::1] offset_view = offsets
        for i in range(n):
            hash_view[i] = self.entries[i].hash
            count_view[i] = self.entries[i].count
            offset_view[i] = self.entries[i].offset
        offset_view[n] = size
        texts = PyBytes_FromStringAndSize(<char *>self.arena, size)
        return (
            hashes,
            counts,
            self.digest(n),
            partial(decode_tokens, texts, offsets),
            texts,
            offsets,
            self.n_entries > max_distinct,
        )

    cdef str digest(self, Py_ssize_t n):
        """token_digest of the first n entries: sha256 of counts.token_lines' bytes, the
        lines "token<TAB>count" sorted by token (code point order is UTF-8 byte order)."""
        cdef _Line *lines = <_Line *>_resized(NULL, n * sizeof(_Line) + 1)
        cdef Py_ssize_t i, b, size = 0, at = 0, digits
        cdef int64_t value
        cdef char *out
        try:
            for i in range(n):
                _set_line(
                    &lines[i],
                    self.arena + self.entries[i].offset,
                    self.entries[i].length,
                    self.entries[i].count,
                )
                size += lines[i].length + _decimal_length(lines[i].count) + 2
            _sort_lines(lines, 0, n - 1, _sort_depth(n))
            text = PyBytes_FromStringAndSize(NULL, size)
            out = PyBytes_AS_STRING(text)
            for i in range(n):
                memcpy(out + at, lines[i].data, lines[i].length)
                at += lines[i].length
                out[at] = 9
                value = lines[i].count
                digits = _decimal_length(value)
                for b in range(digits):
                    out[at + digits - b] = <char>(48 + value % 10)
                    value //= 10
                at += digits + 1
                out[at] = 10
                at += 1
        finally:
            PyMem_Free(lines)
        return hashlib.sha256(text).hexdigest()


def decode_tokens(bytes texts, offsets) -> list:
    """The texts of a `HashCounter.result`, as `str`."""
    cdef const char *data = texts
    cdef const int64_t[::1] at = offsets
    cdef Py_ssize_t i
    return [
        PyUnicode_DecodeUTF8(data + at[i], at[i + 1] - at[i], NULL)
        for i in range(at.shape[0] - 1)
    ]


# The words pairs skip (pairs.SKIPPED_WORDS) as UTF-8 in a small C table, found by FNV-1a.
cdef enum:
    _SKIPPED_SLOTS = 2048  # a power of two, over twice the words


cdef uint64_t _skipped_hashes[_SKIPPED_SLOTS]
cdef Py_ssize_t _skipped_offsets[_SKIPPED_SLOTS]
cdef Py_ssize_t _skipped_lengths[_SKIPPED_SLOTS]
cdef bint _skipped_used[_SKIPPED_SLOTS]
cdef bytes _skipped_bytes


cdef inline uint64_t _fnv(const uint8_t *data, Py_ssize_t length) noexcept:
    cdef uint64_t value = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(length):
        value = (value ^ data[i]) * 1099511628211ULL
    return value


cdef int _load_skipped_words(words) except -1:
    global _skipped_bytes
    cdef list encoded = [text.encode() for text in sorted(words)]
    cdef Py_ssize_t slot, offset = 0
    cdef uint64_t hash
    cdef bytes word
    if 2 * len(encoded) > _SKIPPED_SLOTS:
        raise ValueError("too many skipped words for the table")
    _skipped_bytes = b"".join(encoded)
    cdef const uint8_t *data = <const uint8_t *>(<char *>_skipped_bytes)
    for word in encoded:
        hash = _fnv(data + offset, len(word))
        slot = <Py_ssize_t>(hash & (_SKIPPED_SLOTS - 1))
        while _skipped_used[slot]:
            slot = (slot + 1) & (_SKIPPED_SLOTS - 1)
        _skipped_used[slot] = True
        _skipped_hashes[slot] = hash
        _skipped_offsets[slot] = offset
        _skipped_lengths[slot] = len(word)
        offset += len(word)
    return 0


_load_skipped_words(SKIPPED_WORDS)


cdef inline bint _is_skipped_word(const uint8_t *data, Py_ssize_t length) noexcept:
    cdef uint64_t hash = _fnv(data, length)
    cdef Py_ssize_t slot = <Py_ssize_t>(hash & (_SKIPPED_SLOTS - 1))
    cdef const uint8_t *words = <const uint8_t *>(<char *>_skipped_bytes)
    while _skipped_used[slot]:
        if (
            _skipped_hashes[slot] == hash
            and _skipped_lengths[slot] == length
            and memcmp(words + _skipped_offsets[slot], data, length) == 0
        ):
            return True
        slot = (slot + 1) & (_SKIPPED_SLOTS - 1)
    return False


# One counter per thread: a thread can wait for the GIL in the middle of a message (in a
# Python call), and another must not count into its table meanwhile.
_threads = threading.local()


cdef HashCounter _counter():
    cdef HashCounter counter = getattr(_threads, "counter", None)
    if counter is None:
        counter = HashCounter()
        _threads.counter = counter
    elif counter.busy:  # called again from inside a call on this thread: a table of its own
        counter = HashCounter()
    counter.reset()
    counter.busy = True
    return counter


cdef enum:
    # A counter grown past these by one huge message (a thousand 8 KiB header fields give a
    # million tokens) is dropped after it, so that a thread does not keep tens of MB for
    # good; a mail needs about 500 entries.
    _KEPT_ENTRIES = 1 << 16
    _KEPT_ARENA_BYTES = 1 << 20


cdef void _release(HashCounter counter) noexcept:
    counter.busy = False
    if (
        counter.entries_capacity > _KEPT_ENTRIES or counter.arena_capacity > _KEPT_ARENA_BYTES
    ) and getattr(_threads, "counter", None) is counter:
        _threads.counter = None


def hash_counter():
    """This thread's HashCounter, emptied; `release` it after the message."""
    return _counter()
