#!/usr/bin/python3
"""check_needed.py - ringfeed's shipped binaries load wherever they are
installed: their NEEDED lists (readelf -d) hold no CUDA library (libcuda,
libcudart, libcublas, libcublasLt, libnccl), whatever the build found.

    check_needed.py LIBRINGFEED.so          (prints TAP)
    check_needed.py --exe RINGFEED-TRAIN    (prints TAP)

libringfeed also has no C++ runtime among them; the driver is opened at
run time (client/pin_cuda.c), and the library loads with every symbol
bound at once (RTLD_NOW), here, where no CUDA driver is installed.

ringfeed-train links the CUDA runtime statically and opens cuBLAS with
dlopen (kernels/cuda/cu_blas.c); its C++ runtime (nvcc's host code needs
it) is a Debian package and allowed.  It starts with every symbol bound
(LD_BIND_NOW) and answers --help, here, where no CUDA driver is installed.
"""
import os
import re
import subprocess
import sys

from tap import done, ok  # tests/tap.py

CUDA = r"cuda|cudart|cublas|cublasLt|nccl"
FORBIDDEN_LIB = re.compile(rf"lib({CUDA}|stdc\+\+)\b")
FORBIDDEN_EXE = re.compile(rf"lib({CUDA})\b")


def needed(path):
    r = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout)


def check_exe(exe):
    libs = needed(exe)
    ok(libs, f"readelf -d lists the NEEDED libraries: {libs}")
    bad = [n for n in libs if FORBIDDEN_EXE.match(n)]
    ok(not bad, f"no CUDA library among them (found {bad})")
    env = dict(os.environ, LD_BIND_NOW="1")
    r = subprocess.run([exe, "--help"], env=env, capture_output=True, text=True, timeout=60)
    ok(r.returncode == 0 and "--backend" in r.stdout + r.stderr,
       "it starts with every symbol bound and answers --help",
       r.stdout[-2000:] + r.stderr[-2000:])
    return done()


def main():
    if sys.argv[1] == "--exe":
        return check_exe(sys.argv[2])
    lib = sys.argv[1]
    libs = needed(lib)
    ok(libs, f"readelf -d lists the NEEDED libraries: {libs}")
    bad = [n for n in libs if FORBIDDEN_LIB.match(n)]
    ok(not bad, f"no CUDA library nor C++ runtime among them (found {bad})")
    # loaded with every symbol bound, in a Python of its own (a sanitized
    # build's library needs its runtime loaded first: LD_PRELOAD)
    env = dict(os.environ, LD_BIND_NOW="1")
    asan = [n for n in libs if n.startswith("libasan")]
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
