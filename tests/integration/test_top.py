"""test_top.py - `ringfeedctl top` against a real daemon with a client
reading in the background:

  1. `top --once` down a pipe: the header, a row per worker and the
     client's row (dataset, rank/world, a nonzero samples/s), no escapes;
  2. the live view under tmux (a private server, always killed): the frame
     is drawn and refreshed, W raises the daemon's worker target and w
     lowers it (checked in STATS), q quits with exit 0 and the terminal's
     modes restored (stty -a run after it in the same pane);
  3. the daemon stopped under the live view: a message and exit 1;
  4. the augmentation's line (time per image per op) only while a stream
     augments: absent for the plain reader, present with the ops of an
     augmenting one.

Nothing asserts a duration: every wait polls with a generous bound.
"""
import os
import pwd
import re
import shutil
import subprocess

import pytest

from conftest import ctl_tool, read_tool, wait_for

WAIT = 60.0


def serve(daemon_factory, packed_fmnist, params="name=top-test"):
    """A daemon with two workers and a client reading many epochs (rank 1
    of 2, with ATTACH params), attached and moving."""
    d = daemon_factory({"fmnist": packed_fmnist["train"]}, workers=2)
    reader = subprocess.Popen([read_tool(), "--socket", d.sock, "--dataset", "fmnist",
                               "--batch", "64", "--epochs", "100000", "--rank", "1",
                               "--world", "2", "--params", params],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: any(k.endswith(".batches") and k.startswith("clients.") and int(v) > 0
                             for k, v in d.stats().items()), "the client's first batches", WAIT)
        yield d
    finally:
        reader.kill()
        reader.wait(10)


@pytest.fixture
def served(daemon_factory, packed_fmnist):
    yield from serve(daemon_factory, packed_fmnist)


def test_once_over_a_pipe(served):
    r = subprocess.run([ctl_tool(), "--socket", served.sock, "top", "--once"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "\033" not in out, out
    assert out.startswith("ringfeedd "), out
    lines = out.splitlines()
    head = [i for i, l in enumerate(lines) if l.split()[:2] == ["WORKER", "PID"]]
    assert head, out
    workers = [l.split() for l in lines[head[0] + 1:] if l.strip() and l.split()[0].isdigit()
               and len(l.split()) == 9]
    pids = {int(v) for v in served.worker_pids()}
    assert {int(w[1]) for w in workers} & pids, out
    client = [l.split() for l in lines if "top-test" in l]
    assert len(client) == 1, out
    c = client[0]
    # CLIENT USER NAME DATASET RANK BATCH/S SAMPLES/S WAIT% READY INFL VERDICT
    assert c[1] == pwd.getpwuid(os.getuid()).pw_name, out  # SO_PEERCRED's uid, named
    assert c[3] == "fmnist" and c[4] == "1/2", out
    samples = c[6]
    mult = {"k": 1e3, "M": 1e6, "G": 1e9}.get(samples[-1], 1)
    assert float(samples.rstrip("kMG")) * mult > 0, out
    assert c[10] in ("input-bound", "compute-bound"), out
    assert re.search(r"samples/s [0-9.]+[kMG]? ", out), out
    assert "augment" not in out, "no stream augments: no augmentation line\n" + out


def test_once_shows_the_augmentation_per_op(daemon_factory, packed_fmnist):
    gen = serve(daemon_factory, packed_fmnist,
                "name=aug-test augment=RandomHorizontalFlip:p=0.5,RandomInvert:p=1")
    d = next(gen)
    try:
        r = subprocess.run([ctl_tool(), "--socket", d.sock, "top", "--once"],
                           capture_output=True, text=True, timeout=60)
        st = d.stats()
        assert int(st["augment.invert_images"]) > 0 and int(st["augment.hflip_images"]) > 0
    finally:
        gen.close()
    assert r.returncode == 0, r.stderr
    aug = [l for l in r.stdout.splitlines() if l.startswith("augment ")]
    assert len(aug) == 1, r.stdout
    # the ops in STATS order (proto/aug_spec.h's table), each rounded to 0.1
    m = re.fullmatch(r"augment us/image ([0-9.]+[kMG]?):  invert ([0-9.]+[kMG]?)  "
                     r"hflip ([0-9.]+[kMG]?)", aug[0])
    assert m, aug[0]
    num = [float(v.rstrip("kMG")) * {"k": 1e3, "M": 1e6, "G": 1e9}.get(v[-1], 1)
           for v in m.groups()]
    assert abs(num[0] - num[1] - num[2]) <= 0.15 + 0.01 * num[0], \
        aug[0]


class Tmux:
    """A private tmux server (its own -L socket name), killed at the end."""

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, check=True):
        return subprocess.run(["tmux", "-L", self.name, *args], capture_output=True, text=True,
                              timeout=30, check=check)

    def pane(self):
        return self("capture-pane", "-p").stdout

    def kill(self):
        self("kill-server", check=False)


@pytest.fixture
def tmux():
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    t = Tmux(f"ringfeed-top-{os.getpid()}")
    yield t
    t.kill()


def target(d):
    return int(d.stats()["workers.target"])


def test_live_view_keys_and_terminal(served, tmux, tmp_path):
    rc_file, stty_file = tmp_path / "rc", tmp_path / "stty"
    cmd = (f"{ctl_tool()} --socket {served.sock} top --interval 0.3; "
           f"echo $? > {rc_file}; stty -a > {stty_file}; sleep 60")
    tmux("new-session", "-d", "-x", "120", "-y", "40", "sh", "-c", cmd)
    first = wait_for(lambda: (lambda p: p if "top-test" in p and "WORKER" in p else None)(
        tmux.pane()), "the first frame", WAIT)
    assert "q quit" in first, first

    def uptime(p):
        m = re.search(r" up (\S+) ", p)
        return m.group(1) if m else None

    # it refreshes: the daemon's uptime moves on the screen
    u0 = uptime(first)
    wait_for(lambda: uptime(tmux.pane()) not in (None, u0), "a refreshed frame", WAIT)

    assert target(served) == 2
    tmux("send-keys", "W")
    wait_for(lambda: target(served) == 3, "W to raise the target to 3", WAIT)
    wait_for(lambda: "workers 3/3" in tmux.pane() or "workers 2/3" in tmux.pane(),
             "the view to show target 3", WAIT)
    tmux("send-keys", "w")
    wait_for(lambda: target(served) == 2, "w to lower the target to 2", WAIT)

    tmux("send-keys", "q")
    wait_for(lambda: stty_file.exists() and stty_file.stat().st_size > 0, "top to quit", WAIT)
    assert rc_file.read_text().strip() == "0"
    modes = stty_file.read_text().split()
    assert "icanon" in modes and "echo" in modes, modes
    assert "-icanon" not in modes and "-echo" not in modes, modes


def test_live_view_daemon_gone(served, tmux, tmp_path):
    rc_file, err_file = tmp_path / "rc", tmp_path / "err"
    cmd = (f"{ctl_tool()} --socket {served.sock} top --interval 0.3 2> {err_file}; "
           f"echo $? > {rc_file}; sleep 60")
    tmux("new-session", "-d", "-x", "100", "-y", "30", "sh", "-c", cmd)
    wait_for(lambda: "WORKER" in tmux.pane(), "the first frame", WAIT)
    served.stop()
    wait_for(lambda: rc_file.exists() and rc_file.stat().st_size > 0, "top to give up", WAIT)
    assert rc_file.read_text().strip() == "1"
    err = err_file.read_text()
    assert "lost the daemon" in err, err
