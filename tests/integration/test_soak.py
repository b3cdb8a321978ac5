"""test_soak.py - a two-minute slice of bench/soak.

bench/soak starts its own ringfeedd on a temporary socket with 20 mixed
clients (ringfeed-read and Python loaders, raw Fashion-MNIST and JPEG
crops, ranks, resumes), a worker kill storm, a reload storm, clients
SIGKILLed and re-attached and one dataset truncated while it is read, then
checks every untouched client's digest against its solo run, the daemon's
and workers' RSS and descriptors, and every line of the daemon's log.  It
exits 0 when every check passed and prints the reasons otherwise; this test
runs it on the build under test and asserts exit 0.
"""
import os
import subprocess

from conftest import BUILD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOAK = os.path.join(ROOT, "bench", "soak")


def test_soak_two_minutes():
    cmd = ["/usr/bin/python3", SOAK, "--minutes", "2", "--clients", "20", "--workers", "2",
           "--build", os.path.abspath(BUILD), "--seed", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(r.stdout)
    assert r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
