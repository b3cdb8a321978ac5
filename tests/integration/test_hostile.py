"""test_hostile.py - many clients, idle connections and bad positions never
hurt the daemon or the other clients (issue 11's defects 1, 3, 6, 9, 10).

Regressions held here:
  - STATS with a thousand attached clients used to overrun the reply's line
    bound and use the error as an offset (SIGSEGV, every client dropped);
  - the 257th attached client's stream failed with "ring 257 is not mapped"
    (a worker held 256 rings) after its ATTACH was accepted; now clients are
    bounded by max-clients, refused at ATTACH with "ERR too-many";
  - idle connections that never send used to hold descriptors forever; now
    they are closed after idle-sec, and connections over max-connections
    get "ERR too-many" instead of a bare reset;
  - positions past 2^32 epochs wrapped (epoch 2^32 was epoch 0's stream);
  - peers the access rule refuses held a place against max-connections
    until idle-sec (eight idle ones from another uid locked root out); now
    each is answered ERR denied and closed as it is accepted, never
    counted, and ringfeedctl prints the daemon's ERR where its request
    found the connection closed (it used to say "Broken pipe");
  - a client writing into its own ring (tests/ring_scribbler) reached other
    clients: in a decode-once share group the worker copied each chunk from
    the first member's ring into the others', so a client attached first
    with another's stream rewrote that client's labels and pixels; and zstd
    records were decoded and checksummed inside the slot, so the scribbling
    made the daemon count and log records of a healthy dataset as corrupt.
    Now the other member gets its solo digest and no sample is bad.

Each daemon here is stopped with SIGTERM at the end and must exit 0.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import (binary, connect_unix, ctl, ctl_tool, raw_request, read_dump_rows,
                      read_tool, run_read, wait_for, workers_held)

WAIT = 30.0


@pytest.fixture
def daemon(daemon_factory, packed_fmnist, tmp_path):
    made = []

    def make(conf="", workers=1):
        path = tmp_path / f"ringfeedd-{len(made)}.conf"
        path.write_text(conf)
        d = daemon_factory({"fm": packed_fmnist["test"]}, workers=workers,
                           extra=["--config", str(path)])
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc.poll() is None:
            d.proc.send_signal(signal.SIGTERM)
            assert d.proc.wait(60) == 0, d.read_log()[-3000:]
        else:
            raise AssertionError(f"the daemon died ({d.proc.returncode}):\n{d.read_log()[-3000:]}")


def attach_raw(d, line=b"ATTACH dataset=fm batch=1 depth=2\n"):
    """An attached client held open: the socket (its fds closed: the daemon
    keeps the ring while the connection lives)."""
    s = connect_unix(d.sock, WAIT)
    s.sendall(line)
    msg, fds, _, _ = socket.recv_fds(s, 4096, 4)
    for fd in fds:
        os.close(fd)
    return s, msg


def test_many_clients(daemon):
    d = daemon("max-clients = 1024\nmax-connections = 2000\nmemory-budget = 1G\n")
    held = []
    try:
        for i in range(300):
            s, msg = attach_raw(d)
            assert msg.startswith(b"OK attach"), (i, msg)
            held.append(s)
        # the 301st client's stream is served (a worker maps every ring)
        out, _ = run_read(d.sock, "fm", batch=250, epochs=1)
        assert out["samples"] == 10000, out
        for i in range(300, 1023):
            s, msg = attach_raw(d)
            assert msg.startswith(b"OK attach"), (i, msg)
            held.append(s)
        # STATS and METRICS with 1023 clients: whole replies, or an ERR
        for verb in (b"STATS\n", b"METRICS\n"):
            r = raw_request(d.sock, verb, timeout=WAIT)
            head = r.split(b"\n", 1)[0]
            assert head.startswith(b"OK ") or head.startswith(b"ERR "), head
            if head.startswith(b"OK "):
                assert int(head.split()[1]) == r.count(b"\n") - 1, head
        st = d.stats()
        assert int(st["clients.attached"]) == 1023
        s, msg = attach_raw(d)
        held.append(s)
        assert msg.startswith(b"OK attach"), msg
        # one over max-clients: refused by name, nothing else disturbed
        s, msg = attach_raw(d)
        held.append(s)
        assert msg.startswith(b"ERR too-many"), msg
        assert b"max-clients" in msg, msg
        assert ctl(d.sock, "ping").returncode == 0
    finally:
        for s in held:
            s.close()
    wait_for(lambda: int(d.stats()["clients.attached"]) == 0, "every client to detach")


def test_connections_capped_and_idle_closed(daemon):
    d = daemon("max-connections = 20\nidle-sec = 2\n")
    idle = [connect_unix(d.sock, WAIT) for _ in range(19)]
    try:
        # connection 20 is the last allowed; the next ones get a clear ERR
        r = raw_request(d.sock, b"PING\n")
        assert r.startswith(b"OK pong"), r
        extra = connect_unix(d.sock, WAIT)
        idle.append(extra)
        over = connect_unix(d.sock, WAIT)
        over.settimeout(WAIT)
        msg = over.recv(4096)
        over.close()
        assert msg.startswith(b"ERR too-many"), msg
        assert b"max-connections" in msg, msg
        # the silent ones are closed after idle-sec, and the daemon answers again
        for s in idle:
            s.settimeout(WAIT)
        assert all(s.recv(16) == b"" for s in idle), "an idle connection was not closed"
        assert ctl(d.sock, "ping").returncode == 0
        st = d.stats()
        assert int(st["connections.refused"]) >= 1
        assert int(st["connections.idle_closed"]) >= 20
        log = d.read_log()
        assert len(re.findall(r"over max-connections", log)) == 1, log
        assert "silent for idle-sec" in log
    finally:
        for s in idle:
            s.close()


def test_attached_clients_never_idle_closed(daemon):
    d = daemon("idle-sec = 1\n")
    s, msg = attach_raw(d)
    try:
        assert msg.startswith(b"OK attach"), msg
        time.sleep(3)  # three idle sweeps: an attached client stays
        assert int(d.stats()["clients.attached"]) == 1
    finally:
        s.close()


def test_epochs_never_wrap(daemon):
    d = daemon()
    # the last epoch is delivered, then the stream ends by name (it used to
    # go on with epoch 2^32, byte for byte epoch 0)
    out, r = run_read(d.sock, "fm", batch=5000, epochs=2,
                      extra=["--start-epoch", "4294967295"], check=False)
    assert r.returncode != 0, r.stdout
    assert "epoch 4294967296" in r.stderr and "batch 2 of 4" in r.stderr, r.stderr
    # a start past the last epoch is refused at ATTACH (it used to wrap)
    r = raw_request(d.sock, b"ATTACH dataset=fm batch=5000 epoch=4294967295 "
                            b"seq=18446744073709551615\n")
    assert r.startswith(b"ERR bad-arg"), r
    assert b"epochs are numbered 0..4294967295" in r, r
    r = raw_request(d.sock, b"ATTACH dataset=fm batch=5000 epoch=4294967294 seq=2\n")
    assert r.startswith(b"OK attach"), r
    assert ctl(d.sock, "ping").returncode == 0


def test_waited_counts_before_the_first_batch(daemon):
    d = daemon()
    workers = d.worker_pids()
    for pid in workers:  # no batch can come: the client waits from its attach
        os.kill(pid, signal.SIGSTOP)
    try:
        s, msg = attach_raw(d, b"ATTACH dataset=fm batch=10 depth=2 name=waiter\n")
        try:
            assert msg.startswith(b"OK attach"), msg
            cid = int(re.search(rb"id=(\d+)", msg).group(1))
            # it used to show 0.000 until its first release
            wait_for(lambda: float(d.stats()[f"clients.{cid}.waited_s"]) >= 0.1,
                     "waited_s to count the wait before the first batch")
        finally:
            s.close()
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)


def test_start_seq_past_epoch_end_is_a_later_epoch(daemon, tmp_path):
    """ATTACH's seq past the epoch's end starts in a later epoch (proto/ctl.h);
    libringfeed used to refuse the ring the daemon sent for it (the header's
    normalized position "disagreed" with the one asked for)."""
    d = daemon()
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    # 10000 samples in batches of 100: 100 batches an epoch
    out_a, _ = run_read(d.sock, "fm", batch=100, epochs=1, dump=str(a),
                        extra=["--start-epoch", "1", "--start-seq", "203"])
    out_b, _ = run_read(d.sock, "fm", batch=100, epochs=1, dump=str(b),
                        extra=["--start-epoch", "3", "--start-seq", "3"])
    rows = a.read_text().splitlines()
    assert rows and rows[0].split()[:2] == ["3", "3"], rows[:1]
    assert a.read_text() == b.read_text()
    assert out_a["digest"] == out_b["digest"]


def test_closed_idle_connections_free_their_places_at_once(daemon):
    """Regression: the daemon counted a connection it had closed (its
    descriptor gone, the peer at EOF) until libuv's close callback ran, so a
    peer connecting right after the idle close found max-connections still
    reached and was refused (test_connections_capped_and_idle_closed failed
    so under a loaded CI machine).  A place is free once its descriptor is."""
    d = daemon("max-connections = 20\nidle-sec = 1\n")
    refused = 0
    for _ in range(6):
        # the last round's connections gone (STATS' own is the one open)
        wait_for(lambda: int(d.stats()["connections.open"]) <= 1, "connections to close")
        idle = [connect_unix(d.sock, WAIT) for _ in range(20)]
        try:
            for s in idle:
                s.settimeout(WAIT)
            assert idle[-1].recv(16) == b"", "an idle connection was not closed"
            # at once, as the peer sees its EOF: no process spawned between
            s = connect_unix(d.sock, WAIT)
            s.sendall(b"PING\n")
            reply = s.recv(4096)
            s.close()
            refused += reply.startswith(b"ERR too-many")
            assert reply.startswith(b"OK pong") or reply.startswith(b"ERR too-many"), reply
            for s in idle:
                s.recv(16)
        finally:
            for s in idle:
                s.close()
    assert refused == 0, f"{refused} of 6 connections right after the idle close were refused"


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

# Run as nobody: connects n times (the odd ones then send PING; a closed
# socket is fine), says so, waits for a line on stdin, then reads each
# connection to its end and prints what came as JSON, still holding them.
HOLDER = r"""
import json, socket, sys
path, n, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
held = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(wait)
    s.connect(path)
    if i % 2:
        try:
            s.sendall(b"PING\n")
        except OSError:
            pass
    held.append(s)
print("connected", flush=True)
sys.stdin.readline()
got = []
for s in held:
    data, end = b"", "no end"
    try:
        while True:
            b = s.recv(4096)
            if not b:
                end = "eof"
                break
            data += b
    except ConnectionResetError:
        end = "reset"
    except socket.timeout:
        pass
    got.append([data.decode(errors="replace"), end])
print(json.dumps(got), flush=True)
sys.stdin.readline()
"""


def test_denied_peers_hold_no_place(daemon):
    """Peers the access rule refuses are answered ERR denied and closed as
    they are accepted, never counted against max-connections: with eight of
    them connected (and still holding their ends), root has all eight
    places, and the next is answered ERR too-many, which ringfeedctl prints."""
    if not shutil.which("setpriv") or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to act as another user")
    d = daemon("max-connections = 8\nidle-sec = 3600\nsocket-mode = 0666\n")
    os.chmod(d.dir, 0o755)  # nobody reaches the socket; the daemon keeps it out
    holder = subprocess.Popen(NOBODY + [sys.executable, "-c", HOLDER, d.sock, "8", str(WAIT)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    mine = []
    try:
        assert holder.stdout.readline() == "connected\n", "nobody's peers could not connect"
        # the eight were queued first: the daemon has taken them all before this
        r = ctl(d.sock, "ping", check=False)
        assert r.returncode == 0 and r.stdout == "pong\n", r
        for i in range(8):
            s = connect_unix(d.sock, WAIT)
            mine.append(s)
            s.sendall(b"PING\n")
            assert s.recv(4096).startswith(b"OK pong"), f"root's connection {i + 1} of 8"
        # the ninth is refused by name, and ringfeedctl prints the daemon's answer
        r = ctl(d.sock, "ping", check=False)
        assert r.returncode == 1 and "(too-many)" in r.stderr, r
        assert "max-connections" in r.stderr and "Broken pipe" not in r.stderr, r
        # asked on a place root holds (a new connection would be the ninth)
        mine[0].sendall(b"STATS\n")
        reply = b""
        while not re.match(rb"OK (\d+)\n", reply) or \
                reply.count(b"\n") < int(reply.split()[1]) + 1:
            reply += mine[0].recv(65536)
        st = dict(line.split(" ", 1) for line in reply.decode().splitlines()[1:])
        assert int(st["connections.denied"]) == 8, st
        assert int(st["connections.refused"]) == 1, st
        assert int(st["connections.open"]) == 8, st
        # every denied peer read its ERR line and then the end, while it holds its socket
        holder.stdin.write("\n")
        holder.stdin.flush()
        got = json.loads(holder.stdout.readline())
        assert len(got) == 8, got
        for data, end in got:
            assert data.startswith("ERR denied uid 65534 gid 65534 ") and data.count("\n") == 1, got
            assert end in ("eof", "reset"), got
    finally:
        for s in mine:
            s.close()
        holder.kill()
        holder.wait()
    # a denied ringfeedctl prints the daemon's ERR whichever way its request met the close
    for _ in range(10):
        r = subprocess.run(NOBODY + [ctl_tool(), "--socket", d.sock, "ping"],
                           capture_output=True, text=True, timeout=WAIT)
        assert r.returncode == 1 and r.stderr.rstrip().endswith("(denied)"), r
        assert "uid 65534" in r.stderr, r


def scribbler(sock, line, seconds=120, batches=1 << 40, headers=False):
    """tests/ring_scribbler attached with the ATTACH line (no newline):
    it writes labels 7 and pixels 0xAB into the slots being filled and
    releases each batch as soon as it is published; with headers, it also
    forges its slots' headers (chunks, count, epoch, seq)."""
    return subprocess.Popen([binary("tests/ring_scribbler"), sock, str(seconds), str(batches),
                             line] + (["--headers"] if headers else []),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_share_member_never_writes_another_members_batches(daemon, tmp_path):
    """A client that attaches first with another's stream (same dataset,
    seed, batch: the defaults) and scribbles on its ring while releasing
    promptly leaves the other member's batches byte for byte its solo run's:
    the worker copies a shared chunk from its own memory, never from the
    first member's ring."""
    d = daemon(workers=2)
    solo_dump, victim_dump = tmp_path / "solo.txt", tmp_path / "victim.txt"
    alone, _ = run_read(d.sock, "fm", batch=1000, epochs=5, dump=str(solo_dump),
                        extra=["--params", "share=0"])
    joins = int(d.stats()["sharing.joins"])
    # the workers held until both are attached and grouped: the scribbler's
    # ring is the first of every shared job from the reader's join on
    with workers_held(d):
        evil = scribbler(d.sock, "ATTACH dataset=fm batch=1000 name=scribbler version=3")
        wait_for(lambda: d.stats()["clients.attached"] == "1", "the scribbler to attach")
        victim = subprocess.Popen([read_tool(), "--socket", d.sock, "--dataset", "fm", "--batch",
                                   "1000", "--epochs", "5", "--json", "--dump-indices",
                                   str(victim_dump)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: int(d.stats()["sharing.joins"]) > joins,
                 "the reader to join the scribbler's group", timeout=WAIT)
    out, err = victim.communicate(timeout=120)
    evil.terminate()
    evil_out, evil_err = evil.communicate(timeout=WAIT)
    assert victim.returncode == 0, err
    assert evil.returncode == 0, evil_err
    m = re.match(r"released (\d+) batches, (\d+) slot overwrites", evil_out)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, evil_out
    shared = json.loads(out.strip().splitlines()[-1])
    a, b = read_dump_rows(solo_dump), read_dump_rows(victim_dump)
    changed = sum(x != y for x, y in zip(a, b))
    assert len(a) == len(b) == 50000 and changed == 0, \
        f"{changed} of {len(b)} samples' (index, label, flags) differ from the solo run's"
    assert shared["digest"] == alone["digest"], "the shared stream's pixels are not its solo run's"


def test_forged_slot_headers_never_reach_a_joining_member(daemon, tmp_path):
    """A client whose slot headers (chunks, count, epoch, seq) are forged
    while a reader joins its share group: the reader's slots are planned
    from the daemon's own record of the group's batches, never copied from
    the forger's ring, so its stream is its solo run's, it does not stall
    waiting for chunks that were never planned, and it ends in time."""
    d = daemon(workers=2)
    solo_dump, victim_dump = tmp_path / "solo.txt", tmp_path / "victim.txt"
    alone, _ = run_read(d.sock, "fm", batch=1000, epochs=3, dump=str(solo_dump),
                        extra=["--params", "share=0"])
    joins = int(d.stats()["sharing.joins"])
    with workers_held(d):
        evil = scribbler(d.sock, "ATTACH dataset=fm batch=1000 name=forger version=3",
                         headers=True)
        wait_for(lambda: d.stats()["clients.attached"] == "1", "the forger to attach")
        time.sleep(0.3)  # its planned slots' headers forged, again and again
        victim = subprocess.Popen([read_tool(), "--socket", d.sock, "--dataset", "fm", "--batch",
                                   "1000", "--epochs", "3", "--json", "--dump-indices",
                                   str(victim_dump)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: int(d.stats()["sharing.joins"]) > joins,
                 "the reader to join the forger's group", timeout=WAIT)
    try:
        out, err = victim.communicate(timeout=60)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.communicate()
        evil.terminate()
        evil.communicate(timeout=WAIT)
    assert victim.returncode == 0, err
    a, b = read_dump_rows(solo_dump), read_dump_rows(victim_dump)
    changed = sum(x != y for x, y in zip(a, b))
    assert len(a) == len(b) == 30000 and changed == 0, \
        f"{changed} of {len(b)} samples' (epoch, seq, index, label, flags) differ"
    assert json.loads(out.strip().splitlines()[-1])["digest"] == alone["digest"]


def test_scribbling_client_never_makes_records_bad(daemon):
    """A client writing into its ring while the workers fill it garbles its
    own batches only: the daemon checks and decodes records in its own
    memory, so a healthy dataset (zstd records) gets no bad sample, no
    "checksum" count and no log line blaming a shard."""
    d = daemon(workers=2)
    r = subprocess.run([binary("tests/ring_scribbler"), d.sock, "120", "400",
                        "ATTACH dataset=fm batch=500 name=scribbler share=0 version=2"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("released 400 batches"), r.stdout
    st = d.stats()
    bad = {k: v for k, v in st.items() if k.startswith("errors.bad.") and v != "0"}
    assert not bad, f"bad samples counted for a healthy dataset: {bad}"
    assert "bad sample" not in d.read_log(), d.read_log()[-3000:]
