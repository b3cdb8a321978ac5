#!/usr/bin/python3
"""check_needed.py - libringfeed loads wherever Python does: its NEEDED list
(readelf -d) holds no CUDA library (libcuda, libcudart, libcublas, libnccl)
and no C++ runtime, whatever the build found; the driver is opened at run
time (client/pin_cuda.c).  And the library loads with every symbol bound
at once (RTLD_NOW), here, where no CUDA driver is installed.

    check_needed.py LIBRINGFEED.so          (prints TAP)
"""
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
    # loaded with every symbol bound, in a Python of its own (a sanitized
    # build's library needs its runtime loaded first: LD_PRELOAD)
    env = dict(os.environ, LD_BIND_NOW="1")
    asan = [n for n in needed if n.startswith("libasan")]
    if asan:
        env["LD_PRELOAD"] = subprocess.run(["cc", f"-print-file-name={asan[0]}"],
                                           capture_output=True, text=True).stdout.strip()
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    probe = ("import ctypes, os, sys\n"
             "h = ctypes.CDLL(sys.argv[1], os.RTLD_NOW)\n"
             "print(bool(h.rf_open) and bool(h.rf_last_error))\n")
    r = subprocess.run([sys.executable, "-c", probe, lib], env=env, capture_output=True,
                       text=True, timeout=60)
    ok(r.returncode == 0 and r.stdout.strip() == "True",
       "it loads with every symbol bound, and has its API", r.stdout + r.stderr)
    return done()


if __name__ == "__main__":
    sys.exit(main())
