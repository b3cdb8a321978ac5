"""test_share.py - one pool for many trainers: weighted shares and
decode-once for identical streams (daemon/fairq.c, WEIGHTS and SHARING).

The daemon serves a small photo set (bench/make-photos, from
mate-backgrounds) to ringfeed-read clients cropping 64-pixel train crops.
Every client's digest (XXH64 of its indices, labels and pixels) must equal
the digest of the same client's run alone on the daemon: sharing a
producer, joining one, being split off one, another member dying, workers
dying, or a weight never changes a byte of a stream.

  - two identical readers started together: the workers decode (and count
    as written, total.samples_made) one stream's worth plus the batches the
    second decoded alone before it joined (at most a ring's depth: the
    join place the daemon logs), not two.  The workers are held
    (SIGSTOP) until both readers have attached, so that the start-up skew
    of two processes on a loaded machine stays within the ring's depth the
    rule allows (a reader more than a ring behind goes alone);
  - a third reader asking for a place just ahead of the group joins it mid
    epoch, and a member killed mid-epoch leaves the others untouched (the
    workers held while the readers start, as above);
  - a client that attaches at the group's place and never reads is split
    off once its full ring has held the others for 1 s; the reader goes on;
  - a member reading a batch every 0.9 s beside one reading as fast as it
    can is split off (its releases do not restart the hold), and the fast
    one gets its stream;
  - kill storms on the workers while two readers share;
  - share=0 opts out;
  - two input-bound readers at weights 1 and 3 (the config's max-weight
    allows 3) are handed samples in a ratio well above 1:1 and below 1:6:
    the one wall-clock ratio here, with a wide margin.  The exact shares
    and the share rules' timing are checked deterministically in
    tests/test_sched.c, on a clock the test moves.
"""
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import BUILD, attach_held, read_tool, run_read, wait_for, workers_held

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MATE = "/usr/share/backgrounds/mate/nature"
BATCH = 16
COUNT = 96
CROP = ["--transform", "train", "--size", "64", "--seed", "5"]

pytestmark = pytest.mark.skipif(not os.path.isdir(MATE),
                                reason="mate-backgrounds is not installed")


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    out = tmp_path_factory.mktemp("share-photos")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench/make-photos"), "--count",
                    str(COUNT), "--seed", "3", "--out", str(out), "--build", BUILD],
                   check=True, capture_output=True, timeout=300)
    return str(out / "ds")


def reader(sock, epochs, extra=()):
    cmd = [read_tool(), "--socket", sock, "--dataset", "photos", "--batch", str(BATCH),
           "--epochs", str(epochs), "--json"] + CROP + list(extra)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, timeout=300):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"{p.args} exited {p.returncode}: {err}"
    return json.loads(out.strip().splitlines()[-1])


def solo(sock, epochs, extra=()):
    out, _ = run_read(sock, "photos", batch=BATCH, epochs=epochs, extra=CROP + list(extra))
    return out


def clients(d):
    """{id: {field: value}} of the attached clients, from STATS."""
    out = {}
    for k, v in d.stats().items():
        parts = k.split(".")
        if len(parts) == 3 and parts[0] == "clients" and parts[1].isdigit():
            out.setdefault(int(parts[1]), {})[parts[2]] = v
    return out


def wait_clients(d, n, what, timeout=60):
    wait_for(lambda: len(clients(d)) >= n, what, timeout=timeout)
    return clients(d)


def group_place(c):
    """The place (batches since epoch 0) a client's next planned batch has."""
    return int(c["batches"]) + int(c["inflight"])


def bpe():
    return (COUNT + BATCH - 1) // BATCH


def start_args(place):
    return ["--start-epoch", str(place // bpe()), "--start-seq", str(place % bpe())]


def counter(d, key):
    return float(d.stats()[key])


def settled(d, key):
    """STATS key once no client is attached and no job runs: the jobs of
    readers that left (planned up to their depth past their end) finish
    after they detach."""
    wait_for(lambda: d.stats()["clients.attached"] == "0", "the readers detached")
    last = None
    for _ in range(200):
        st = d.stats()
        now = (st[key], st["total.jobs"])
        if now == last and st["jobs.queued"] == "0" and st["jobs.running"] == "0":
            return float(st[key])
        last = now
        time.sleep(0.05)
    raise AssertionError(f"{key} did not settle")


JOINED = re.compile(r"client \d+ shares the producer of client \d+ \(group \d+, \d+ members, "
                    r"from epoch (\d+) batch (\d+)\)")


def join_places(d):
    """The places (batches since epoch 0) of the joins the daemon logged."""
    return [int(e) * bpe() + int(b) for e, b in JOINED.findall(d.read_log())]


def started_together(d, sock, epochs, extra_a, extra_b=None):
    """Two readers started while the workers are held until both have
    attached: neither plans past its ring's depth before the other is there."""
    with workers_held(d):
        procs = [reader(sock, epochs, extra_a), reader(sock, epochs, extra_b or extra_a)]
        wait_clients(d, 2, "both readers attached")
    return procs


def test_identical_readers_decode_once(photos, daemon_factory):
    """Counted, not timed: the samples the workers made for two readers
    are one stream's worth (and the few before the join), not two."""
    d = daemon_factory({"photos": photos}, workers=2)
    epochs, depth = 30, 4
    images = epochs * COUNT
    m0 = settled(d, "total.samples_made")
    alone = solo(d.sock, epochs, ["--depth", str(depth)])
    m1 = settled(d, "total.samples_made")
    j0, n0 = counter(d, "sharing.joins"), len(join_places(d))
    a, b = started_together(d, d.sock, epochs, ["--depth", str(depth)])
    ra, rb = finish(a), finish(b)
    m2 = settled(d, "total.samples_made")
    assert ra["digest"] == alone["digest"] and rb["digest"] == alone["digest"], \
        "a shared stream is not its solo stream"
    assert counter(d, "sharing.joins") == j0 + 1, d.read_log()
    joined = join_places(d)[n0:]
    assert len(joined) == 1, d.read_log()
    # the second reader decodes alone the batches before its join place:
    # those the first had begun when it attached, a ring's depth at most
    assert joined[0] <= depth, (joined, d.read_log())
    made_alone, made_pair = m1 - m0, m2 - m1
    # each run makes its epochs and up to a ring's depth past their end
    assert images <= made_alone <= images + depth * BATCH, made_alone
    assert images <= made_pair <= images + (joined[0] + depth) * BATCH, (made_pair, joined)


def test_join_mid_epoch_and_member_killed(photos, daemon_factory):
    d = daemon_factory({"photos": photos}, workers=2)
    epochs = 30
    a, b = started_together(d, d.sock, epochs, ["--params", "name=a"], ["--params", "name=b"])
    try:
        ids = sorted(clients(d))
        wait_for(lambda: int(clients(d).get(ids[0], {}).get("batches", 0)) >= 8,
                 "the readers under way")
        # ahead of the group by less than its depth: the third waits, then
        # joins (the group held still while it starts)
        with workers_held(d):
            c0 = clients(d)[ids[0]]
            assert c0["group_members"] == "2", c0
            place = group_place(c0) + 4
            c = reader(d.sock, 6, ["--params", "name=c"] + start_args(place))
            wait_for(lambda: any(v.get("name") == "c" for v in clients(d).values()),
                     "the third reader attached")
        wait_for(lambda: any(v.get("name") == "c" and v.get("group_members") == "3"
                             for v in clients(d).values()),
                 "the third reader in the group", timeout=30)
        b.send_signal(signal.SIGKILL)
        b.wait(10)
        ra, rc = finish(a), finish(c)
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert ra["digest"] == solo(d.sock, epochs)["digest"], "a, beside a killed member"
    assert rc["digest"] == solo(d.sock, 6, start_args(place))["digest"], "c, joined mid-epoch"
    assert "shares the producer" in d.read_log()


def test_member_that_stops_reading_is_split_off(photos, daemon_factory):
    d = daemon_factory({"photos": photos}, workers=2)
    epochs = 30
    a = reader(d.sock, epochs)
    held = None
    try:
        cs = wait_clients(d, 1, "the reader attached")
        aid = min(cs)
        wait_for(lambda: int(clients(d)[aid]["batches"]) >= 4, "the reader under way")
        # the reader stopped while the silent client attaches: it releases
        # nothing, so the group plans nothing past its ring and cannot pass
        # the place the silent one starts at (a reader that went on could
        # pass a place 2 batches ahead before the ATTACH is read, and then
        # nobody joins)
        os.kill(a.pid, signal.SIGSTOP)
        try:
            place = group_place(clients(d)[aid]) + 2
            line = ("ATTACH dataset=photos batch=%d transform=train size=64 seed=5 epoch=%d "
                    "seq=%d name=held\n" % (BATCH, place // bpe(), place % bpe())).encode()
            held = attach_held(d.sock, line)
        finally:
            os.kill(a.pid, signal.SIGCONT)
        wait_for(lambda: counter(d, "sharing.joins") >= 1, "the silent client in the group",
                 timeout=30)
        wait_for(lambda: counter(d, "sharing.splits") >= 1, "the silent client split off",
                 timeout=30)
        ra = finish(a)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
        if held:
            held.close()
    assert ra["digest"] == solo(d.sock, epochs)["digest"]
    assert "split off" in d.read_log()


def test_slow_member_is_split_off(photos, daemon_factory):
    """A member that reads a batch every 0.9 s releases often, but keeps the
    other waiting: it is split off (the hold is timed from when the group
    first waited on it, not from its last release), and the fast reader
    gets its solo stream.  Without the split the fast one could only go at
    the slow one's pace; with it, splits >= 1 whatever the machine's load."""
    d = daemon_factory({"photos": photos}, workers=2)
    epochs, depth = 5, ["--depth", "4"]
    want = solo(d.sock, epochs, depth)["digest"]
    slow, fast = started_together(d, d.sock, epochs,
                                  depth + ["--step-ms", "900", "--params", "name=slow"],
                                  depth + ["--params", "name=fast"])
    try:
        wait_for(lambda: any(v.get("group_members") == "2" for v in clients(d).values())
                 or counter(d, "sharing.splits") >= 1, "the two readers in one group",
                 timeout=30)
        rf = finish(fast, timeout=120)
    finally:
        for p in (slow, fast):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert rf["digest"] == want, "the fast reader's stream changed"
    assert counter(d, "sharing.splits") >= 1, d.read_log()
    assert "split off" in d.read_log()


def test_kill_storm_while_shared(photos, daemon_factory):
    d = daemon_factory({"photos": photos}, workers=2)
    epochs = 50
    stop = threading.Event()
    killed = []

    def storm():  # eight kills, one every 0.1 s of a reader's run
        while len(killed) < 8 and not stop.wait(0.1):
            for pid in d.worker_pids()[:1]:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass

    a, b = started_together(d, d.sock, epochs, [])
    t = threading.Thread(target=storm)
    t.start()
    try:
        ra, rb = finish(a), finish(b)
    finally:
        stop.set()
        t.join()
        for p in (a, b):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert len(killed) >= 4, "the storm killed too few workers to mean anything"
    wait_for(lambda: int(d.stats()["workers.alive"]) == 2, "the pool back to 2")
    want = solo(d.sock, epochs)["digest"]
    assert ra["digest"] == want and rb["digest"] == want
    assert counter(d, "sharing.batches") > 0


def test_share_off(photos, daemon_factory):
    d = daemon_factory({"photos": photos}, workers=2)
    m0 = counter(d, "total.samples_made")
    a = reader(d.sock, 3, ["--params", "share=0"])
    b = reader(d.sock, 3, ["--params", "share=0"])
    ra, rb = finish(a), finish(b)
    assert counter(d, "sharing.joins") == 0
    # each decoded its own (and up to its ring's depth past its end)
    assert counter(d, "total.samples_made") - m0 >= 2 * 3 * COUNT
    assert ra["digest"] == rb["digest"] == solo(d.sock, 3)["digest"]


def test_weights_share_the_workers(photos, daemon_factory, tmp_path):
    """Both readers must stay input-bound through the window: a deep ring
    each (a reader starved of CPU on a loaded machine would fill a shallow
    one, leave the queue and hand its turns to the other).  The ratio is
    the samples each was delivered in the window (the work the round robin
    handed out: same batches, same transform), judged with a wide margin
    (1.5 to 6 for weights 3:1; equal shares would be 1), on the first of
    three tries long enough to judge; the bytes are checked on every try.
    The config allows weight 3 (max-weight); STATS shows what each asked."""
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text("max-weight = 3\n")
    d = daemon_factory({"photos": photos}, workers=2, extra=["--config", str(conf)])
    # large crops (full-scale decodes): the readers stay input-bound for
    # seconds (AddressSanitizer's build decodes some 4x slower)
    epochs = 10 if d.sanitized() else 20
    big = ["--size", "224", "--depth", "32"]
    want = {seed: solo(d.sock, epochs, big + ["--seed", seed, "--params", "scale=0.6,1"])
            ["digest"] for seed in ("21", "22")}
    ratios = []
    for _ in range(3):
        light = reader(d.sock, epochs, big + ["--seed", "21", "--params",
                                              "name=light weight=1 scale=0.6,1"])
        heavy = reader(d.sock, epochs, big + ["--seed", "22", "--params",
                                              "name=heavy weight=3 scale=0.6,1"])
        try:
            wait_clients(d, 2, "both readers attached")
            time.sleep(0.3)  # both under way

            def by_name():
                return {v["name"]: v for v in clients(d).values()}

            # the window: from now to the last sample with both still attached
            s0 = s1 = by_name()
            while True:
                time.sleep(0.1)
                now = by_name()
                if set(now) != {"light", "heavy"}:
                    break
                s1 = now
            assert set(s0) == {"light", "heavy"}, "a reader finished before the window"
            assert s1["light"]["weight"] == "1" and s1["heavy"]["weight"] == "3"
            assert s1["heavy"]["weight_asked"] == "3"
            nl = int(s1["light"]["samples"]) - int(s0["light"]["samples"])
            nh = int(s1["heavy"]["samples"]) - int(s0["heavy"]["samples"])
            rl, rh = finish(light), finish(heavy)
        finally:
            for p in (light, heavy):
                if p.poll() is None:
                    p.kill()
                    p.wait()
        assert rl["digest"] == want["21"] and rh["digest"] == want["22"], "bytes changed"
        if nl + nh < 160 or nl <= 0:  # too short to judge: try again
            ratios.append(("short window", nl + nh))
            continue
        ratios.append(round(nh / nl, 2))
        assert 1.5 <= nh / nl <= 6, f"heavy:light samples {nh}:{nl}, weights 3:1"
        return
    pytest.fail(f"no window long enough to judge in three tries: {ratios}")
