#!/usr/bin/python3
"""check_needed.py - libringfeed loads wherever Python does: its NEEDED list
(readelf -d) holds no CUDA library (libcuda, libcudart, libcublas, libnccl)
and no C++ runtime, whatever the build found; the driver is opened at run
time (client/pin_cuda.c).  And the library loads with every symbol bound
at once (RTLD_NOW), here, where no CUDA driver is installed.

    check_needed.py LIBRINGFEED.so          (prints TAP)
"""
import ctypes
import os
import re
import subprocess
import sys

from tap import done, ok  # tests/tap.py

FORBIDDEN = re.compile(r"lib(cuda|cudart|cublas|cublasLt|nccl|stdc\+\+)\b")


def main():
    lib = sys.argv[1]
    r = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout)
    ok(needed, f"readelf -d lists the NEEDED libraries: {needed}")
    bad = [n for n in needed if FORBIDDEN.match(n)]
    ok(not bad, f"no CUDA library nor C++ runtime among them (found {bad})")
    os.environ["LD_BIND_NOW"] = "1"
    try:
        h = ctypes.CDLL(lib, mode=os.RTLD_NOW)
        ok(hasattr(h, "rf_open") and hasattr(h, "rf_last_error"),
           "it loads with every symbol bound, and has its API")
    except OSError as e:
        ok(False, f"it loads with every symbol bound: {e}")
    return done()


if __name__ == "__main__":
    sys.exit(main())
