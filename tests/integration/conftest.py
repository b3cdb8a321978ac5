"""Shared fixtures for ringfeed's integration tests.

The tests drive the built binaries.  meson passes the build folder in
RINGFEED_BUILD_DIR; every binary is found under it.  A daemon fixture starts
a real ringfeedd on a temporary socket and always stops it (SIGTERM, then
SIGKILL), so a failing test never leaves a daemon or its workers behind.
"""
import collections
import contextlib
import gzip
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest

# a file whose every test skipped exits 77 (a skip), not 0 (a pass)
pytest_plugins = ["skipped_is_77"]

BUILD = os.environ.get("RINGFEED_BUILD_DIR", os.path.join(os.path.dirname(__file__), "../../build"))
FMNIST = "/usr/share/datasets/fashion-mnist"


def wait_for(pred, what, timeout=120.0, interval=0.02):
    """Polls pred() until it returns something true; returns that."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def proc_alive(pid):
    """pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_children(pid):
    """Live (not zombie) children of pid, from /proc."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            kids.append(int(d))
    return kids


def binary(rel):
    path = os.path.join(BUILD, rel)
    if not os.path.exists(path):
        # a test that cannot find what it tests is mis-wired: fail, never skip
        pytest.fail(f"{path} is not built (RINGFEED_BUILD_DIR={BUILD})", pytrace=False)
    return path


def ringfeedd():
    return binary("daemon/ringfeedd")


def pack_tool():
    return binary("tools/ringfeed-pack")


# ringfeed-pack and tests/dump_dataset for the packer's tests (test_pack.py,
# test_pack_formats.py, test_writer.py), overridable to test other builds
PACK = os.environ.get("RINGFEED_PACK", os.path.join(BUILD, "tools/ringfeed-pack"))
DUMP = os.environ.get("RINGFEED_DUMP", os.path.join(BUILD, "tests/dump_dataset"))


def pack_run(*args, timeout=300):
    """ringfeed-pack ARGS..., its output captured as text."""
    return subprocess.run([PACK] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout)


def dump_records(path, tmp=None):
    """Every sample of the dataset at path, in order: [(label, record
    bytes)] (tests/dump_dataset, its output file in tmp or beside path)."""
    out = os.path.join(tmp, "dump.bin") if tmp is not None else str(path) + ".dump"
    r = subprocess.run([DUMP, str(path), out], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    data = open(out, "rb").read()
    os.unlink(out)
    recs, at = [], 0
    while at < len(data):
        label, n = struct.unpack_from("<II", data, at)
        recs.append((label, data[at + 8:at + 8 + n]))
        at += 8 + n
    return recs


def ctl_tool():
    return binary("tools/ringfeedctl")


def read_tool():
    return binary("tools/ringfeed-read")


def idx_labels(path):
    """Labels of an IDX1 file (gzip or not), as a bytes object."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    assert int.from_bytes(data[0:4], "big") == 0x801
    n = int.from_bytes(data[4:8], "big")
    return data[8:8 + n]


def idx_images(path):
    """Pixels of an IDX3 file (gzip or not): (count, rows*cols, bytes)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    assert int.from_bytes(data[0:4], "big") == 0x803
    n = int.from_bytes(data[4:8], "big")
    rows = int.from_bytes(data[8:12], "big")
    cols = int.from_bytes(data[12:16], "big")
    return n, rows * cols, data[16:]


@pytest.fixture(scope="session")
def packed_fmnist(tmp_path_factory):
    """Fashion-MNIST train and test packed once per session (zstd)."""
    root = tmp_path_factory.mktemp("fmnist")
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        dest = root / split
        subprocess.run([pack_tool(), "idx",
                        "--images", f"{FMNIST}/{prefix}-images-idx3-ubyte.gz",
                        "--labels", f"{FMNIST}/{prefix}-labels-idx1-ubyte.gz",
                        str(dest)], check=True, stdout=subprocess.DEVNULL)
        out[split] = str(dest)
    return out


def ctl(sock, *args, check=True, json_out=False):
    cmd = [ctl_tool(), "--socket", sock] + (["--json"] if json_out else []) + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} failed: {r.stderr}")
    return json.loads(r.stdout) if json_out and r.returncode == 0 else r


def unix_listening(path):
    """Is an AF_UNIX socket bound at path and listening?  (/proc/net/unix:
    the file appears at bind(), before listen(); a connect in between is
    refused.)"""
    try:
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                fields = line.split()
                if len(fields) >= 8 and fields[7] == path and int(fields[3], 16) & 0x10000:
                    return True
    except OSError:
        pass
    return False


def connect_unix(path, timeout):
    """A connected AF_UNIX stream socket with timeout set.  A connect that
    finds the daemon's listen backlog full (EAGAIN: a socket with a timeout
    is non-blocking underneath) is tried again until timeout has passed."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
        except BaseException:
            s.close()
            raise


def attach_held(sock, line, timeout=60.0):
    """ATTACH on a connection kept open (the client stays attached and never
    releases); the ring's fds from the reply are closed at once.  Returns
    the connection: closing it detaches."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    conn.connect(sock)
    conn.sendall(line)
    msg, anc, _, _ = conn.recvmsg(4096, socket.CMSG_SPACE(2 * 4))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            for i in range(0, len(data) - len(data) % 4, 4):
                os.close(int.from_bytes(data[i:i + 4], "little"))
    assert msg.startswith(b"OK attach"), msg
    return conn


def raw_request(sock, data, timeout=10.0):
    """Sends bytes on a fresh control connection; returns all reply bytes
    until the daemon has answered and gone quiet."""
    with connect_unix(sock, timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)


class Daemon:
    """A ringfeedd on a temporary socket."""

    def __init__(self, datasets, workers=2, extra=(), sock=None, env=None):
        self.dir = tempfile.mkdtemp(prefix="rfd-")
        self.sock = sock or os.path.join(self.dir, "rf.sock")
        self.log_path = os.path.join(self.dir, "ringfeedd.log")
        self.args = [ringfeedd(), "--socket", self.sock, "--workers", str(workers)]
        for name, path in datasets.items():
            self.args += ["--dataset", f"{name}={path}"]
        self.args += list(extra)
        self.env = dict(os.environ, **(env or {}))
        self.proc = None

    def start(self, timeout=10.0):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=self.log,
                                     env=self.env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ringfeedd exited {self.proc.returncode}:\n{self.read_log()}")
            try:
                if raw_request(self.sock, b"PING\n", timeout=1.0).startswith(b"OK pong"):
                    # wait for the workers too
                    st = self.stats()
                    if int(st.get("workers.alive", 0)) >= 1:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"ringfeedd did not come up:\n{self.read_log()}")

    def stats(self):
        reply = raw_request(self.sock, b"STATS\n").decode()
        lines = reply.splitlines()
        assert lines[0].startswith("OK "), reply
        out = {}
        for line in lines[1:]:
            k, _, v = line.partition(" ")
            out[k] = v
        return out

    def worker_pids(self):
        st = self.stats()
        return [int(v) for k, v in st.items()
                if k.startswith("workers.") and k.endswith(".pid") and v.isdigit()]

    def pid_tree(self):
        """pids of the daemon's children (its workers), from /proc."""
        return pid_children(self.proc.pid)

    def group_pids(self):
        """pids of live (not zombie) processes in the daemon's process group:
        the daemon and its workers, even after they were reparented."""
        found = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid and fields[0] != "Z":
                found.append(int(d))
        return found

    def rss_kb(self, pid=None):
        pid = pid or self.proc.pid
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def sanitized(self):
        """Does the daemon run with AddressSanitizer's runtime (the ASan build)?"""
        with open(f"/proc/{self.proc.pid}/maps") as f:
            return any("libasan" in line for line in f)

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def kill9(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.proc:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if getattr(self, "log", None):
            self.log.close()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def daemon_factory():
    made = []

    def make(datasets, **kw):
        d = Daemon(datasets, **kw)
        made.append(d)
        return d.start()

    yield make
    for d in made:
        d.cleanup()


@contextlib.contextmanager
def workers_held(d):
    """The workers stopped (SIGSTOP) for the block, continued after it: no
    batch completes meanwhile, so no stream gets further than its ring's
    depth, whatever the machine's load does to the processes started."""
    pids = d.worker_pids()
    assert pids, d.stats()
    held = []
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
            held.append(pid)
        yield
    finally:
        for pid in held:
            os.kill(pid, signal.SIGCONT)


def run_read(sock, dataset, batch=256, epochs=1, extra=(), timeout=300, dump=None, check=True):
    """Runs ringfeed-read --json; returns (parsed json, completed process)."""
    cmd = [read_tool(), "--socket", sock, "--dataset", dataset, "--batch", str(batch),
           "--epochs", str(epochs), "--json"] + list(extra)
    if dump:
        cmd += ["--dump-indices", dump]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}: {r.stderr}")
    out = None
    if r.returncode == 0:
        out = json.loads(r.stdout.strip().splitlines()[-1])
    return out, r


def read_dump_rows(path):
    """Lines of a --dump-indices file: list of (epoch, seq, index, label, flags)."""
    with open(path) as f:
        return [tuple(int(x) for x in line.split()) for line in f]


def read_dump(path):
    """Lines of a --dump-indices file: list of (epoch, seq, index)."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            rows.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return rows


def dump_rows(path):
    """{epoch: {seq: [indices in order]}} of a --dump-indices file."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    with open(path) as f:
        for line in f:
            e, s, i = (int(x) for x in line.split())
            out[e][s].append(i)
    return out


def pack_first(root, n, extra=()):
    """Packs the first n samples of Fashion-MNIST's test split into
    root/ds (raw IDX cut to n, then ringfeed-pack idx with extra options,
    e.g. --shard-size); returns the folder."""
    with gzip.open(f"{FMNIST}/t10k-images-idx3-ubyte.gz") as f:
        img = f.read()
    with gzip.open(f"{FMNIST}/t10k-labels-idx1-ubyte.gz") as f:
        lab = f.read()
    rows, cols = int.from_bytes(img[8:12], "big"), int.from_bytes(img[12:16], "big")
    (root / "images").write_bytes(img[:4] + n.to_bytes(4, "big") + img[8:16] +
                                  img[16:16 + n * rows * cols])
    (root / "labels").write_bytes(lab[:4] + n.to_bytes(4, "big") + lab[8:8 + n])
    out = root / "ds"
    subprocess.run([pack_tool(), "idx", "--images", str(root / "images"), "--labels",
                    str(root / "labels"), *map(str, extra), str(out)], check=True,
                   stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return str(out)
