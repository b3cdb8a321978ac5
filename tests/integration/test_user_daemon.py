"""A dataset folder with no daemon to start: ringfeed.Loader("path") and
ringfeed-read --dataset PATH ask the daemon at the socket (OPEN), and,
when it serves only its catalogue or none runs, libringfeed starts the
user's own daemon (ringfeedd --user) and attaches there.

Each test gets its own XDG_RUNTIME_DIR (a short folder in /tmp) and kills
the user daemon it started in teardown (its pid is in ringfeedd.lock; it
leads its own session, so its workers go with its process group).  No
sleeps as synchronisation: exits and sockets are polled for.
"""
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

import pytest

import ringfeed
from conftest import FMNIST, pack_first, proc_alive, raw_request, read_tool, wait_for

N = 100  # samples in the small pack


class UserDir:
    """A private XDG_RUNTIME_DIR, the user daemon's folder in it, and the
    daemon (if one started) stopped at the end."""

    def __init__(self):
        self.xdg = tempfile.mkdtemp(prefix="rfx-")
        os.chmod(self.xdg, 0o700)
        self.dir = os.path.join(self.xdg, "ringfeed")
        self.sock = os.path.join(self.dir, "ringfeed.sock")
        self.log = os.path.join(self.dir, "ringfeedd.log")
        # the default socket must not be a daemon's: point it at nothing
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.xdg, RINGFEED_IDLE_EXIT="600",
                        RINGFEED_SOCKET=os.path.join(self.xdg, "none.sock"))
        self.env.pop("RINGFEED_DAEMON", None)  # found beside libringfeed (dladdr)

    def pid(self):
        try:
            with open(os.path.join(self.dir, "ringfeedd.lock")) as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def read_log(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def cleanup(self):
        pid = self.pid()
        if pid and proc_alive(pid):
            os.killpg(pid, signal.SIGTERM)
            try:
                wait_for(lambda: not proc_alive(pid), "the user daemon to stop", timeout=15)
            except AssertionError:
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(self.xdg, ignore_errors=True)


@pytest.fixture
def user():
    u = UserDir()
    yield u
    u.cleanup()


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return pack_first(tmp_path_factory.mktemp("ud"), N)


def labels():
    with gzip.open(f"{FMNIST}/t10k-labels-idx1-ubyte.gz") as f:
        return list(f.read()[8:8 + N])


def read(env, dataset, *extra, check=True):
    r = subprocess.run([read_tool(), "--dataset", dataset, "--batch", "10", "--epochs", "1",
                        "--json"] + list(extra), capture_output=True, text=True, env=env,
                       timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_loader_on_a_folder_starts_the_user_daemon(user, pack, monkeypatch):
    for k, v in user.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RINGFEED_DAEMON", raising=False)
    loader = ringfeed.Loader(pack, batch_size=10, shuffle=False, output="buffer")
    try:
        got = []
        for _images, lab in loader:
            got += memoryview(lab).tolist()
        assert got == labels()
        assert loader.classes == [str(i) for i in range(10)]
        sock, name = loader._client.where()
        assert sock == user.sock and name.startswith("ds-")
    finally:
        loader.close()
    pid = user.pid()
    assert pid and proc_alive(pid)
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[1] == b"--user"
    assert "opened on demand" in user.read_log()


def test_ringfeed_read_shares_one_catalogue_entry(user, pack, daemon_factory):
    """A path with a '/', a relative folder holding a MANIFEST, and a
    second script: one entry, the digest of the system daemon's."""
    a = read(user.env, pack)
    parent, base = os.path.split(pack)
    b = subprocess.run([read_tool(), "--dataset", base, "--batch", "10", "--epochs", "1",
                        "--json"], capture_output=True, text=True, env=user.env, cwd=parent,
                       timeout=120)
    assert b.returncode == 0, b.stderr
    d = daemon_factory({"small": pack})
    c = read(dict(user.env, RINGFEED_SOCKET=d.sock), "small")
    digest = [__import__("json").loads(r.stdout.strip().splitlines()[-1])["digest"]
              for r in (a, b, c)]
    assert digest[0] == digest[1] == digest[2]
    listing = raw_request(user.sock, b"DATASETS\n").decode()
    assert listing.startswith("OK 1\n"), listing
    assert user.read_log().count("opened on demand") == 1


def test_concurrent_starters_get_one_daemon(user, pack):
    procs = [subprocess.Popen([read_tool(), "--dataset", pack, "--batch", "10", "--epochs",
                               "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=user.env) for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    log = user.read_log()
    assert log.count("listening on") == 1, log
    assert "already serves" not in log
    assert proc_alive(user.pid())


def test_a_stale_socket_is_replaced(user, pack):
    os.mkdir(user.dir, 0o700)
    s = socket.socket(socket.AF_UNIX)
    s.bind(user.sock)  # bound, never listening: connect is refused
    s.close()
    with pytest.raises(ConnectionRefusedError):
        socket.socket(socket.AF_UNIX).connect(user.sock)
    read(user.env, pack)
    assert proc_alive(user.pid())


def test_idle_exit(user, pack):
    env = dict(user.env, RINGFEED_IDLE_EXIT="1")
    read(env, pack)
    pid = user.pid()
    assert pid
    wait_for(lambda: not proc_alive(pid), "the user daemon to exit when idle", timeout=60)
    log = user.read_log()
    assert "no clients: exiting in 1 s unless one connects" in log
    assert "no client for 1 s (--idle-exit): exiting" in log
    assert not os.path.exists(user.sock)


def test_the_system_daemon_refuses_a_folder_it_does_not_name(user, pack, daemon_factory,
                                                            tmp_path):
    other = pack_first(tmp_path, 20)
    d = daemon_factory({"small": pack})
    reply = raw_request(d.sock, f"OPEN {pack}\nOPEN {other}\n".encode()).decode()
    first, second = reply.splitlines()
    assert first == "OK dataset=small"
    assert second.startswith(f"ERR catalogue-only dataset folder {other}: ")
    assert "ringfeedd --user" in second and f"dataset.NAME = {other}" in second
    reply = raw_request(d.sock, f"ATTACH dataset={other}\n".encode()).decode()
    assert reply.startswith("ERR bad-arg") and "OPEN <folder>" in reply, reply
    # libringfeed takes that refusal to the user's own daemon
    r = read(dict(user.env, RINGFEED_SOCKET=d.sock), other)
    assert '"samples": 20' in r.stdout or '"samples":20' in r.stdout, r.stdout
    assert user.pid() and proc_alive(user.pid())


def test_a_folder_that_is_no_dataset_is_named(user, pack, tmp_path, monkeypatch):
    bad = tmp_path / "not a pack"
    bad.mkdir()
    r = read(user.env, str(bad), check=False)
    assert r.returncode != 0
    assert f"dataset folder {bad}" in r.stderr and "MANIFEST" in r.stderr, r.stderr
    for k, v in user.env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ringfeed.Error) as e:
        ringfeed.Loader(str(bad), batch_size=10, output="buffer")
    assert str(bad) in str(e.value)
    r = read(user.env, str(tmp_path / "missing"), check=False)
    assert r.returncode != 0 and f"dataset folder {tmp_path / 'missing'}" in r.stderr
    read(user.env, pack)  # and the daemon goes on serving


CHILD = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
data = b""  # the refusal comes as the connection is accepted, unasked
while True:
    b = s.recv(4096)
    if not b:
        break
    data += b
print(os.getuid(), data.decode().strip())
"""


def test_another_user_is_refused(user, pack):
    if os.geteuid() != 0:
        pytest.skip("needs root to run a client as another uid")
    read(user.env, pack)
    pid = user.pid()
    # make the folder reachable for the test, as a careless chmod would
    os.chmod(user.xdg, 0o711)
    os.chmod(user.dir, 0o711)
    os.chmod(user.sock, 0o666)
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, user.sock], user=65534, group=65534,
                           capture_output=True, text=True, timeout=60, env=user.env)
    finally:
        os.chmod(user.dir, 0o700)
        os.chmod(user.xdg, 0o700)
        os.chmod(user.sock, 0o600)
    assert r.returncode == 0, r.stderr
    uid, _, reply = r.stdout.partition(" ")
    assert uid == "65534"
    assert reply.startswith("ERR denied this is the ringfeedd --user of uid 0"), reply
    assert "not uid 65534" in reply
    assert proc_alive(pid)
    read(user.env, pack)  # its owner is still served, by the same daemon
    assert user.pid() == pid


def test_an_older_daemon_at_the_socket_sends_folders_to_the_user_daemon(user, pack, tmp_path):
    """A daemon older than OPEN answers it "ERR bad-verb": libringfeed
    takes that, as the system daemon's catalogue-only refusal, to the
    user's own daemon, and the folder is read there."""
    import threading

    path = str(tmp_path / "old.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    seen = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                f = c.makefile("rb")
                for line in f:
                    seen.append(line.split(b" ", 1)[0].strip())
                    c.sendall(b"ERR bad-verb unknown verb\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        r = read(dict(user.env, RINGFEED_SOCKET=path), pack)
        assert f'"samples":{N},' in r.stdout, r.stdout
        assert b"OPEN" in seen, seen  # asked the old daemon first
        assert user.pid() and proc_alive(user.pid())
    finally:
        srv.close()
