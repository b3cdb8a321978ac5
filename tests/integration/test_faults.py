"""test_faults.py - an epoch with each fault injection point failing once
(proto/fault.h: RINGFEED_FAULT=POINT:N, debug and sanitizer builds).

For every point: three clients read (one whole stream, two ranks of
another); each either gets its exact stream (a read that failed gives a
substitute, flagged, in the failed sample's place, and a log line naming
the record) or ends with a clear error on stderr, and what it got before is
a prefix of the exact stream. Afterwards the daemon still serves the exact
stream, it logged the injected failure, and it exits 0 on SIGTERM (in the
ASan build, with leak checking: no leak on any of these paths).

Regressions held here: a connection whose allocation failed was left in
libuv's backlog, which then stopped accepting anyone (alloc-conn: the
daemon's first connection, the fixture's PING, fails); a job that could not
be allocated left its batch half-planned and the client waited forever
(alloc: a job of the first clients).
"""
import os
import re
import signal
import subprocess

import pytest

from conftest import read_dump_rows, read_tool, run_read

SUBSTITUTED = 2

# which call fails (the Nth since the process started: workers count their
# own reads), and the log line that shows it did
POINTS = {
    "read": ("read:30", r"bad sample \d+ \(read\), skipped: .*read failed: Input/output error"),
    "alloc": ("alloc:300", r"out of memory: it could not plan the next batch"),
    "alloc-conn": ("alloc:1", r"accept: out of memory; the peer is dropped"),
    "memfd": ("memfd:2", r"memfd_create: Too many open files"),
    "mmap": ("mmap:2", r"mmap ring: Cannot allocate memory"),
    "send": ("send:4", r"could not send the ring|broken pipe"),
    "accept": ("accept:4", r"accept: too many open files"),
}

CLIENTS = [
    ("whole", ["--batch", "100", "--epochs", "2", "--seed", "7"]),
    ("rank0", ["--batch", "64", "--epochs", "2", "--rank", "0", "--world", "2"]),
    ("rank1", ["--batch", "64", "--epochs", "2", "--rank", "1", "--world", "2"]),
]


def faults_built():
    build = os.environ.get("RINGFEED_BUILD_DIR", "build")
    with open(os.path.join(build, "config.h")) as f:
        return "#define RINGFEED_FAULTS 1" in f.read()


def read_clients(d, tmp_path, tag):
    """Starts every client at once; returns {name: (rc, stderr, rows)}."""
    procs = {}
    for name, args in CLIENTS:
        dump = tmp_path / f"{tag}-{name}.txt"
        cmd = [read_tool(), "--socket", d.sock, "--dataset", "fm", "--json",
               "--dump-indices", str(dump)] + args
        procs[name] = (subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True), dump)
    out = {}
    for name, (p, dump) in procs.items():
        _, err = p.communicate(timeout=120)
        rows = read_dump_rows(dump) if dump.exists() else []
        out[name] = (p.returncode, err, rows)
    return out


def same_stream(rows, ref):
    """rows is ref, or a prefix of it, sample for sample; a substituted
    sample stands in the place of the one it replaced."""
    if len(rows) > len(ref):
        return False
    for got, want in zip(rows, ref):
        if got[:2] != want[:2]:
            return False
        if got[4] & SUBSTITUTED:
            continue
        if got != want:
            return False
    return True


@pytest.fixture(scope="module")
def reference(tmp_path_factory, packed_fmnist):
    from conftest import Daemon
    tmp = tmp_path_factory.mktemp("faults-ref")
    d = Daemon({"fm": packed_fmnist["test"]}, workers=2).start()
    try:
        got = read_clients(d, tmp, "ref")
    finally:
        d.cleanup()
    for name, (rc, err, rows) in got.items():
        assert rc == 0, (name, err)
    return {name: rows for name, (_, _, rows) in got.items()}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_each_point_failing_once(point, daemon_factory, packed_fmnist, reference, tmp_path):
    if not faults_built():
        pytest.skip("fault injection is built into debug and sanitizer builds only")
    spec, evidence = POINTS[point]
    d = daemon_factory({"fm": packed_fmnist["test"]}, workers=2, env={"RINGFEED_FAULT": spec})
    got = read_clients(d, tmp_path, point)
    for name, (rc, err, rows) in got.items():
        assert rc in (0, 1), (name, rc, err)  # never killed by a signal
        if rc == 0:
            assert len(rows) == len(reference[name]), (name, err)
        else:
            assert err.startswith("ringfeed-read: ") and len(err.strip()) > 20, (name, err)
        assert same_stream(rows, reference[name]), (name, err)

    # the daemon goes on: the exact stream, the fault in its log
    assert d.proc.poll() is None, d.read_log()[-3000:]
    out, _ = run_read(d.sock, "fm", batch=100, epochs=2, extra=["--seed", "7"],
                      dump=str(tmp_path / "after.txt"))
    assert read_dump_rows(tmp_path / "after.txt") == reference["whole"]
    log = d.read_log()
    name = spec.split(":")[0]
    assert f"fault injection armed (RINGFEED_FAULT): {name} call" in log, log[-2000:]
    assert re.search(evidence, log, re.I), log[-3000:]
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(60) == 0, d.read_log()[-3000:]


def test_bad_spec_refused(daemon_factory, packed_fmnist):
    if not faults_built():
        pytest.skip("fault injection is built into debug and sanitizer builds only")
    from conftest import ringfeedd
    r = subprocess.run([ringfeedd(), "--socket", "/nonexistent/rf.sock", "--dataset",
                        f"fm={packed_fmnist['test']}"], env=dict(os.environ,
                       RINGFEED_FAULT="read:3,disk:2"), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2, r
    assert 'no point "disk"' in r.stderr, r.stderr
