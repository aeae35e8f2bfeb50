# cython: language_level=3, boundscheck=False, wraparound=False
"""Prototype, measurement only: body words of ASCII text as counted 64-bit FNV-1a hashes.

What a core emitting hashes would do instead of making a str per distinct word, counting
them in a Counter and hashing them again for the model's lookup. Not used by spamsift.
"""

from libc.stdint cimport int64_t, uint64_t


cdef inline bint _ascii_alnum(Py_UCS4 c) noexcept:
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122)


def word_hash_counts(str text, uint64_t[::1] keys, int64_t[::1] counts, int64_t[::1] order):
    """Count the words of ASCII `text` by hash into a zeroed open-addressing table (`keys`,
    `counts`, capacity a power of two above twice the words); `order` gets the slots in first
    emission order. Return the number of distinct words."""
    cdef Py_ssize_t length = len(text), i = 0, start, slot
    cdef Py_ssize_t mask = keys.shape[0] - 1, distinct = 0
    cdef uint64_t hash
    cdef Py_UCS4 c
    while i < length:
        c = text[i]
        if not _ascii_alnum(c):
            i += 1
            continue
        start = i
        hash = 14695981039346656037ULL
        while i < length:
            c = text[i]
            if not _ascii_alnum(c):
                break
            hash = (hash ^ <uint64_t>c) * 1099511628211ULL
            i += 1
        if hash == 0:
            hash = 1  # 0 marks an empty slot
        slot = <Py_ssize_t>(hash & mask)
        while keys[slot] != 0 and keys[slot] != hash:
            slot = (slot + 1) & mask
        if keys[slot] == 0:
            keys[slot] = hash
            order[distinct] = slot
            distinct += 1
        counts[slot] += 1
    return distinct
