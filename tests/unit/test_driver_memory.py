"""The Python driver gives freed arrays' memory back to the system (cdclake.spark.return_freed_memory)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

#: After an 8 MiB array is freed, glibc serves 4 MiB arrays from its heap; a small array allocated after each one
#: pins the heap's top, so the freed arrays' pages stay resident unless each had pages of its own.
_FRAGMENT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from cdclake.spark import return_freed_memory

    def rss():
        return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024

    if sys.argv[1] == "on":
        assert return_freed_memory()
    freed = np.ones(1 << 20)
    del freed
    before = rss()
    arrays, pins = [], []
    for _ in range(50):
        arrays.append(np.ones(1 << 19))
        pins.append(np.ones(1 << 12))
    del arrays
    print(rss() - before)
    """
)


def _retained(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _FRAGMENT, mode], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_freed_arrays_go_back_to_the_system_only_with_the_driver_setting() -> None:
    # 50 arrays of 4 MiB freed: glibc's defaults keep most of their 200 MiB; with the setting each had its own
    # pages, unmapped when freed
    assert _retained("off") > 100 * 2**20
    assert _retained("on") < 16 * 2**20


def test_arrow_allocates_through_the_system_allocator_unless_a_pool_is_chosen() -> None:
    check = (
        "import pyarrow as pa; from cdclake.spark import return_freed_memory; return_freed_memory(); "
        "print(pa.default_memory_pool().backend_name)"
    )
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    chosen = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, env=env)
    assert chosen.stdout.strip() == "system"
    env["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
    kept = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, env=env)
    assert kept.stdout.strip() == "jemalloc"
