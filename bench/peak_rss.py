"""The benches' peak memory: this process's own high-water mark (VmHWM in /proc/self/status).

Not ``resource.getrusage(...).ru_maxrss``: exec() carries the forking parent's high-water mark into the child,
so a bench job started from a big process (pytest after a thousand tests, a bench driver holding a trace)
would read the parent's peak as its own (tests/test_bad_inputs.py's bomb test reads VmHWM for the same reason).
"""

from __future__ import annotations

import re
import resource

_HWM = re.compile(r"VmHWM:\s+(\d+) kB")


def peak_rss_mb() -> float:
    """This process's own peak resident memory, in MiB (Linux; ru_maxrss where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            m = _HWM.search(f.read())
    except OSError:
        m = None
    kib = int(m.group(1)) if m else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024


def children_peak_rss_mb() -> float:
    """The largest peak of this process's waited-for children, in MiB (ru_maxrss: a child that exec()s inherits
    this process's peak at the fork, so this is an upper bound of the child's own)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


__all__ = ["children_peak_rss_mb", "peak_rss_mb"]
