"""test_damage.py - a dataset whose files change while it is served fails
only its own clients, with an error that names the shard and what changed;
the daemon, its workers and every other dataset's clients go on.

Regressions held here (each used to take the whole daemon down):
  - a shard truncated while a client read it: workers died of SIGBUS on the
    mapped index (or mmap records), every replacement refused to start since
    a new worker opened every dataset and exited if one failed, and the pool
    respawned them forever (workers.alive 0, 50+ deaths in 30 s); the other
    dataset's reader timed out and the damaged one's hung with no error;
  - a reload that dropped a dataset whose folder was then removed: the next
    worker started could not open it and exited, in a loop;
  - a folder swapped for another pack: new workers read the other pack's
    records as if they were the old one's (every sample a substitute);
  - workers dying young in a loop were only slowed down, never reported;
  - a dataset that did not open at start-up (missing, truncated) stopped
    the daemon from starting: now it fails alone and a reload revives it.
"""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import raw_request, read_tool, run_read, wait_for

WAIT = 60.0


@pytest.fixture
def served(daemon_factory, packed_fmnist, tmp_path):
    """A daemon serving "fm" (never touched) and "victim" (a private copy of
    the same pack, damaged by the test) from a config file; returns
    (daemon, victim folder, config path)."""
    made = []

    def make(workers=2, env=None):
        victim = tmp_path / f"victim-{len(made)}"
        shutil.copytree(packed_fmnist["test"], victim)
        conf = tmp_path / f"ringfeedd-{len(made)}.conf"
        conf.write_text(f"dataset.fm = {packed_fmnist['test']}\n"
                        f"dataset.victim = {victim}\n")
        d = daemon_factory({}, workers=workers, extra=["--config", str(conf)], env=env)
        made.append(d)
        return d, victim, conf

    yield make
    for d in made:
        assert d.proc.poll() is None, f"the daemon died:\n{d.read_log()[-3000:]}"
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(60) == 0, d.read_log()[-3000:]


def start_reader(d, dataset, epochs=100000):
    cmd = [read_tool(), "--socket", d.sock, "--dataset", dataset, "--batch", "100",
           "--epochs", str(epochs), "--json"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def shard(folder):
    names = sorted(n for n in os.listdir(folder) if n.endswith(".rfs"))
    assert names, f"no shard in {folder}"
    return os.path.join(folder, names[0])


def wait_reading(d, p, what):
    base = int(d.stats()["total.batches"])
    wait_for(lambda: p.poll() is not None or int(d.stats()["total.batches"]) > base + 20,
             what, timeout=WAIT)
    assert p.poll() is None, p.communicate()


def ended_with(p, timeout=WAIT):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, err


def fm_digest(d):
    out, _ = run_read(d.sock, "fm", batch=100, epochs=2)
    return out["digest"]


@pytest.mark.parametrize("backend", ["mmap", "pread", "io_uring"])
def test_truncated_shard_fails_only_its_streams(served, backend):
    d, victim, _ = served(env={"RINGFEED_IO": backend})
    before = fm_digest(d)
    p = start_reader(d, "victim")
    wait_reading(d, p, "the victim's reader to get going")
    path = shard(victim)
    size = os.path.getsize(path)
    os.truncate(path, size // 3)

    # the victim's reader ends with an error naming the shard and the change
    rc, err = ended_with(p)
    assert rc != 0, err
    assert os.path.basename(path) in err and "truncated" in err, err
    assert f"{size // 3} bytes now, {size}" in err, err

    # nothing else noticed: the other dataset reads the same, workers alive
    assert fm_digest(d) == before
    st = d.stats()
    assert st["workers.deaths"] == "0", d.read_log()[-3000:]
    assert st["workers.alive"] == "2", st
    assert st["datasets.failed"] == "1", st
    assert st["errors.substituted"] == "0", st  # a truncation is not "bad samples"

    # a new client of the failed dataset is refused with the reason
    reply = raw_request(d.sock, b"ATTACH dataset=victim batch=100\n", timeout=WAIT).decode()
    assert reply.startswith("ERR bad-dataset ") and "truncated" in reply, reply
    log = d.read_log()
    assert re.search(r"dataset victim \(.*\) failed: .*shard-\d+\.rfs: file is", log), log[-3000:]


def test_repaired_dataset_served_after_reload(served, packed_fmnist):
    d, victim, conf = served()
    p = start_reader(d, "victim")
    wait_reading(d, p, "the victim's reader to get going")
    os.truncate(shard(victim), 1000)
    rc, err = ended_with(p)
    assert rc != 0 and "truncated" in err, err
    # a reload while it is still broken applies the rest, and it stays failed
    conf.write_text(conf.read_text() + "memory-budget = 1G\n")
    reloads = int(d.stats()["reloads"])
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: int(d.stats()["reloads"]) > reloads, "the reload", timeout=WAIT)
    assert d.stats()["reloads.failed"] == "0", d.read_log()[-2000:]
    assert "dataset victim: still not served" in d.read_log()
    reply = raw_request(d.sock, b"ATTACH dataset=victim batch=100\n", timeout=WAIT).decode()
    assert reply.startswith("ERR ") and "truncated" in reply, reply
    # the operator puts the pack back and reloads: the dataset is offered again
    shutil.rmtree(victim)
    shutil.copytree(packed_fmnist["test"], victim)
    reloads = int(d.stats()["reloads"])
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: int(d.stats()["reloads"]) > reloads, "the reload", timeout=WAIT)
    out, _ = run_read(d.sock, "victim", batch=100, epochs=1)
    assert out["samples"] == 10000
    assert d.stats()["workers.deaths"] == "0"


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_dataset_broken_at_start_fails_alone(daemon_factory, packed_fmnist, tmp_path, damage):
    """A dataset that does not open when the daemon starts fails on its own:
    the daemon starts and serves the others, ATTACH to it says why,
    datasets.failing counts it until a reload opens it.  (It used to stop
    the daemon from starting at all: one bad folder in the config, and
    every trainer of the node was refused.)"""
    victim = tmp_path / "victim"
    if damage == "truncated":
        shutil.copytree(packed_fmnist["test"], victim)
        os.truncate(shard(victim), 1000)
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text(f"dataset.fm = {packed_fmnist['test']}\ndataset.victim = {victim}\n")
    d = daemon_factory({}, workers=2, extra=["--config", str(conf)])
    st = d.stats()
    assert st["datasets"] == "1" and st["datasets.failing"] == "1", st
    assert st["datasets.failed"] == "1", st
    log = d.read_log()
    assert re.search(r"dataset victim \(.*victim\) is not served: ", log), log[-2000:]
    reply = raw_request(d.sock, b"ATTACH dataset=victim batch=100\n", timeout=WAIT).decode()
    assert reply.startswith("ERR "), reply
    assert ("truncated" if damage == "truncated" else "victim") in reply, reply
    out, _ = run_read(d.sock, "fm", batch=100, epochs=1)
    assert out["samples"] == 10000
    # the operator puts the pack in place and reloads: it is served
    shutil.rmtree(victim, ignore_errors=True)
    shutil.copytree(packed_fmnist["test"], victim)
    reloads = int(d.stats()["reloads"])
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: int(d.stats()["reloads"]) > reloads, "the reload", timeout=WAIT)
    assert d.stats()["reloads.failed"] == "0", d.read_log()[-2000:]
    out, _ = run_read(d.sock, "victim", batch=100, epochs=1)
    assert out["samples"] == 10000
    st = d.stats()
    assert st["datasets"] == "2" and st["datasets.failing"] == "0", st
    assert st["workers.deaths"] == "0", st


def test_removed_after_reload_fails_its_clients_only(served):
    d, victim, conf = served(workers=1)
    before = fm_digest(d)
    p = start_reader(d, "victim")
    wait_reading(d, p, "the victim's reader to get going")
    # the documented workflow: drop it from the config, remove it, SIGHUP
    conf.write_text("\n".join(l for l in conf.read_text().splitlines()
                              if not l.startswith("dataset.victim")) + "\n")
    shutil.rmtree(victim)
    reloads = int(d.stats()["reloads"])
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: int(d.stats()["reloads"]) > reloads, "the reload", timeout=WAIT)
    # the worker reading it goes; its replacement cannot open the folder
    for pid in d.worker_pids():
        os.kill(pid, signal.SIGKILL)
    rc, err = ended_with(p)
    assert rc != 0, err
    assert str(victim) in err and "cannot open" in err, err
    wait_for(lambda: d.stats()["workers.alive"] == "1", "the replacement worker", timeout=WAIT)
    assert fm_digest(d) == before
    st = d.stats()
    assert st["workers.deaths"] == "1", d.read_log()[-3000:]  # the one killed
    assert st["workers.respawn_loop"] == "0", st


def test_swapped_folder_detected(served, packed_fmnist, tmp_path):
    d, victim, _ = served(workers=1)
    p = start_reader(d, "victim")
    wait_reading(d, p, "the victim's reader to get going")
    # another pack (the training set) moved into the victim's folder
    other = tmp_path / "other"
    shutil.copytree(packed_fmnist["train"], other)
    shutil.rmtree(victim)
    os.rename(other, victim)
    for pid in d.worker_pids():
        os.kill(pid, signal.SIGKILL)
    rc, err = ended_with(p)
    assert rc != 0, err
    assert "another pack" in err and "MANIFEST" in err, err
    st = d.stats()
    assert st["errors.substituted"] == "0", st
    assert st["errors.bad_samples"] == "0", st


def test_respawn_loop_reported(served):
    d, _, _ = served(workers=1)
    seen = set()
    deadline = time.monotonic() + WAIT
    # every new worker dies young: the pool reports a loop
    while len(seen) < 4 and time.monotonic() < deadline:
        for pid in d.worker_pids():
            if pid not in seen:
                seen.add(pid)
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    assert len(seen) >= 4
    wait_for(lambda: d.stats()["workers.respawn_loop"] == "1", "the loop reported", timeout=WAIT)
    assert "workers keep dying within 2 s of starting" in d.read_log()
    assert d.stats()["workers.respawn_loops"] == "1"
    # left alone, a worker stays up and serves: the loop is over
    out, _ = run_read(d.sock, "fm", batch=100, epochs=30)
    assert out["samples"] == 300000
    wait_for(lambda: d.stats()["workers.respawn_loop"] == "0", "the loop over", timeout=WAIT)
    assert "the respawn loop is over" in d.read_log()
