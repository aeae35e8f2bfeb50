"""A server's process gives freed model-sized blocks back to the system at once (glibc)."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

# Run in a process of its own: glibc's thresholds are process-wide, and this process's
# allocations so far would blur its RSS.
SCENARIO = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    from app.live.memory import bound_kept_memory

    def rss():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * 4096

    print(bound_kept_memory())
    def load():
        # A large block freed raises glibc's mmap and trim thresholds unless they are fixed
        # (a model's load frees many); blocks below them then come from the thread's arena.
        np.ones(16 << 20, np.uint8)
        parts = [np.ones(2 << 20, np.uint8) for _ in range(10)]
        allocated = rss()
        del parts[:-1]  # the last one keeps the others from merging into the arena's top
        print(allocated - rss())

    worker = threading.Thread(target=load)
    worker.start()
    worker.join()
    """
)


@pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's allocator"
)
def test_blocks_freed_after_a_large_one_leave_the_resident_set_without_a_trim() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", SCENARIO], capture_output=True, text=True, check=True
    )
    bounded, returned = completed.stdout.split()
    assert bounded == "True"
    assert int(returned) >= 15 << 20  # of the 18 MiB freed
