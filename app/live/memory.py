"""Process memory: keep glibc from holding the freed blocks of models loaded and dropped."""

from __future__ import annotations

import ctypes

# mallopt's parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Blocks from 1 MiB are mapped on their own: a model's arrays and the load's larger
# temporaries. A load's many blocks of ~800 KB (a range of 100,000 ids in int64) stay in the
# arena, where they are reused: mapping those too (128 KiB, glibc's default) cost a
# million-token load 0.3 s more CPU (0.9 -> 1.2 s) in page faults.
SEPARATE_MAPPING_BYTES = 1 << 20
# Free memory at the top of an arena above this goes back to the system when a block is freed.
KEPT_TOP_BYTES = 128 * 1024


def bound_kept_memory() -> bool:
    """Keep glibc from holding freed model-sized blocks: fix its mmap and trim thresholds.

    By default glibc raises its mmap threshold (up to 32 MiB) each time a large block is
    freed, and its trim threshold to twice that, so the arrays of a model's load came from the
    heap of the loading thread's arena, and up to 64 MiB freed at its top stayed resident:
    malloc_trim gives back free blocks inside an arena but not a thread arena's top. A
    million-token model's server kept 64 or 83 bytes a token from one run to the next.
    Process-wide, and idempotent; False where there is no glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(
            libc.mallopt(M_MMAP_THRESHOLD, SEPARATE_MAPPING_BYTES)
            and libc.mallopt(M_TRIM_THRESHOLD, KEPT_TOP_BYTES)
        )
    except (OSError, AttributeError):
        return False
