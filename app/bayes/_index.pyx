# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled innermost loop of a token index's lookup by hash (app/bayes/tokens.py).

Optional, as the token core is (setup.py): without it numpy's binary search gives the same
ids. A binary search over a model's few hundred thousand hashes misses the CPU's caches at
nearly every step of its ~20, and a request's other work has cooled them in between; here a
hash's top bits name its bucket, `starts` gives the bucket's place in the sorted hashes (a
few of them, one cache line), the bucket is scanned, and the id is read beside the hash
found: two or three misses a hash, in one pass.
"""

import numpy as np

from libc.stdint cimport int32_t, int64_t, uint64_t

ctypedef fused id_t:
    int32_t
    int64_t


def bucket_ids(
    const int64_t[::1] sorted_hashes,
    const id_t[::1] ids,
    const int32_t[::1] starts,
    int shift,
    const int64_t[::1] hashes,
):
    """The id beside each of `hashes` in `sorted_hashes` (`ids`, one per hash), -1 for a
    hash not there. `starts[b]` is the place of the first hash whose top `64 - shift` bits,
    with the sign bit flipped (so that they ascend as the signed hashes do), are `b`;
    `starts[b + 1]` is its bucket's end."""
    cdef Py_ssize_t n = hashes.shape[0]
    cdef Py_ssize_t i
    cdef int64_t hash_, place, end
    cdef uint64_t bucket
    found = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] out = found
    with nogil:
        for i in range(n):
            hash_ = hashes[i]
            bucket = ((<uint64_t>hash_) ^ (<uint64_t>1 << 63)) >> shift
            place = starts[bucket]
            end = starts[bucket + 1]
            while place < end and sorted_hashes[place] < hash_:
                place += 1
            out[i] = ids[place] if place < end and sorted_hashes[place] == hash_ else -1
    return found
