"""test_service.py - ringfeedd as a system service (issue 6).

  1. socket activation through systemd-socket-activate: the daemon takes the
     listening socket (fd 3), serves an epoch identical to a daemon that made
     its own socket, leaks the socket to no worker, and leaves the file to
     its owner when it stops;
  2. sd_notify: a Python AF_UNIX datagram listener records READY (after every
     worker said HELLO), STATUS, WATCHDOG pings at WATCHDOG_USEC / 2,
     RELOADING=1 with MONOTONIC_USEC then READY around SIGHUP, STOPPING on
     SIGTERM; an abstract notify socket; WATCHDOG_PID of another process;
  3. SIGHUP under load: good reloads (a dataset added, workers restarted,
     the stream's dataset removed, the worker count changed, the socket path
     "changed"), refused ones (bad syntax, a dataset that does not open),
     while a ringfeed-read runs across them with the digest of a clean run;
     a removed dataset closed once its client left, its slot reused; reloads
     back to back, workers retired before they said HELLO;
  4. SIGTERM under load, one worker SIGSTOPped so it cannot die by SIGTERM:
     the daemon exits 0 within 10 s, no worker left, socket removed;
  5. access control: SO_PEERCRED refusals for another uid (setpriv), allow-uid
     and allow-gid (supplementary groups too) applied by a reload, the
     socket file's mode and group as configured;
  6. the units: installed by `meson install` into a temporary root,
     `systemd-analyze verify` silent, `systemd-analyze security --offline`
     exposure at most 2.0 (printed), the example config accepted, the
     library's pkg-config file usable;
  7. METRICS parses as strict Prometheus text, with per-worker and
     per-client labelled series.

No test asserts a duration but the generous SIGTERM bound; waits poll with a
bound (the suite also runs in an ASan build on 2 cores).
"""
import contextlib
import grp
import json
import math
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BUILD, attach_held, ctl, pid_children, proc_alive, wait_for, ctl_tool, raw_request, read_tool, ringfeedd, run_read, unix_listening

WAIT = 120.0
READ_TIMEOUT = 600



def monotonic_us():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000




def stats(sock):
    reply = raw_request(sock, b"STATS\n").decode()
    lines = reply.splitlines()
    assert lines and lines[0].startswith("OK "), reply
    return dict(line.partition(" ")[::2] for line in lines[1:])


def datasets(sock):
    reply = raw_request(sock, b"DATASETS\n").decode().splitlines()
    assert reply[0].startswith("OK "), reply
    return sorted(line.split()[0] for line in reply[1:])


def public_dir():
    """A temporary folder every user may traverse (for the nobody tests)."""
    d = tempfile.mkdtemp(prefix="rfsvc-")
    os.chmod(d, 0o755)
    return d


class Notify:
    """A NOTIFY_SOCKET listener: records (monotonic time, {VAR: VALUE}, raw)
    for every datagram, from a thread, so pings are timed as they arrive."""

    def __init__(self, dirpath, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"ringfeed-test-{os.getpid()}-{id(self)}"
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:
            self.address = os.path.join(dirpath, "notify.sock")
            self.sock.bind(self.address)
        self.msgs = []
        self.lock = threading.Lock()
        self.done = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done:
            r, _, _ = select.select([self.sock], [], [], 0.05)
            if not r:
                continue
            data = self.sock.recv(65536)
            now = time.monotonic()
            fields = {}
            for line in data.decode().split("\n"):
                k, _, v = line.partition("=")
                fields[k] = v
            with self.lock:
                self.msgs.append((now, fields, data.decode()))

    def snapshot(self):
        with self.lock:
            return list(self.msgs)

    def wait(self, key, start=0, pred=None, timeout=WAIT):
        """Waits for a message with key (after index start); returns (index, msg)."""
        def found():
            for i, m in enumerate(self.snapshot()[start:], start):
                if key in m[1] and (pred is None or pred(m[1])):
                    return (i, m)
            return None
        return wait_for(found, f"notification {key}", timeout)

    def trace(self):
        """The messages but WATCHDOG pings, and a count of those."""
        out, pings = [], 0
        for t, f, raw in self.snapshot():
            if raw == "WATCHDOG=1":
                pings += 1
            else:
                out.append(raw.replace("\n", " | "))
        return out, pings

    def close(self):
        self.done = True
        self.thread.join(5)
        self.sock.close()
        if not self.address.startswith("@"):
            with contextlib.suppress(OSError):
                os.unlink(self.address)


class Svc:
    """ringfeedd (or a wrapper that execs it) with its own folder, log and
    process group; always killed at the end by the fixture."""

    def __init__(self, argv, dirpath, env=None):
        self.dir = dirpath
        self.log_path = os.path.join(self.dir, "ringfeedd.log")
        self.argv = [str(a) for a in argv]
        self.env = dict(os.environ, **(env or {}))
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID"):
            if not env or k not in env:
                self.env.pop(k, None)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log, env=self.env,
                                     start_new_session=True)

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_log(self, text, count=1):
        return wait_for(lambda: self.read_log().count(text) >= count, f"log line {text!r}")

    def wait_up(self, sock, workers=1):
        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode}:\n{self.read_log()}")
            try:
                st = stats(sock)
            except OSError:
                return False
            # alive counts workers still starting; up means they said hello
            ready = sum(1 for k, v in st.items()
                        if k.startswith("workers.") and k.endswith(".state") and v == "ready")
            return int(st.get("workers.alive", 0)) >= workers and ready >= workers
        wait_for(up, "the daemon and its workers to be up")

    def wait_exit(self, timeout=WAIT):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"did not exit in {timeout} s:\n{self.read_log()[-3000:]}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self.log.close()


@pytest.fixture
def svc():
    made, dirs, notifies = [], [], []

    class Factory:
        def dir(self):
            d = public_dir()
            dirs.append(d)
            return d

        def start(self, argv, dirpath, env=None):
            s = Svc(argv, dirpath, env)
            made.append(s)
            return s

        def notify(self, dirpath, abstract=False):
            n = Notify(dirpath, abstract)
            notifies.append(n)
            return n

    yield Factory()
    for s in made:
        s.kill()
    for n in notifies:
        n.close()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def write_conf(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def read_digest(sock, dataset, batch, epochs):
    out, _ = run_read(sock, dataset, batch=batch, epochs=epochs, timeout=READ_TIMEOUT)
    return out


# ---- 1. socket activation ---------------------------------------------------

def listening_inode(path):
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            parts = line.split()
            if len(parts) >= 8 and parts[7] == path and parts[3] == "00010000":
                return parts[6]
    return None


def fd_targets(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return out


def environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)


def test_socket_activation(svc, packed_fmnist):
    activate = shutil.which("systemd-socket-activate")
    if not activate:
        pytest.skip("systemd-socket-activate is not installed")
    d = svc.dir()
    sock = os.path.join(d, "activated.sock")
    a = svc.start([activate, "-l", sock, ringfeedd(), "--workers", "2",
                   "--dataset", f"fmnist={packed_fmnist['test']}"], d)
    # the file appears at bind(), before listen(): a connect in between is refused
    wait_for(lambda: unix_listening(sock), "systemd-socket-activate's socket listening")
    # the first connection starts the daemon, which takes the socket on fd 3
    assert raw_request(sock, b"PING\n", timeout=WAIT).startswith(b"OK pong")
    a.wait_up(sock, workers=2)
    log = a.read_log()
    assert "socket-activated" in log, log
    out = read_digest(sock, "fmnist", 256, 1)
    assert out["samples"] == 10000

    # the same epoch from a daemon that made its own socket
    d2 = svc.dir()
    sock2 = os.path.join(d2, "own.sock")
    plain = svc.start([ringfeedd(), "--socket", sock2, "--workers", "2",
                       "--dataset", f"fmnist={packed_fmnist['test']}"], d2)
    plain.wait_up(sock2, workers=2)
    assert read_digest(sock2, "fmnist", 256, 1)["digest"] == out["digest"]

    # no worker holds the listening socket or sees the activation variables
    inode = listening_inode(sock)
    assert inode, "the activated socket is not in /proc/net/unix"
    daemon_pid = a.proc.pid  # systemd-socket-activate execs the daemon in place
    assert f"socket:[{inode}]" in fd_targets(daemon_pid)
    workers = pid_children(daemon_pid)
    assert len(workers) == 2, workers
    for w in workers:
        assert f"socket:[{inode}]" not in fd_targets(w), f"worker {w} inherited the listener"
        env = environ(w)
        assert b"LISTEN_FDS" not in env and b"LISTEN_PID" not in env, env.keys()

    # SIGTERM: the daemon stops, the socket file stays (it is the activator's)
    a.proc.send_signal(signal.SIGTERM)
    assert a.wait_exit() == 0, a.read_log()
    assert os.path.exists(sock), "the daemon removed a socket it did not create"
    assert not any(proc_alive(w) for w in workers)
    plain.proc.send_signal(signal.SIGTERM)
    assert plain.wait_exit() == 0
    assert not os.path.exists(sock2), "the daemon left the socket it created"


# ---- 2. sd_notify -----------------------------------------------------------

def test_notify_ready_watchdog_reload_stop(svc, packed_fmnist):
    d = svc.dir()
    sock = os.path.join(d, "rf.sock")
    conf = os.path.join(d, "ringfeedd.conf")
    write_conf(conf, f"dataset.fmnist = {packed_fmnist['test']}\nworkers = 2\n")
    n = svc.notify(d)
    s = svc.start([ringfeedd(), "--config", conf, "--socket", sock], d,
                  env={"NOTIFY_SOCKET": n.address, "WATCHDOG_USEC": "200000"})
    i, (t_ready, ready, _) = n.wait("READY")
    assert ready["READY"] == "1"
    # READY comes once every worker said HELLO: its STATUS says so
    assert "workers=2/2" in ready.get("STATUS", ""), ready
    st = stats(sock)
    assert st["workers.alive"] == "2"
    workers = pid_children(s.proc.pid)
    for w in workers:
        assert b"NOTIFY_SOCKET" not in environ(w), "a worker inherited NOTIFY_SOCKET"

    # WATCHDOG=1 about every 100 ms: count them over a second, widely
    time.sleep(1.2)
    t0 = t_ready + 0.1
    pings = [t for t, f, raw in n.snapshot() if raw == "WATCHDOG=1" and t0 <= t < t0 + 1.0]
    assert 3 <= len(pings) <= 30, f"{len(pings)} pings in a second at WATCHDOG_USEC=200000"

    # SIGHUP: RELOADING=1 with MONOTONIC_USEC (now), then READY=1
    before = monotonic_us()
    s.proc.send_signal(signal.SIGHUP)
    j, (_, rel, _) = n.wait("RELOADING", start=i + 1)
    after = monotonic_us()
    assert rel["RELOADING"] == "1"
    assert before <= int(rel["MONOTONIC_USEC"]) <= after, (before, rel, after)
    k, (_, again, _) = n.wait("READY", start=j + 1)
    assert again["READY"] == "1"

    # STOPPING=1 on SIGTERM
    s.proc.send_signal(signal.SIGTERM)
    n.wait("STOPPING", start=k + 1)
    assert s.wait_exit() == 0
    trace, pings_total = n.trace()
    print("notify trace (WATCHDOG=1 pings left out: %d):" % pings_total)
    for line in trace:
        print("  " + line)
    # the order of one start/reload/stop
    kinds = [next(k for k in ("READY", "RELOADING", "STOPPING", "STATUS") if k in line)
             for line in trace]
    seq = [k for k in kinds if k != "STATUS"]
    assert seq == ["READY", "RELOADING", "READY", "STOPPING"], trace


def test_notify_abstract_and_watchdog_for_another_pid(svc, packed_fmnist):
    d = svc.dir()
    sock = os.path.join(d, "rf.sock")
    n = svc.notify(d, abstract=True)
    s = svc.start([ringfeedd(), "--socket", sock, "--workers", "1",
                   "--dataset", f"fmnist={packed_fmnist['test']}"], d,
                  env={"NOTIFY_SOCKET": n.address, "WATCHDOG_USEC": "100000",
                       "WATCHDOG_PID": "1"})
    i, (t, ready, _) = n.wait("READY")
    time.sleep(0.5)
    assert not any(raw == "WATCHDOG=1" for _, _, raw in n.snapshot()), \
        "pinged for a watchdog that was another process's"
    s.proc.send_signal(signal.SIGTERM)
    n.wait("STOPPING", start=i + 1)
    assert s.wait_exit() == 0


# ---- 3. SIGHUP under load -----------------------------------------------------

EPOCHS = 10  # of Fashion-MNIST train at batch 32: seconds of stream to reload under

def test_reload_under_load(svc, packed_fmnist):
    train, test = packed_fmnist["train"], packed_fmnist["test"]
    d = svc.dir()
    sock = os.path.join(d, "rf.sock")
    conf = os.path.join(d, "ringfeedd.conf")
    base = f"socket = {sock}\nworkers = 2\n"
    write_conf(conf, base + f"dataset.fmnist = {train}\n")
    n = svc.notify(d)
    s = svc.start([ringfeedd(), "--config", conf], d, env={"NOTIFY_SOCKET": n.address})
    last, _ = n.wait("READY")
    s.wait_up(sock, workers=2)

    clean = read_digest(sock, "fmnist", 32, EPOCHS)
    clean1 = read_digest(sock, "fmnist", 256, 1)
    reader = subprocess.Popen([read_tool(), "--socket", sock, "--dataset", "fmnist",
                               "--batch", "32", "--epochs", str(EPOCHS), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def reload(text):
        """Writes the config, SIGHUPs, waits for READY; returns that message."""
        nonlocal last
        write_conf(conf, text)
        s.proc.send_signal(signal.SIGHUP)
        j, _ = n.wait("RELOADING", start=last + 1)
        last, (_, msg, _) = n.wait("READY", start=j + 1)
        return msg

    def attached():
        return int(stats(sock)["clients.attached"]) >= 1 and reader.poll() is None

    def reader_batches():
        return max([int(v) for k, v in stats(sock).items()
                    if k.startswith("clients.") and k.endswith(".batches")] or [0])

    wait_for(lambda: reader_batches() > 20, "the reader to be mid-stream")

    # a. add a dataset, change log-level: the workers restart under the stream
    spawned = int(stats(sock)["workers.spawned"])
    msg = reload(base + f"dataset.fmnist = {train}\ndataset.extra = {test}\nlog-level = debug\n")
    assert "reload failed" not in msg.get("STATUS", ""), msg
    assert attached(), "the reader finished before the reload: the test proves nothing"
    assert datasets(sock) == ["extra", "fmnist"]
    assert int(stats(sock)["workers.spawned"]) >= spawned + 2
    s.wait_log("restarting the workers")

    # b. a file that does not parse: refused, the running config stays
    msg = reload(base + f"dataset.fmnist = {train}\nworkerz = 3\n")
    assert "reload failed" in msg["STATUS"] and "workerz" in msg["STATUS"], msg
    s.wait_log("reload refused")
    assert 'unknown key "workerz"' in s.read_log()
    assert datasets(sock) == ["extra", "fmnist"]
    assert stats(sock)["reloads.failed"] == "1"

    # c. a dataset that does not open: refused, naming it
    msg = reload(base + f"dataset.fmnist = {train}\ndataset.ghost = {d}/nowhere\n")
    assert "reload failed" in msg["STATUS"] and "dataset.ghost" in msg["STATUS"], msg
    assert datasets(sock) == ["extra", "fmnist"]

    # d. the stream's dataset removed, 3 workers, a new socket path (ignored)
    other = os.path.join(d, "moved.sock")
    msg = reload(f"socket = {other}\nworkers = 3\ndataset.extra = {test}\n")
    assert "reload failed" not in msg.get("STATUS", ""), msg
    assert attached(), "the reader finished before the reload: the test proves nothing"
    assert datasets(sock) == ["extra"]
    assert raw_request(sock, b"ATTACH dataset=fmnist\n").startswith(b"ERR no-dataset")
    assert stats(sock)["workers.target"] == "3"
    s.wait_log("the socket cannot change while running")
    assert not os.path.exists(other)

    # the reader ran across all of it and got exactly the clean stream
    out, err = reader.communicate(timeout=READ_TIMEOUT)
    assert reader.returncode == 0, err
    got = json.loads(out.strip().splitlines()[-1])
    assert got["digest"] == clean["digest"]
    assert got["reconnects"] == 0

    # its dataset, removed, is closed once no client reads it
    s.wait_log("removed by a reload and no client reads it now; closed")
    # a new dataset takes the freed slot; workers start with it
    reload(f"socket = {sock}\nworkers = 2\ndataset.extra = {test}\ndataset.again = {train}\n")
    assert datasets(sock) == ["again", "extra"]
    assert read_digest(sock, "again", 256, 1)["digest"] == clean1["digest"]
    assert read_digest(sock, "extra", 256, 1)["samples"] == 10000
    st = stats(sock)
    assert st["workers.deaths"] == "0", s.read_log()
    assert st["reloads"] == "5" and st["reloads.failed"] == "2"
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit() == 0


def test_reload_storm(svc, packed_fmnist):
    """Reloads back to back, each restarting the workers, then a pool grown
    and shrunk in one breath: workers retired before their HELLO arrives are
    retired, not killed as misbehaving (regression: a HELLO from a RETIRING
    worker was "a bad HELLO"), and the pool ends as asked."""
    d = svc.dir()
    sock = os.path.join(d, "rf.sock")
    conf = os.path.join(d, "ringfeedd.conf")
    base = f"dataset.fmnist = {packed_fmnist['test']}\nworkers = 2\n"
    write_conf(conf, base)
    n = svc.notify(d)
    s = svc.start([ringfeedd(), "--config", conf, "--socket", sock], d,
                  env={"NOTIFY_SOCKET": n.address})
    n.wait("READY")
    for i in range(6):
        # the next SIGHUP as soon as this reload has started its workers (one
        # by one: signals sent together may merge into one)
        write_conf(conf, base + f"log-level = {('debug', 'info')[i % 2]}\n")
        s.proc.send_signal(signal.SIGHUP)
        s.wait_log("reload done", i + 1)
    wait_for(lambda: sum("READY" in f for _, f, _ in n.snapshot()) >= 2, "READY after reloads")
    # a pool grown and shrunk at once: the new workers retire before HELLO
    replies = raw_request(sock, b"WORKERS 4\nWORKERS 2\n").decode()
    assert replies == "OK workers 4\nOK workers 2\n", replies
    wait_for(lambda: stats(sock)["workers.alive"] == "2", "the pool to settle")
    st = stats(sock)
    assert st["reloads"] == "6" and st["workers.deaths"] == "0", s.read_log()
    assert "bad HELLO" not in s.read_log()
    assert read_digest(sock, "fmnist", 256, 1)["samples"] == 10000
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit() == 0


# ---- 4. SIGTERM under load ------------------------------------------------------

def test_sigterm_under_load(svc, packed_fmnist):
    d = svc.dir()
    sock = os.path.join(d, "rf.sock")
    s = svc.start([ringfeedd(), "--socket", sock, "--workers", "2",
                   "--dataset", f"fmnist={packed_fmnist['train']}"], d)
    s.wait_up(sock, workers=2)
    reader = subprocess.Popen([read_tool(), "--socket", sock, "--dataset", "fmnist",
                               "--batch", "32", "--epochs", "1000", "--json",
                               "--reconnect-ms", "200"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: int(stats(sock)["total.batches"]) > 50, "the reader to be mid-stream")
        workers = pid_children(s.proc.pid)
        assert len(workers) == 2
        # one worker is stopped, as a wedged one would be.  (The kernel still
        # ends a stopped process on a fatal signal with no handler, so
        # SIGTERM or the 3 s SIGKILL deadline may be what ends it.)
        os.kill(workers[0], signal.SIGSTOP)
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        rc = s.wait_exit(timeout=30)
        took = time.monotonic() - t0
        assert rc == 0, s.read_log()
        assert took < 10, f"took {took:.1f} s to stop"
        assert not any(proc_alive(w) for w in workers), "a worker outlived the daemon"
        assert not os.path.exists(sock), "the socket file was left behind"
        log = s.read_log()
        assert "every worker has exited" in log, log
        # the client was told (RING_CLOSED, -ESHUTDOWN: "stopping") and does not hang
        _, err = reader.communicate(timeout=WAIT)
        assert reader.returncode != 0 and "stopping" in err, err
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()


# ---- 5. access control -------------------------------------------------------------

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534"]


def as_nobody(sock, groups=None):
    cmd = NOBODY + (["--clear-groups"] if groups is None else [f"--groups={groups}"])
    return subprocess.run(cmd + [ctl_tool(), "--socket", sock, "ping"],
                          capture_output=True, text=True, timeout=60)


def test_access_control(svc, packed_fmnist):
    if not shutil.which("setpriv") or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to act as another user")
    d = svc.dir()
    sock = os.path.join(d, "rf.sock")
    conf = os.path.join(d, "ringfeedd.conf")
    base = f"socket = {sock}\nworkers = 1\ndataset.fmnist = {packed_fmnist['test']}\n"
    write_conf(conf, base + "socket-mode = 0666\n")
    s = svc.start([ringfeedd(), "--config", conf], d)
    s.wait_up(sock)
    sb = os.stat(sock)
    assert stat.S_ISSOCK(sb.st_mode) and stat.S_IMODE(sb.st_mode) == 0o666
    assert sb.st_gid == os.getegid()

    # the kernel lets nobody connect (0666); the daemon does not
    r = as_nobody(sock)
    assert r.returncode != 0 and "(denied)" in r.stderr, r
    assert "uid 65534" in r.stderr
    with socket.socket(socket.AF_UNIX) as raw:
        raw.connect(sock)
    assert ctl(sock, "ping").stdout.strip() == "pong"  # root: always
    assert int(stats(sock)["connections.denied"]) >= 1
    s.wait_log("denied a control connection from pid")

    # allow-gid, by a reload: a supplementary group is enough
    write_conf(conf, base + "socket-mode = 0666\nallow-gid = 4242\n")
    s.proc.send_signal(signal.SIGHUP)
    s.wait_log("reload done")
    assert as_nobody(sock, groups="4242").returncode == 0
    r = as_nobody(sock)
    assert r.returncode != 0 and "(denied)" in r.stderr, r
    # allow-uid
    write_conf(conf, base + "socket-mode = 0666\nallow-uid = 65534\n")
    s.proc.send_signal(signal.SIGHUP)
    s.wait_log("reload done", 2)
    assert as_nobody(sock).returncode == 0
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit() == 0

    # socket-mode and socket-group when the daemon makes the socket; with no
    # allow list, members of the socket's group are in
    group = grp.getgrgid(65534).gr_name
    write_conf(conf, base + f"socket-mode = 0660\nsocket-group = {group}\n")
    s = svc.start([ringfeedd(), "--config", conf], d)
    s.wait_up(sock)
    sb = os.stat(sock)
    assert stat.S_IMODE(sb.st_mode) == 0o660 and sb.st_gid == 65534, oct(sb.st_mode)
    assert as_nobody(sock).returncode == 0, "a member of the socket's group was refused"
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=4243", "--clear-groups",
                        ctl_tool(), "--socket", sock, "ping"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0  # the file mode keeps it out (EACCES) before the daemon does
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit() == 0

    # the default mode is 0660
    write_conf(conf, base)
    s = svc.start([ringfeedd(), "--config", conf], d)
    s.wait_up(sock)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o660
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit() == 0


# ---- 6. the units ----------------------------------------------------------------

EXPOSURE_MAX = 2.0


def install_root():
    """`meson install` into a temporary root that also holds what
    systemd-analyze --root needs to resolve (the host's units, /bin/kill)."""
    root = tempfile.mkdtemp(prefix="rfroot-")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet",
                        "--destdir", root], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    os.makedirs(os.path.join(root, "usr/lib/systemd"), exist_ok=True)
    shutil.copytree("/usr/lib/systemd/system", os.path.join(root, "usr/lib/systemd/system"),
                    symlinks=True, dirs_exist_ok=True)
    os.makedirs(os.path.join(root, "usr/bin"), exist_ok=True)
    shutil.copy2(shutil.which("kill") or "/bin/kill", os.path.join(root, "usr/bin/kill"))
    if not os.path.lexists(os.path.join(root, "bin")):
        os.symlink("usr/bin", os.path.join(root, "bin"))
    return root


def find_installed(root, name):
    for dirpath, _, files in os.walk(root):
        if name in files:
            return os.path.join(dirpath, name)
    return None


def test_units_verify_and_security(svc, packed_fmnist):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    root = install_root()
    try:
        service = find_installed(root, "ringfeedd.service")
        assert service, "ringfeedd.service was not installed"
        unitdir = os.path.dirname(service)
        rel = "/" + os.path.relpath(unitdir, root)
        for name in ("ringfeedd.socket", "ringfeedd.conf", "ringfeed.pc", "ringfeed.h",
                     "libringfeed.so", "ringfeedd", "ringfeedctl", "ringfeed-read",
                     "ringfeed-pack"):
            assert find_installed(root, name), f"{name} was not installed"
        for kind in ("sysusers.d", "tmpfiles.d"):
            assert any(dp.endswith("/" + kind) and "ringfeed.conf" in files
                       for dp, _, files in os.walk(root)), f"no {kind}/ringfeed.conf"
        with open(service) as f:
            text = f.read()
        exec_start = re.search(r"^ExecStart=(\S+) --config (\S+)$", text, re.M)
        assert exec_start, text
        assert os.access(root + exec_start.group(1), os.X_OK), exec_start.group(1)
        assert os.path.exists(root + exec_start.group(2)), exec_start.group(2)
        assert re.search(r"^Type=notify$", text, re.M)
        # reload: the config checked, then RELOAD, whose answer fails a refused one
        check = re.search(r"^ExecReload=(\S+) --check-config --config (\S+)$", text, re.M)
        assert check and check.group(1) == exec_start.group(1), text
        assert check.group(2) == exec_start.group(2), text
        rel_ctl = re.search(r"^ExecReload=(\S+) --socket (\S+) reload$", text, re.M)
        assert rel_ctl and os.access(root + rel_ctl.group(1), os.X_OK), text
        for line in ("RestartPreventExitStatus=2", "OOMPolicy=continue",
                     "StartLimitIntervalSec=60s", "StartLimitBurst=5"):
            assert re.search(rf"^{line}$", text, re.M), line

        # systemd-analyze verify: nothing to say (its Documentation= check
        # runs man(1), pointed at the pages installed into the root)
        mandir = os.path.dirname(os.path.dirname(find_installed(root, "ringfeedd.8")))
        r = subprocess.run(["systemd-analyze", "verify", f"--root={root}",
                            f"{rel}/ringfeedd.service", f"{rel}/ringfeedd.socket"],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, MANPATH=mandir))
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr

        # the instances' templates: ringfeedd@NAME reads NAME.conf, listens in
        # /run/ringfeed/NAME/, labels its metrics daemon="NAME"; the same
        # hardening as the node's daemon (one file makes both)
        with open(os.path.join(root + rel, "ringfeedd@.service")) as f:
            inst = f.read()
        conf_dir = os.path.dirname(exec_start.group(2))
        assert re.search(rf"^ExecStart={re.escape(exec_start.group(1))} --config "
                         rf"{re.escape(conf_dir)}/%i\.conf --name %i --socket "
                         r"/run/ringfeed/%i/ringfeed\.sock$", inst, re.M), inst
        assert re.search(r"^RuntimeDirectory=ringfeed/%i$", inst, re.M), inst
        assert re.search(r"^Requires=ringfeedd@%i\.socket$", inst, re.M), inst
        strip = lambda t: [ln for ln in t.splitlines()
                           if not re.match(r"(#|Description=|ExecStart=|ExecReload=|Requires=|"
                                           r"After=|RuntimeDirectory=|Also=)", ln)]
        assert strip(inst) == strip(text), "the template's other lines differ"
        with open(os.path.join(root + rel, "ringfeedd@.socket")) as f:
            assert re.search(r"^ListenStream=/run/ringfeed/%i/ringfeed\.sock$", f.read(), re.M)
        os.symlink("ringfeedd@.service", os.path.join(root + rel, "ringfeedd@gpu0.service"))
        os.symlink("ringfeedd@.socket", os.path.join(root + rel, "ringfeedd@gpu0.socket"))
        r = subprocess.run(["systemd-analyze", "verify", f"--root={root}",
                            f"{rel}/ringfeedd@gpu0.service", f"{rel}/ringfeedd@gpu0.socket"],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, MANPATH=mandir))
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr

        # systemd-analyze security: the exposure figure, at most 2.0
        cmd = ["systemd-analyze", "security", "--offline=true", f"--root={root}",
               f"--threshold={int(EXPOSURE_MAX * 10)}", f"{rel}/ringfeedd.service"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        m = re.search(r"Overall exposure level for ringfeedd\.service: ([0-9.]+) (\w+)", r.stdout)
        assert m, r.stdout + r.stderr
        print(f"$ {' '.join(cmd)}\n-> exposure {m.group(1)} {m.group(2)}")
        assert float(m.group(1)) <= EXPOSURE_MAX
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr

        # the shipped config serves nothing (a fresh install starts cleanly), the
        # example sits beside it, and installing again keeps an edited config
        with open(root + exec_start.group(2)) as f:
            shipped = f.read()
        assert not re.search(r"^dataset\.", shipped, re.M), "the shipped config serves a dataset"
        assert os.path.exists(root + exec_start.group(2) + ".example")
        with open(root + exec_start.group(2), "a") as f:
            f.write("# edited by the operator\n")
        r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet",
                            "--destdir", root], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(root + exec_start.group(2)) as f:
            assert f.read().endswith("# edited by the operator\n"), "meson install replaced it"
        for doc in ("operating.md", "ringfeed-alerts.yml", "ringfeed.yaml"):
            assert find_installed(root, doc), f"{doc} was not installed"

        # the example config is one the daemon accepts (its dataset swapped in)
        d = svc.dir()
        sock = os.path.join(d, "rf.sock")
        s = svc.start([ringfeedd(), "--config", root + exec_start.group(2), "--socket", sock,
                       "--workers", "1", "--dataset", f"fmnist={packed_fmnist['test']}"], d)
        s.wait_up(sock)
        assert datasets(sock) == ["fmnist"]
        s.proc.send_signal(signal.SIGTERM)
        assert s.wait_exit() == 0

        # the pkg-config file and header build a client
        pkgconfig = shutil.which("pkg-config")
        if pkgconfig:
            pcdir = os.path.dirname(find_installed(root, "ringfeed.pc"))
            env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_SYSROOT_DIR=root)
            flags = subprocess.run([pkgconfig, "--cflags", "--libs", "ringfeed"], env=env,
                                   capture_output=True, text=True, check=True).stdout.split()
            src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               "pkgconfig_client.c")
            r = subprocess.run(["cc", src, "-o", os.path.join(d, "client")] + flags,
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- 7. METRICS --------------------------------------------------------------------

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_labels(text):
    """{...} body: name="value" pairs, comma separated; returns a dict."""
    labels, i = {}, 0
    while i < len(text):
        m = re.compile(r"([^=]*)=\"").match(text, i)
        assert m, f"bad label at {text[i:]!r}"
        name = m.group(1)
        assert LABEL_NAME.match(name) and not name.startswith("__"), name
        i = m.end()
        value = []
        while True:
            assert i < len(text), f"unterminated label value in {text!r}"
            ch = text[i]
            if ch == "\\":
                assert text[i + 1] in '\\"n', f"bad escape in {text!r}"
                value.append({"\\": "\\", '"': '"', "n": "\n"}[text[i + 1]])
                i += 2
            elif ch == '"':
                i += 1
                break
            else:
                assert ch != "\n"
                value.append(ch)
                i += 1
        assert name not in labels, f"label {name} twice"
        labels[name] = "".join(value)
        if i < len(text):
            assert text[i] == ",", f"expected ',' in {text!r}"
            i += 1
    return labels


def parse_prometheus(text):
    """A strict reader of the text format: returns {family: {"type", "help",
    "samples": [(labels, value)]}} (a histogram's samples name their series,
    _bucket, _sum or _count, in a "__series__" label); asserts everything
    it checks."""
    families, order, series = {}, [], set()
    current = None
    for ln, line in enumerate(text.split("\n"), 1):
        if line == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            assert len(parts) >= 3 and parts[0] == "#" and parts[1] in ("HELP", "TYPE"), \
                f"line {ln}: stray comment {line!r}"
            name = parts[2]
            assert METRIC_NAME.match(name), f"line {ln}: bad name {name!r}"
            fam = families.setdefault(name, {"type": None, "help": None, "samples": []})
            if name not in order:
                order.append(name)
            assert current in (None, name) or not fam["samples"], \
                f"line {ln}: {name} interleaved"
            current = name
            if parts[1] == "HELP":
                assert fam["help"] is None, f"line {ln}: second HELP for {name}"
                fam["help"] = parts[3] if len(parts) > 3 else ""
                assert re.fullmatch(r"([^\\\n]|\\\\|\\n)*", fam["help"]), f"line {ln}: HELP escapes"
            else:
                assert fam["type"] is None, f"line {ln}: second TYPE for {name}"
                assert not fam["samples"], f"line {ln}: TYPE after samples"
                assert len(parts) == 4 and parts[3] in TYPES, f"line {ln}: bad TYPE"
                fam["type"] = parts[3]
            continue
        m = re.match(r"([^{ ]+)(\{(.*)\})? (\S+)( -?\d+)?\Z", line)
        assert m, f"line {ln}: not a sample: {line!r}"
        name, labels = m.group(1), parse_labels(m.group(3) or "")
        assert METRIC_NAME.match(name), f"line {ln}: bad name {name!r}"
        value = m.group(4)
        assert value in ("NaN", "+Inf", "-Inf") or not math.isnan(float(value)), value
        fam_name = name
        # a histogram's series: <family>_bucket{le=...}, _sum, _count
        hist = re.fullmatch(r"(.*)_(bucket|sum|count)", name)
        if name not in families and hist and \
                families.get(hist.group(1), {}).get("type") == "histogram":
            fam_name = hist.group(1)
            assert (hist.group(2) == "bucket") == ("le" in labels), f"line {ln}: le on {name}"
        fam = families.get(fam_name)
        assert fam and fam["type"], f"line {ln}: {name} has no TYPE before its samples"
        assert current == fam_name, f"line {ln}: {name} sampled outside its family block"
        key = (name, tuple(sorted(labels.items())))
        assert key not in series, f"line {ln}: duplicate series {key}"
        series.add(key)
        fam["samples"].append((labels if fam_name == name else dict(labels, __series__=name),
                               float(value)))
    for name, fam in families.items():
        assert fam["type"], f"{name}: no TYPE"
        assert fam["help"] is not None, f"{name}: no HELP"
        if fam["type"] == "counter":
            assert name.endswith("_total"), f"counter {name} does not end in _total"
            assert all(v >= 0 for _, v in fam["samples"]), name
    return families


def test_metrics_prometheus(svc, packed_fmnist):
    d = svc.dir()
    sock = os.path.join(d, "rf.sock")
    s = svc.start([ringfeedd(), "--socket", sock, "--workers", "2",
                   "--dataset", f"fmnist={packed_fmnist['test']}"], d)
    s.wait_up(sock, workers=2)
    conn = attach_held(sock, b"ATTACH dataset=fmnist batch=64 rank=1 world=2 "
                                 b"name=probe:a/b depth=4\n")
    try:
        wait_for(lambda: int(stats(sock)["total.batches"]) >= 4, "the ring to fill")
        reply = raw_request(sock, b"METRICS\n").decode()
        head, _, body = reply.partition("\n")
        m = re.fullmatch(r"OK (\d+)", head)
        assert m and int(m.group(1)) == body.count("\n"), head
        fams = parse_prometheus(body)

        assert fams["ringfeed_build_info"]["samples"][0][0]["version"]
        assert fams["ringfeed_batches_total"]["type"] == "counter"
        assert fams["ringfeed_workers_alive"]["samples"] == [({}, 2.0)]
        assert fams["ringfeed_clients_attached"]["samples"] == [({}, 1.0)]
        jobs = fams["ringfeed_worker_jobs_total"]["samples"]
        assert sorted(lbl["worker"] for lbl, _ in jobs) == ["0", "1"]
        assert sum(v for _, v in jobs) >= 4
        info = fams["ringfeed_worker_info"]["samples"]
        assert {lbl["state"] for lbl, _ in info} == {"ready"}
        (labels, batches), = fams["ringfeed_client_batches_total"]["samples"]
        assert labels == {"dataset": "fmnist", "name": "probe:a/b", "rank": "1", "world": "2",
                          "uid": str(os.getuid())}, labels
        (info, _), = fams["ringfeed_client_info"]["samples"]
        assert info["id"] and info["name"] == "probe:a/b", info
        assert batches == 4  # depth 4, nothing released
        (_, ring), = fams["ringfeed_client_ring_bytes"]["samples"]
        assert ring > 0
        assert fams["ringfeed_client_ready_batches"]["samples"][0][1] == 4

        # ringfeedctl metrics prints it; --json keys the labelled series
        out = ctl(sock, "metrics").stdout
        parse_prometheus(out)
        assert 'ringfeed_client_batches_total{dataset="fmnist",name="probe:a/b",' in out
        j = ctl(sock, "metrics", json_out=True)["metrics"]
        key = next(k for k in j if k.startswith("ringfeed_client_batches_total{"))
        assert j[key] == 4
    finally:
        conn.close()
    wait_for(lambda: int(stats(sock)["clients.attached"]) == 0, "the client to detach")
    fams = parse_prometheus(ctl(sock, "metrics").stdout)
    assert fams["ringfeed_client_batches_total"]["samples"] == []
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit() == 0
