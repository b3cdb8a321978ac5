"""test_fairness.py - one client cannot starve another.

Jobs used to wait in one FIFO queue shared by every stream, so a client that
attached with a deep ring of large batches and never read queued seconds of
work ahead of everyone else (a Fashion-MNIST epoch went from 0.15 s to over
11 s), and one that re-attached every second queued that much again each
time (the other client got about one batch a second).  The scheduler now
hands jobs out by deficit round robin over the streams (daemon/fairq.c), so
a stream's share of the workers is bounded while another waits.

The victim reads the Fashion-MNIST test set (10000 samples) for a few epochs
with ringfeed-read, alone and then beside each hog, on one daemon with one
worker (the victim, the daemon and the worker fit two cores).  The hog
attaches to a JPEG dataset made here with batch 256 and depth 64: 16384
samples queued at once, a few seconds of the worker's time.

  (a) the deep hog attaches and never reads;
  (b) the re-attaching hog closes its connection and attaches afresh every
      second, queueing all that again each time;
  (c) the hog asks for weight=1000: the daemon's default config caps it
      at weight 1 (max-weight), and STATS shows what it asked and got.

The scheduler shares the workers by work as the transforms' cost_ns count
it.  The hog's JPEGs (256 x 192, cropped to 32) cost the worker less than
eval's cost_ns, which is figured for photographs cropped to 224, and the
victim's compressed raw samples cost more than raw's, so by the workers'
real time the victim's fair share is well over half: the bound below has
room for a noisy machine, and FIFO order misses it by far (the victim
waits for the hog's whole queue).

One wall-clock ratio is judged, in (a), with a wide margin: the victim
keeps at least a quarter of its solo rate (an even share is a half; FIFO
order leaves it a few percent).  Each try measures the victim alone and
then beside the hog, back to back so both see the same load on the
machine; the test passes on the first try that keeps the bound, of three.
A victim run that takes far longer than the bound allows is stopped and
counted as if it had ended then.  (b) and (c) judge no ratio: (b) that the
victim finishes at all within a generous time (FIFO order gives it about
a batch a second, far slower), (c) the weights STATS shows.  The round
robin's exact shares are checked deterministically in tests/test_sched.c.
"""
import json
import os
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
from PIL import Image

from conftest import connect_unix, pack_tool, read_tool, wait_for

EPOCHS = 5
SAMPLES = 10000 * EPOCHS
BOUND = 0.25
TRIES = 3
REATTACH_LIMIT_S = 120  # the victim beside the re-attaching hog: FIFO order takes ~200 s
HOG_ATTACH = b"ATTACH dataset=hog batch=256 depth=64 transform=eval size=32 name=hog\n"


@pytest.fixture(scope="module")
def hog_dataset(tmp_path_factory):
    """64 JPEGs of 256 x 192 (a gradient and some noise) in two classes,
    packed with imagefolder."""
    root = tmp_path_factory.mktemp("hog")
    rng = np.random.default_rng(11)
    for i in range(64):
        folder = root / "tree" / f"c{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        base = np.linspace(0, 255, 256, dtype=np.float32)[None, :, None]
        pix = base + rng.normal(0, 20, (192, 256, 3))
        Image.fromarray(np.clip(pix, 0, 255).astype(np.uint8)).save(folder / f"{i}.jpg",
                                                                    quality=90)
    ds = str(root / "ds")
    subprocess.run([pack_tool(), "imagefolder", str(root / "tree"), ds], check=True,
                   capture_output=True)
    return ds


@pytest.fixture
def daemon(daemon_factory, packed_fmnist, hog_dataset):
    return daemon_factory({"fm": packed_fmnist["test"], "hog": hog_dataset}, workers=1)


def victim_rate(sock, limit_s):
    """The victim's samples/s over EPOCHS epochs; a run past limit_s is
    stopped and counted at SAMPLES / limit_s (more than it would have had)."""
    cmd = [read_tool(), "--socket", sock, "--dataset", "fm", "--batch", "256",
           "--epochs", str(EPOCHS), "--json"]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return SAMPLES / (time.monotonic() - t0)
    assert r.returncode == 0, f"{cmd} exited {r.returncode}: {r.stderr}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["samples"] == SAMPLES, out
    return out["samples_per_s"]


def hog_attach(sock, line=HOG_ATTACH):
    """Attaches the hog and holds the connection (the ring's fds closed:
    the daemon keeps the ring while the connection lives)."""
    s = connect_unix(sock, 30.0)
    s.sendall(line)
    msg, fds, _, _ = socket.recv_fds(s, 4096, 4)
    for fd in fds:
        os.close(fd)
    assert msg.startswith(b"OK attach"), msg
    return s


def queued(d):
    return int(d.stats()["jobs.queued"])


def check_tries(what, tries):
    """tries: (solo, beside the hog) samples/s pairs; the last must keep
    the bound (the loops stop at the first that does)."""
    solo, with_hog = tries[-1]
    assert with_hog >= BOUND * solo, (
        f"beside {what} the victim kept " +
        ", ".join(f"{h / s:.0%} ({h:.0f} of {s:.0f} samples/s alone)" for s, h in tries) +
        f" in {len(tries)} tries; a client must keep at least {BOUND:.0%} of its solo rate "
        f"next to one other (an even share is 50%)")


def test_deep_hog_that_never_reads(daemon):
    d = daemon
    tries = []
    for _ in range(TRIES):
        solo = victim_rate(d.sock, 60.0)
        hog = hog_attach(d.sock)
        try:
            wait_for(lambda: queued(d) > 64, "the hog's jobs to be queued", timeout=30)
            tries.append((solo, victim_rate(d.sock, max(2.0, 4 * SAMPLES / solo / BOUND))))
        finally:
            hog.close()
        wait_for(lambda: int(d.stats()["clients.attached"]) == 0 and queued(d) == 0,
                 "the hog to detach", timeout=30)
        if tries[-1][1] >= BOUND * solo:
            break
    check_tries("a hog with depth 64 that never reads", tries)


def test_hog_that_reattaches_every_second(daemon):
    d = daemon
    stop = threading.Event()
    errors = []
    attaches = []

    def hog_loop():
        try:
            while not stop.is_set():
                s = hog_attach(d.sock)
                attaches.append(1)
                stop.wait(1.0)
                s.close()
        except Exception as e:  # reported by the test, not lost in the thread
            errors.append(e)

    t = threading.Thread(target=hog_loop)
    t.start()
    try:
        wait_for(lambda: queued(d) > 64 or errors, "the hog's jobs to be queued", timeout=30)
        n0 = len(attaches)
        t0 = time.monotonic()
        cmd = [read_tool(), "--socket", d.sock, "--dataset", "fm", "--batch", "256",
               "--epochs", str(EPOCHS), "--json"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=REATTACH_LIMIT_S)
        took = time.monotonic() - t0
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    assert r.returncode == 0, f"{cmd} exited {r.returncode}: {r.stderr}"
    assert json.loads(r.stdout.strip().splitlines()[-1])["samples"] == SAMPLES
    # the hog kept re-attaching while the victim read (or the victim was quick)
    assert len(attaches) > n0 or took < 1.0, (len(attaches), n0, took)
    wait_for(lambda: int(d.stats()["clients.attached"]) == 0 and queued(d) == 0,
             "the hog to detach", timeout=30)


def test_hog_asking_weight_1000_is_capped(daemon):
    """By default (max-weight 1) a client cannot raise its own share: the
    hog attaches (capped, not refused) with weight 1, its ask in STATS."""
    d = daemon
    hog = hog_attach(d.sock, HOG_ATTACH.replace(b"name=hog", b"name=hog weight=1000"))
    try:
        st = d.stats()
        ids = [k.split(".")[1] for k, v in st.items()
               if k.startswith("clients.") and k.endswith(".name") and v == "hog"]
        assert len(ids) == 1, st
        assert st[f"clients.{ids[0]}.weight"] == "1", st
        assert st[f"clients.{ids[0]}.weight_asked"] == "1000", st
        assert "asks for weight 1000; the config allows it 1" in d.read_log()
    finally:
        hog.close()
    wait_for(lambda: int(d.stats()["clients.attached"]) == 0 and queued(d) == 0,
             "the hog to detach", timeout=30)
