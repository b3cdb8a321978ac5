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
import mmap
import os
import re
import shutil
import socket
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


NODES = "/sys/devices/system/node"


def cpu_set(text):
    """A CPU list ("0-3,8") as a set of CPU numbers."""
    out = set()
    for item in filter(None, text.strip().split(",")):
        a, _, b = item.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def policy(pid, mapping=None):
    """The memory policy /proc/PID/numa_maps shows ("prefer:0", "default")
    for the mapping whose line names mapping, or for the stack: a mapping
    of no policy of its own shows the thread's."""
    with open(f"/proc/{pid}/numa_maps") as f:
        for line in f:
            if (mapping or " stack") in line:
                return line.split()[1]
    return None


def ring_in_client(sock, line):
    """ATTACH on a connection kept open; the ring memfd is mapped here, in
    the test (a process of the default policy), and the policy its mapping
    shows is returned with the connection: only the ring's own policy
    (mbind on the daemon's side) can make it anything but "default"."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(60)
    conn.connect(sock)
    conn.sendall(line)
    msg, anc, _, _ = conn.recvmsg(4096, socket.CMSG_SPACE(2 * 4))
    assert msg.startswith(b"OK attach"), msg
    fds = [int.from_bytes(data[i:i + 4], "little") for level, kind, data in anc
           if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
           for i in range(0, len(data) - len(data) % 4, 4)]
    try:
        memfd = next(fd for fd in fds if "ringfeed-ring" in os.readlink(f"/proc/self/fd/{fd}"))
        with mmap.mmap(memfd, os.fstat(memfd).st_size, mmap.MAP_SHARED, mmap.PROT_READ):
            got = policy("self", "ringfeed-ring")
    finally:
        for fd in fds:
            os.close(fd)
    return conn, got


def test_numa_node(packed_fmnist, tmp_path):
    """numa-node = 0 on this one-node machine: the daemon, its threads and
    its workers run on node 0's CPUs and prefer its memory (set_mempolicy,
    seen in numa_maps), and a ring carries the node in every process that
    maps it (mbind); a node that does not exist is refused at start, by
    --check-config and by a reload (the old placement kept); a reload that
    removes the key frees the daemon and restarts the workers without the
    policy, and one that sets it again puts it all back."""
    if not os.path.exists(f"{NODES}/node0") or os.path.exists(f"{NODES}/node7"):
        pytest.skip("needs a machine with a NUMA node 0 and no node 7")
    with open(f"{NODES}/node0/cpulist") as f:
        node0 = f.read().strip()
    mine = os.sched_getaffinity(0)
    if not cpu_set(node0) <= mine:
        pytest.skip("this test runs off some of node 0's CPUs")
    conf = tmp_path / "ringfeedd.conf"
    base = f"dataset.fm = {packed_fmnist['test']}\n"
    attach = b"ATTACH dataset=fm batch=100 name=numa\n"

    def start_refused(text, want):
        conf.write_text(base + text)
        r = subprocess.run([ringfeedd(), "--socket", str(tmp_path / "no.sock"), "--config",
                            str(conf)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and want in r.stderr, r
        r = subprocess.run([ringfeedd(), "--check-config", "--config", str(conf)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and want in r.stderr, r

    start_refused("numa-node = 7\n", "numa-node = 7: NUMA node 7 does not exist")
    start_refused("numa-node = 0\ncpu-list = 1023\n", "have no CPU in common")

    conf.write_text(base + "numa-node = 0\n")
    d = Daemon({}, workers=2, extra=["--config", str(conf)])
    try:
        # started on one CPU: the node's CPUs are the daemon's doing
        os.sched_setaffinity(0, {min(cpu_set(node0))})
        try:
            d.start()
        finally:
            os.sched_setaffinity(0, mine)
        wait_for(lambda: (lambda s: s if s["io.backend"] != "unknown" else None)(d.stats()),
                 "a worker's HELLO")
        main, workers = d.proc.pid, d.worker_pids()
        tasks = os.listdir(f"/proc/{main}/task")
        assert all(allowed(f"{main}/task/{t}") == node0 for t in tasks), tasks
        assert all(allowed(p) == node0 for p in workers), workers
        assert policy(main) == "prefer:0" and all(policy(p) == "prefer:0" for p in workers)
        held, seen = ring_in_client(d.sock, attach)
        assert seen == "prefer:0", "the ring does not carry the node into the client"
        assert policy(main, "ringfeed-ring") == "prefer:0"

        # a node that does not exist: refused, nothing moves
        conf.write_text(base + "numa-node = 7\n")
        r = ctl(d.sock, "reload", check=False)
        assert r.returncode == 1 and "numa-node = 7: NUMA node 7 does not exist" in r.stderr, r
        assert policy(main) == "prefer:0" and allowed(main) == node0
        assert sorted(d.worker_pids()) == sorted(workers), "a refused reload restarted workers"

        def restarted(old, want):
            """New workers only, each of the policy want."""
            pids = d.worker_pids()
            try:
                return pids if pids and not set(pids) & set(old) and \
                    all(policy(p) == want for p in pids) else None
            except OSError:
                return None

        # the key removed: the daemon freed, workers restarted without it
        conf.write_text(base)
        r = ctl(d.sock, "reload")
        assert "numa-node" in r.stdout, r.stdout
        assert policy(main) == "default"
        assert cpu_set(allowed(main)) >= mine
        workers = wait_for(lambda: restarted(workers, "default"), "workers without the policy")
        # (the held ring, the daemon's only one, keeps its node: nothing moves)
        assert policy(main, "ringfeed-ring") == "prefer:0", "the held ring lost its placement"
        conn, seen = ring_in_client(d.sock, attach)
        conn.close()
        assert seen == "default", "a ring made after the key was removed still has a node"

        # and set again: all of it back
        conf.write_text(base + "numa-node = 0\n")
        r = ctl(d.sock, "reload")
        assert "numa-node" in r.stdout, r.stdout
        assert policy(main) == "prefer:0" and allowed(main) == node0
        wait_for(lambda: restarted(workers, "prefer:0"), "workers with the policy again")
        held.close()
        out, _ = run_read(d.sock, "fm", batch=100, epochs=1)
        assert out["samples"] == 10000
    finally:
        d.cleanup()
