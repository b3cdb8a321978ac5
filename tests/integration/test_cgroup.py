"""test_cgroup.py - the daemon under a cgroup memory limit (a container's,
or a unit's MemoryMax=) sizes itself by the limit, not by the host's RAM
(proto/memlimit.h).

The workers used to read through the mapped page cache whenever the
datasets fitted in a quarter of the host's RAM: under a 256 MiB limit a
1.2 GB dataset was mapped and the daemon thrashed on page faults (about
120 samples/s against 60,800 with io_uring).  Here the daemon runs in a
memory cgroup of 64 MiB (cgroup v2 memory.max where this machine delegates
the controller, else the v1 memory hierarchy's memory.limit_in_bytes)
over Fashion-MNIST's training pack (about 30 MB, over a quarter of the
limit): the workers read with io_uring (or pread), not mmap; the default
ring budget is a quarter of the limit; the log names the limit's file; and
an epoch reads whole.  Skipped (77) where no memory cgroup can be made
here (a missing facility).  And a ring the memlock limit keeps from being
locked is said in the log, with the limit.
"""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import Daemon, ctl, packed_fmnist, ringfeedd, run_read, wait_for  # noqa: F401

LIMIT = 64 << 20


def own_path(controller_line):
    with open("/proc/self/cgroup") as f:
        for line in f:
            n, ctrls, path = line.rstrip("\n").split(":", 2)
            if controller_line(n, ctrls.split(",")):
                return path
    return None


def make_cgroup(name):
    """A child cgroup of this process's own with a LIMIT memory limit:
    (folder, the limit file's name), or None where none can be made."""
    tries = []
    v2 = own_path(lambda n, c: n == "0")
    if v2 is not None:
        tries.append((f"/sys/fs/cgroup{v2.rstrip('/')}", "memory.max"))
    v1 = own_path(lambda n, c: "memory" in c)
    if v1 is not None:
        tries.append((f"/sys/fs/cgroup/memory{v1.rstrip('/')}", "memory.limit_in_bytes"))
    for parent, limit_file in tries:
        folder = os.path.join(parent, name)
        try:
            os.mkdir(folder)
        except OSError:
            continue
        if not os.path.exists(os.path.join(folder, "cgroup.procs")):
            os.rmdir(folder)  # a plain folder (the hierarchy is not mounted there)
            continue
        try:
            with open(os.path.join(folder, limit_file), "w") as f:
                f.write(str(LIMIT))
            return folder, limit_file
        except OSError:
            os.rmdir(folder)
    return None


def test_backend_and_budget_follow_the_limit(packed_fmnist, tmp_path):
    made = make_cgroup(f"ringfeed-test-{os.getpid()}")
    if not made:
        pytest.skip("no memory cgroup can be made here (cgroup v2 without the memory "
                    "controller delegated, and no writable v1 memory hierarchy)")
    folder, limit_file = made
    data = os.path.getsize(os.path.join(packed_fmnist["train"], sorted(
        n for n in os.listdir(packed_fmnist["train"]) if n.endswith(".rfs"))[0]))
    assert data > LIMIT // 4, f"the pack ({data} bytes) must not fit a quarter of the limit"
    d = Daemon({"fm": packed_fmnist["train"]}, workers=2)
    # the daemon enters the cgroup before it execs (its workers follow it)
    d.args = ["/bin/sh", "-c", f'echo $$ > {folder}/cgroup.procs && exec "$@"', "sh"] + d.args
    try:
        d.start()
        # the backend is known once a worker said HELLO (alive counts from its start)
        st = wait_for(lambda: (lambda s: s if s["io.backend"] != "unknown" else None)(d.stats()),
                      "a worker's HELLO")
        assert st["io.backend"] in ("io_uring", "pread"), st
        assert int(st["memory.budget_bytes"]) == LIMIT // 4, st
        log = d.read_log()
        m = re.search(r"memory this daemon may use: (\d+) MB \((.*)\)", log)
        assert m and int(m.group(1)) == LIMIT >> 20 and limit_file in m.group(2), log[-2000:]
        out, _ = run_read(d.sock, "fm", batch=256, epochs=1)
        assert out["samples"] == 60000
    finally:
        d.cleanup()
        try:
            os.rmdir(folder)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)


def test_unlocked_ring_is_logged(packed_fmnist):
    """A ring mlock refuses (the memlock limit: LimitMEMLOCK= in the unit)
    is said in the log with the limit, once (then every 100th); it used to
    show only as ring_locked 0 in STATS.  Run as nobody under a 64 KiB
    memlock limit (root's mlock ignores the limit)."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("prlimit"):
        pytest.skip("needs root, setpriv and prlimit to run the daemon as another user")
    needed = subprocess.run(["readelf", "-d", ringfeedd()], capture_output=True,
                            text=True).stdout
    if "libasan" in needed:
        pytest.skip("AddressSanitizer's mlock does nothing and succeeds: a sanitized daemon "
                    "cannot be refused")
    top = tempfile.mkdtemp(prefix="rf-memlock-")
    try:
        os.chmod(top, 0o755)
        pack = os.path.join(top, "pack")
        shutil.copytree(packed_fmnist["test"], pack)
        for dp, dns, fns in os.walk(top):
            for n in dns:
                os.chmod(os.path.join(dp, n), 0o755)
            for n in fns:
                os.chmod(os.path.join(dp, n), 0o644)
        run_dir = os.path.join(top, "run")  # nobody's own, for its socket
        os.mkdir(run_dir)
        os.chown(run_dir, 65534, 65534)
        d = Daemon({"fm": pack}, workers=1, sock=os.path.join(run_dir, "rf.sock"))
        d.args = ["prlimit", "--memlock=65536", "setpriv", "--reuid=65534", "--regid=65534",
                  "--clear-groups", "--"] + d.args
        try:
            d.start()
            for _ in range(2):
                out, _ = run_read(d.sock, "fm", batch=100, epochs=1)
                assert out["samples"] == 10000
            log = d.read_log()
            lines = [ln for ln in log.splitlines() if "is not locked in RAM" in ln]
            assert len(lines) == 1, log[-3000:]
            assert "the memlock limit is 65536 bytes" in lines[0], lines[0]
            assert "(1 ring(s) so far)" in lines[0], lines[0]
        finally:
            d.cleanup()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def allowed(pid):
    with open(f"/proc/{pid}/status") as f:
        return re.search(r"^Cpus_allowed_list:\s*(\S+)$", f.read(), re.M).group(1)


def test_cpu_list(packed_fmnist, tmp_path):
    """cpu-list binds the daemon and its workers (sched_setaffinity), workers
    auto counts those CPUs, a reload moves them all, and a list with no
    usable CPU refuses the reload."""
    if len(os.sched_getaffinity(0)) < 2 or 0 not in os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and another to move between")
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text(f"dataset.fm = {packed_fmnist['test']}\ncpu-list = 0\nworkers = auto\n")
    d = Daemon({}, workers=1, extra=["--config", str(conf)])
    d.args = [a for a in d.args]
    i = d.args.index("--workers")
    del d.args[i:i + 2]  # the config's workers = auto
    try:
        d.start()
        st = wait_for(lambda: (lambda s: s if s["io.backend"] != "unknown" else None)(d.stats()),
                      "a worker's HELLO")
        assert allowed(d.proc.pid) == "0"
        assert all(allowed(int(p)) == "0" for p in d.worker_pids()), d.worker_pids()
        assert st["workers.budget"] == "1", st["workers.budget_source"]
        both = ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:2])
        conf.write_text(f"dataset.fm = {packed_fmnist['test']}\ncpu-list = {both}\n"
                        "workers = auto\n")
        r = ctl(d.sock, "reload")
        assert "cpu-list" in r.stdout, r.stdout
        want = allowed(d.proc.pid)
        assert want != "0" and all(allowed(int(p)) == want for p in d.worker_pids())
        conf.write_text(f"dataset.fm = {packed_fmnist['test']}\ncpu-list = 1023\n")
        r = ctl(d.sock, "reload", check=False)
        assert r.returncode == 1 and "cpu-list: none of its CPUs" in r.stderr, r
        assert allowed(d.proc.pid) == want, "a refused reload moved the daemon"
        out, _ = run_read(d.sock, "fm", batch=100, epochs=1)
        assert out["samples"] == 10000
    finally:
        d.cleanup()
