"""Run the hfmem CLI in this process and, at exit, write this process's peak RSS (VmHWM from /proc/self/status, in
kB) to the file named by HFMEM_TEST_RSS_FILE: memory bounds are asserted on the child that did the work."""

from __future__ import annotations

import atexit
import os
import sys


def _write_peak() -> None:
    with open("/proc/self/status") as fh:
        peak = next(line.split()[1] for line in fh if line.startswith("VmHWM:"))
    with open(os.environ["HFMEM_TEST_RSS_FILE"], "w") as out:
        out.write(peak)


atexit.register(_write_peak)
from hfmem.cli import main  # noqa: E402

sys.argv[0] = "hfmem"
main()
