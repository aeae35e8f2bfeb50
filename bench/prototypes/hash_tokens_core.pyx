# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Prototype, measurement only: a parsed message as counted 64-bit token hashes and its key.

What a token core emitting hashes would do for `tokenize_raw` after `parse_message`: every
token family (header names, header words, address domains, the From display words, part and
attachment types, body words with `digits:N` and `skip:` tokens, URLs and e-mail domains, word
pairs, HTML links, hidden words, the shape tokens) counted by hash in a C table, with the
token's UTF-8 bytes kept in one arena for the message key's digest (sha256 over the sorted
"token<TAB>count" lines, as app.service.messages.token_digest) and for nothing else. No str is
made per word of an ASCII text. Not used by spamsift; bench/prototypes/hash_tokens.py runs it.

Paths kept in Python, as the compiled core keeps them (a str per token there): URLs, e-mail
and address domains, part and link tokens, and every text that is not ASCII (CJK bigrams,
NFKC): their tokens come from the real tokenizer as str and are then counted by hash.

Hash functions (`mode`): 0 = CPython's own str hash (SipHash-1-3 keyed per process, PEP 456)
of the token, computed from its bytes with `_Py_HashBytes` for an ASCII token (a 1-byte str
hashes its bytes), so it equals `hash(token)` and mixes with str tokens; 1 = FNV-1a 64 over
UTF-8, unkeyed; 2 = SipHash-2-4 over UTF-8 with a 128-bit key given at `configure` (a key
stored per database); 3 = SipHash-1-3 over UTF-8 with that key; 4 = CPython's hash of the
token's UTF-8 bytes (`hash(token.encode())`, which is `hash(token)` for an ASCII token).

Mode 0 has collisions nobody needs a key for: a str hashes its in-memory buffer whatever its
kind, so "\u3067" (2 bytes, 67 30) hashes as "g0": 16 such pairs among the 598,627 tokens of
the SpamAssassin training split. Mode 4 hashes one byte string per text (UTF-8 is injective
and a non-ASCII text's bytes are never an ASCII text's), so only the keyed function's chance
collisions remain.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_1BYTE_DATA, PyUnicode_1BYTE_KIND, PyUnicode_KIND
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memcmp, memcpy, memset

import hashlib

import numpy as np

from app.text import core, defects
from app.text.headers import (
    _ADDRESS_HEADERS,
    _DENIED_WORD_HEADER_PREFIXES,
    _DENIED_WORD_HEADERS,
    _DOMAIN,
    OWN_HEADER_PREFIX,
)
from app.text.pairs import _SKIPPED_WORDS, pair_tokens
from app.text.shape import magnitude
from app.text.tokenize import _utf8_size, link_tokens, part_tokens
from app.text.words import _URL, normalize_text, url_tokens

try:
    from app.text._core import email_domains as _email_domains  # the compiled scan
except ImportError:
    from app.text.words import email_domains as _email_domains


cdef extern from "Python.h":
    Py_ssize_t _Py_HashBytes(const void *data, Py_ssize_t length)
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL


cdef inline bint _ascii_alnum(uint8_t c) noexcept nogil:
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122)


cdef inline uint64_t _rotl(uint64_t x, int b) noexcept nogil:
    return (x << b) | (x >> (64 - b))


cdef uint64_t _siphash(const uint8_t *data, Py_ssize_t length, uint64_t k0, uint64_t k1,
                       int c_rounds, int d_rounds) noexcept nogil:
    """SipHash-c-d (the reference algorithm), 64-bit output."""
    cdef uint64_t v0 = k0 ^ 0x736f6d6570736575ULL
    cdef uint64_t v1 = k1 ^ 0x646f72616e646f6dULL
    cdef uint64_t v2 = k0 ^ 0x6c7967656e657261ULL
    cdef uint64_t v3 = k1 ^ 0x7465646279746573ULL
    cdef uint64_t m, b = (<uint64_t>length) << 56
    cdef Py_ssize_t i, blocks = length // 8, left = length & 7
    cdef int r
    for i in range(blocks):
        memcpy(&m, data + 8 * i, 8)  # little-endian machine
        v3 ^= m
        for r in range(c_rounds):
            v0 += v1; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
            v2 += v3; v3 = _rotl(v3, 16); v3 ^= v2
            v0 += v3; v3 = _rotl(v3, 21); v3 ^= v0
            v2 += v1; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)
        v0 ^= m
    for i in range(left):
        b |= (<uint64_t>data[8 * blocks + i]) << (8 * i)
    v3 ^= b
    for r in range(c_rounds):
        v0 += v1; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
        v2 += v3; v3 = _rotl(v3, 16); v3 ^= v2
        v0 += v3; v3 = _rotl(v3, 21); v3 ^= v0
        v2 += v1; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)
    v0 ^= b
    v2 ^= 0xff
    for r in range(d_rounds):
        v0 += v1; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
        v2 += v3; v3 = _rotl(v3, 16); v3 ^= v2
        v0 += v3; v3 = _rotl(v3, 21); v3 ^= v0
        v2 += v1; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)
    return v0 ^ v1 ^ v2 ^ v3


cdef inline uint64_t _fnv(const uint8_t *data, Py_ssize_t length) noexcept nogil:
    cdef uint64_t value = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(length):
        value = (value ^ data[i]) * 1099511628211ULL
    return value


cdef int _mode = 0
cdef uint64_t _k0 = 0
cdef uint64_t _k1 = 0


def configure(int mode, uint64_t k0=0, uint64_t k1=0):
    """Choose the hash function (see the module's doc) and its key."""
    global _mode, _k0, _k1
    _mode, _k0, _k1 = mode, k0, k1


cdef inline bint _is_ascii(const uint8_t *data, Py_ssize_t length) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(length):
        if data[i] >= 128:
            return False
    return True


cdef int64_t _token_hash(const uint8_t *data, Py_ssize_t length) except? -1:
    """The emitted 64-bit hash of a token given as UTF-8 (as int64, TokenIndex's type)."""
    if _mode == 0:
        if _is_ascii(data, length):
            return _Py_HashBytes(data, length)
        # A non-ASCII token's str is not its UTF-8: hash the str (rare: not ASCII texts).
        return hash((<bytes>PyBytes_FromStringAndSize(<char *>data, length)).decode("utf-8"))
    if _mode == 4:
        return _Py_HashBytes(data, length)
    if _mode == 1:
        return <int64_t>_fnv(data, length)
    if _mode == 2:
        return <int64_t>_siphash(data, length, _k0, _k1, 2, 4)
    return <int64_t>_siphash(data, length, _k0, _k1, 1, 3)


def token_hash(str token) -> int:
    """The hash `mode` gives a token made as str (the reference the check compares with)."""
    cdef Py_ssize_t size
    cdef const char *data = PyUnicode_AsUTF8AndSize(token, &size)
    return _token_hash(<const uint8_t *>data, size)


def hash_throughput(list tokens, int rounds) -> int:
    """Hash every token `rounds` times from its UTF-8 bytes (the cost of the function alone)."""
    cdef Py_ssize_t n = len(tokens), i, size
    cdef int r
    cdef int64_t total = 0
    cdef const char **datas = <const char **>malloc(n * sizeof(char *))
    cdef Py_ssize_t *sizes = <Py_ssize_t *>malloc(n * sizeof(Py_ssize_t))
    for i in range(n):
        datas[i] = PyUnicode_AsUTF8AndSize(tokens[i], &sizes[i])
    try:
        for r in range(rounds):
            for i in range(n):
                total += _token_hash(<const uint8_t *>datas[i], sizes[i])
    finally:
        free(datas)
        free(sizes)
    return total


# ---------------------------------------------------------------------------- the counter

cdef struct _Entry:
    int64_t hash
    Py_ssize_t offset  # of the token's UTF-8 bytes in the arena
    Py_ssize_t length
    int64_t count
    uint64_t key  # its first 8 bytes, big-endian, zero-padded: most comparisons of the sort


cdef const uint8_t *_sort_arena = NULL  # qsort's comparator reads the arena through this


cdef int _compare_entries(const void *a, const void *b) noexcept nogil:
    cdef const _Entry *x = <const _Entry *>a
    cdef const _Entry *y = <const _Entry *>b
    if x.key != y.key:
        # No token holds a NUL byte, so the zero padding sorts a prefix first, as memcmp
        # and then the length do.
        return 1 if x.key > y.key else -1
    cdef Py_ssize_t shorter = x.length if x.length < y.length else y.length
    cdef int order = memcmp(_sort_arena + x.offset, _sort_arena + y.offset, shorter)
    if order:
        return order
    return (x.length > y.length) - (x.length < y.length)


cdef class HashCounter:
    """Distinct tokens of one message by hash, in first-emission order, with their bytes.

    Reused message after message (`reset`): its buffers grow once and stay.
    """

    cdef uint8_t *arena
    cdef Py_ssize_t arena_size, arena_capacity
    cdef _Entry *entries
    cdef Py_ssize_t n_entries, entries_capacity
    cdef int *slots
    cdef Py_ssize_t mask
    cdef public Py_ssize_t emitted, url_tokens
    cdef uint8_t scratch[1024]
    # body words of the current text that take part in pairs: (start, length) in its data
    cdef Py_ssize_t *pair_words
    cdef Py_ssize_t n_pair_words, pair_capacity

    def __cinit__(self):
        self.arena_capacity = 1 << 16
        self.arena = <uint8_t *>malloc(self.arena_capacity)
        self.entries_capacity = 1 << 12
        self.entries = <_Entry *>malloc(self.entries_capacity * sizeof(_Entry))
        self.slots = <int *>malloc((1 << 13) * sizeof(int))
        self.mask = (1 << 13) - 1
        self.n_entries = 0
        memset(self.slots, 0xFF, (self.mask + 1) * sizeof(int))
        self.pair_capacity = 1 << 12
        self.pair_words = <Py_ssize_t *>malloc(2 * self.pair_capacity * sizeof(Py_ssize_t))
        self.reset()

    def __dealloc__(self):
        free(self.arena)
        free(self.entries)
        free(self.slots)
        free(self.pair_words)

    cpdef reset(self):
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
        self.emitted = 0
        self.url_tokens = 0

    cdef void _grow_slots(self) except *:
        cdef Py_ssize_t size = 2 * (self.mask + 1), i, slot
        free(self.slots)
        self.slots = <int *>malloc(size * sizeof(int))
        self.mask = size - 1
        for i in range(size):
            self.slots[i] = -1
        for i in range(self.n_entries):
            slot = <Py_ssize_t>(<uint64_t>self.entries[i].hash & <uint64_t>self.mask)
            while self.slots[slot] >= 0:
                slot = (slot + 1) & self.mask
            self.slots[slot] = <int>i

    cdef void add(self, const uint8_t *data, Py_ssize_t length) except *:
        """Count one token given as UTF-8 bytes."""
        cdef int64_t h = _token_hash(data, length)
        cdef Py_ssize_t slot = <Py_ssize_t>(<uint64_t>h & <uint64_t>self.mask)
        cdef int index
        cdef _Entry *entry
        self.emitted += 1
        while True:
            index = self.slots[slot]
            if index < 0:
                break
            entry = &self.entries[index]
            # Equal hashes of different texts stay two tokens here (the digest needs texts).
            if entry.hash == h and entry.length == length and memcmp(
                self.arena + entry.offset, data, length
            ) == 0:
                entry.count += 1
                return
            slot = (slot + 1) & self.mask
        if self.arena_size + length > self.arena_capacity:
            while self.arena_size + length > self.arena_capacity:
                self.arena_capacity *= 2
            self.arena = <uint8_t *>realloc(self.arena, self.arena_capacity)
        memcpy(self.arena + self.arena_size, data, length)
        if self.n_entries == self.entries_capacity:
            self.entries_capacity *= 2
            self.entries = <_Entry *>realloc(self.entries, self.entries_capacity * sizeof(_Entry))
        entry = &self.entries[self.n_entries]
        entry.hash, entry.offset, entry.length, entry.count = h, self.arena_size, length, 1
        self.arena_size += length
        self.slots[slot] = <int>self.n_entries
        self.n_entries += 1
        if 2 * self.n_entries > self.mask:
            self._grow_slots()

    cdef void add_prefixed(
        self, const uint8_t *prefix, Py_ssize_t prefix_length, const uint8_t *data,
        Py_ssize_t length
    ) except *:
        if not prefix_length:
            self.add(data, length)
            return
        memcpy(self.scratch, prefix, prefix_length)
        memcpy(self.scratch + prefix_length, data, length)
        self.add(self.scratch, prefix_length + length)

    cdef void add_str(self, str token) except *:
        cdef Py_ssize_t size
        cdef const char *data = PyUnicode_AsUTF8AndSize(token, &size)
        if size >= 4 and memcmp(data, b"url:", 4) == 0:
            self.url_tokens += 1
        self.add(<const uint8_t *>data, size)

    cdef void add_strs(self, list tokens, str prefix) except *:
        cdef str token
        if prefix:
            for token in tokens:
                self.add_str(prefix + token)
        else:
            for token in tokens:
                self.add_str(token)

    # ------------------------------------------------------------------ words of ASCII text

    cdef void ascii_words(
        self, str text, Py_ssize_t max_chars, bytes prefix, bint pairs
    ) except *:
        """The compiled core's `_words` on ASCII text: words ($ kept before), `skip:` for
        over-long ones, then `digits:N`; with `pairs`, the text's word pairs after them."""
        cdef const uint8_t *data = <const uint8_t *>PyUnicode_1BYTE_DATA(text)
        cdef const uint8_t *p = <const uint8_t *>(<char *>prefix)
        cdef Py_ssize_t plen = len(prefix)
        cdef Py_ssize_t length = len(text), i = 0, run_start, word_start, n, k
        cdef bint digits_only
        cdef int numbers[256]
        cdef Py_ssize_t n_numbers = 0
        cdef list more_numbers = None
        cdef uint8_t c
        self.n_pair_words = 0
        while i < length:
            c = data[i]
            if not _ascii_alnum(c):
                i += 1
                continue
            run_start = i
            word_start = i - 1 if i > 0 and data[i - 1] == 36 else i
            digits_only = True
            while i < length:
                c = data[i]
                if 48 <= c <= 57:
                    i += 1
                elif _ascii_alnum(c):
                    digits_only = False
                    i += 1
                else:
                    break
            n = i - word_start
            if n > max_chars:
                self.skip_token(p, plen, data[word_start], n)
            else:
                self.add_prefixed(p, plen, data + word_start, n)
                if pairs and not _is_stop_word(data + word_start, n):
                    self.pair_word(word_start, n)
            if digits_only and i - run_start >= 4:
                n = min(i - run_start, 100)
                if n_numbers < 256:
                    numbers[n_numbers] = <int>n
                    n_numbers += 1
                else:
                    if more_numbers is None:
                        more_numbers = []
                    more_numbers.append(n)
        for k in range(n_numbers):
            self.digits_token(p, plen, numbers[k])
        if more_numbers is not None:
            for n in more_numbers:
                self.digits_token(p, plen, n)
        if pairs:
            self.pairs(data, max_chars)

    cdef void skip_token(
        self, const uint8_t *p, Py_ssize_t plen, uint8_t first, Py_ssize_t n
    ) except *:
        cdef bytes tail = f"skip:{chr(first)} {min(n, 1000) // 10 * 10}".encode()
        self.add_prefixed(p, plen, <const uint8_t *>(<char *>tail), len(tail))

    cdef void digits_token(self, const uint8_t *p, Py_ssize_t plen, Py_ssize_t n) except *:
        cdef uint8_t buffer[16]
        cdef Py_ssize_t size = 7
        memcpy(buffer, b"digits:", 7)
        if n >= 100:
            buffer[7], buffer[8], buffer[9] = 49, 48, 48
            size = 10
        elif n >= 10:
            buffer[7], buffer[8] = <uint8_t>(48 + n // 10), <uint8_t>(48 + n % 10)
            size = 9
        else:
            buffer[7] = <uint8_t>(48 + n)
            size = 8
        self.add_prefixed(p, plen, buffer, size)

    cdef void pair_word(self, Py_ssize_t start, Py_ssize_t length) except *:
        if self.n_pair_words == self.pair_capacity:
            self.pair_capacity *= 2
            self.pair_words = <Py_ssize_t *>realloc(
                self.pair_words, 2 * self.pair_capacity * sizeof(Py_ssize_t)
            )
        self.pair_words[2 * self.n_pair_words] = start
        self.pair_words[2 * self.n_pair_words + 1] = length
        self.n_pair_words += 1

    cdef void pairs(self, const uint8_t *data, Py_ssize_t max_chars) except *:
        """pairs.pair_tokens of the words recorded: `pair:a b`, cut to max_chars after
        the prefix."""
        cdef Py_ssize_t k, a, alen, b, blen, size
        for k in range(self.n_pair_words - 1):
            a, alen = self.pair_words[2 * k], self.pair_words[2 * k + 1]
            b, blen = self.pair_words[2 * k + 2], self.pair_words[2 * k + 3]
            memcpy(self.scratch, b"pair:", 5)
            memcpy(self.scratch + 5, data + a, alen)
            self.scratch[5 + alen] = 32
            memcpy(self.scratch + 6 + alen, data + b, blen)
            size = 1 + alen + blen
            if alen + blen >= max_chars:
                size = max_chars
            self.add(self.scratch, 5 + size)

    # ------------------------------------------------------------------ results

    def result(self, Py_ssize_t max_distinct, bint with_digest=True):
        """(hashes int64, counts int64, digest hex, truncated): the first `max_distinct`
        distinct tokens in first-emission order; the digest as token_digest ("" without)."""
        global _sort_arena
        cdef Py_ssize_t n = min(self.n_entries, max_distinct), i, size = 0, line
        hashes = np.empty(n, dtype=np.int64)
        counts = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] h = hashes
        cdef int64_t[::1] c = counts
        for i in range(n):
            h[i] = self.entries[i].hash
            c[i] = self.entries[i].count
        if not with_digest:
            return hashes, counts, "", self.n_entries > max_distinct
        # sorted(token_counts) orders str by code point: UTF-8 bytes sort the same way.
        cdef _Entry *order = <_Entry *>malloc(n * sizeof(_Entry) + 1)
        memcpy(order, self.entries, n * sizeof(_Entry))
        cdef Py_ssize_t b
        cdef uint64_t key
        for i in range(n):
            key = 0
            for b in range(8):
                key <<= 8
                if b < order[i].length:
                    key |= self.arena[order[i].offset + b]
            order[i].key = key
        _sort_arena = self.arena
        qsort(order, n, sizeof(_Entry), _compare_entries)
        for i in range(n):
            size += order[i].length + 22
        cdef uint8_t *lines = <uint8_t *>malloc(size + 1)
        cdef Py_ssize_t at = 0
        cdef char number[24]
        cdef int64_t value
        cdef Py_ssize_t digits, d
        for i in range(n):
            memcpy(lines + at, self.arena + order[i].offset, order[i].length)
            at += order[i].length
            lines[at] = 9
            at += 1
            value = order[i].count
            digits = 0
            while True:
                number[digits] = <char>(48 + value % 10)
                digits += 1
                value //= 10
                if value == 0:
                    break
            for d in range(digits):
                lines[at + d] = <uint8_t>number[digits - 1 - d]
            at += digits
            lines[at] = 10
            at += 1
        digest = hashlib.sha256(PyBytes_FromStringAndSize(<char *>lines, at)).hexdigest()
        free(lines)
        free(order)
        return hashes, counts, digest, self.n_entries > max_distinct

    def texts(self):
        """The distinct tokens as str (for checks only)."""
        return [
            (<bytes>PyBytes_FromStringAndSize(
                <char *>(self.arena + self.entries[i].offset), self.entries[i].length
            )).decode("utf-8", "surrogatepass")
            for i in range(self.n_entries)
        ]


# ---------------------------------------------------------------------------- stop words

cdef enum:
    _STOP_SLOTS = 2048


cdef uint64_t _stop_hashes[_STOP_SLOTS]
cdef bytes _stop_blob = b""
cdef Py_ssize_t _stop_offsets[_STOP_SLOTS]
cdef Py_ssize_t _stop_lengths[_STOP_SLOTS]
cdef bint _stop_used[_STOP_SLOTS]


def _load_stop_words(words):
    """The fixed pair stop words in a small C table (FNV-1a, linear probing, exact bytes)."""
    global _stop_blob
    cdef Py_ssize_t slot, i, offset = 0
    cdef uint64_t h
    cdef bytes part
    parts = [word.encode() for word in sorted(words) if word.isascii()]
    assert len(parts) < _STOP_SLOTS // 2
    _stop_blob = b"".join(parts)
    cdef const uint8_t *blob = <const uint8_t *>(<char *>_stop_blob)
    for i in range(_STOP_SLOTS):
        _stop_used[i] = False
    for part in parts:
        h = _fnv(blob + offset, len(part))
        slot = <Py_ssize_t>(h & (_STOP_SLOTS - 1))
        while _stop_used[slot]:
            slot = (slot + 1) & (_STOP_SLOTS - 1)
        _stop_used[slot] = True
        _stop_hashes[slot] = h
        _stop_offsets[slot] = offset
        _stop_lengths[slot] = len(part)
        offset += len(part)


_load_stop_words(_SKIPPED_WORDS)


cdef inline bint _is_stop_word(const uint8_t *data, Py_ssize_t length) noexcept:
    cdef uint64_t h = _fnv(data, length)
    cdef Py_ssize_t slot = <Py_ssize_t>(h & (_STOP_SLOTS - 1))
    cdef const uint8_t *blob = <const uint8_t *>(<char *>_stop_blob)
    while _stop_used[slot]:
        if (
            _stop_hashes[slot] == h
            and _stop_lengths[slot] == length
            and memcmp(blob + _stop_offsets[slot], data, length) == 0
        ):
            return True
        slot = (slot + 1) & (_STOP_SLOTS - 1)
    return False


# ---------------------------------------------------------------------------- families

cdef inline bint _ascii_str(str text):
    return PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND and text.isascii()


cdef void _text_tokens(HashCounter counter, str text, Py_ssize_t max_chars, str prefix,
                       bint pairs) except *:
    """text_tokens (URL tokens, `email:domain`, words) of a normalised text, with pairs of
    its body words when `pairs` (body texts)."""
    cdef list urls, tokens
    if not _ascii_str(text):
        # The rare path: the real core's tokens as str, hashed.
        tokens = core.active().text_tokens(text, max_chars)
        if pairs:
            tokens.extend(pair_tokens(tokens, max_chars))
        counter.add_strs(tokens, prefix)
        return
    if "://" in text or "www." in text:
        urls = _URL.findall(text)
        if urls:
            text = _URL.sub(" ", text)
            for url in urls:
                counter.add_strs(url_tokens(url, max_chars), prefix)
    if "@" in text:
        for domain in _email_domains(text):
            counter.add_str(f"{prefix}email:{domain[:max_chars]}")
    counter.ascii_words(text, max_chars, prefix.encode(), pairs)


cdef void _word_tokens(HashCounter counter, str text, Py_ssize_t max_chars, str prefix) except *:
    if not _ascii_str(text):
        counter.add_strs(core.active().word_tokens(text, max_chars), prefix)
        return
    counter.ascii_words(text, max_chars, prefix.encode(), False)


cdef void _header_tokens(HashCounter counter, list headers, Py_ssize_t max_chars) except *:
    """headers.header_tokens."""
    cdef set seen_names = set()
    cdef str name, value, normalized, display
    for name, value in headers:
        if name.startswith(OWN_HEADER_PREFIX):
            continue
        if name not in seen_names and len(name) <= max_chars:
            seen_names.add(name)
            counter.add_str("header:" + name)
        if name in _ADDRESS_HEADERS:
            normalized = normalize_text(value)
            for domain in _DOMAIN.findall(normalized):
                counter.add_str(f"{name}:{domain[:max_chars]}")
            if name == "from":
                display = " ".join(
                    [p for p in normalized.partition("<")[0].split() if "@" not in p]
                )
                _word_tokens(counter, display, max_chars, "from:word:")
        elif (
            not name.startswith(_DENIED_WORD_HEADER_PREFIXES)
            and name not in _DENIED_WORD_HEADERS
            and len(name) <= max_chars
        ):
            _text_tokens(counter, normalize_text(value), max_chars, name + ":", False)


ALL = 0xFF  # the families of `hash_tokens`, as bits: leave one out to time it
HEADERS, PARTS, BODY, PAIRS, LINKS, HIDDEN, SHAPE, DIGEST = (1 << bit for bit in range(8))


def hash_tokens(HashCounter counter, message, limits, int families=ALL):
    """tokenize_raw after parse_message, by hash: (hashes, counts, digest, defects).

    The time budget is not checked (the benches run without one). `families` other than ALL
    leave some out, for timing only."""
    cdef Py_ssize_t max_chars = limits.max_token_chars
    cdef str text
    counter.reset()
    if families & HEADERS:
        _header_tokens(counter, message.headers, max_chars)
    if families & PARTS:
        counter.add_strs(part_tokens(message), "")
    if families & BODY:
        for text in message.texts:
            _text_tokens(counter, normalize_text(text), max_chars, "", families & PAIRS)
    if families & LINKS:
        counter.add_strs(link_tokens(message.links, limits), "")
    if families & HIDDEN:
        for text in message.hidden_texts:
            _word_tokens(counter, normalize_text(text), max_chars, "hidden:")
    if (
        families & SHAPE
        and counter.emitted
        and defects.TIME_BUDGET not in message.defects
    ):
        size = sum(map(_utf8_size, message.texts))
        counter.add_str(f"size:{magnitude(size)}")
        counter.add_str(f"links:{magnitude(counter.url_tokens)}")
        text_types = {kind for kind in message.part_types if kind.startswith("text/")}
        if text_types:
            counter.add_str(f"html:{4 * ('text/html' in text_types) // len(text_types)}")
        else:
            counter.add_str("html:none")
    hashes, counts, digest, truncated = counter.result(
        limits.max_distinct_tokens, families & DIGEST
    )
    found = set(message.defects)
    if truncated:
        found.add(defects.TRUNCATED)
    return hashes, counts, digest, tuple(sorted(found))
