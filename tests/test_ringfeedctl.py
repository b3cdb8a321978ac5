#!/usr/bin/python3
"""test_ringfeedctl.py - ringfeedctl against a fake control server that
answers with canned replies in the daemon's formats: the human output
(aligned key/value lines, the datasets table), --json (a valid object with
numbers as numbers and strings escaped), the line sent for each verb, ERR
replies on stderr with exit 1, usage errors with exit 2, an unreachable
daemon and a reply that breaks the protocol; `metrics --output FILE` (a
symlink planted at FILE.tmp not followed, the file's mode, a failed rename
leaving nothing behind); and `top`: its --once frame
from two canned STATS replies (exact, the rates over the daemon's uptime),
its usage errors, and a daemon that goes away.

    test_ringfeedctl.py PATH-TO-ringfeedctl        (prints TAP)
"""
import json
import os
import subprocess
import sys
import tempfile
import time

from fake_ctl import Fake  # tests/fake_ctl.py
from tap import done, ok  # tests/tap.py

REPLIES = {
    "PING": "OK pong\n",
    "STATUS": ('OK ringfeedd 0.1.0: workers=2/4 clients=1 datasets=2 io=io_uring '
               'uptime=12s note=a"b\\c stopping\n'),
    "STATS": ("OK 3\nclients.1.batches 120\nworkers.0.jobs 40\n"
              "io.backend io_uring\n"),
    "DATASETS": ("OK 2\nfmnist samples=60000 kind=raw shape=1x28x28 classes=10\n"
                 "imagenet-val samples=50000 kind=jpeg shape=3x224x224 classes=1000\n"),
    "WORKERS 8": "OK workers 8\n",
    "WORKERS auto": "OK workers auto\n",
    "METRICS": ("OK 4\n# HELP ringfeed_total_batches Batches published\n"
                "# TYPE ringfeed_total_batches counter\n"
                "ringfeed_total_batches 5\n"
                'ringfeed_client_batches{client="1",name="a b"} 3\n'),
}


def stats_reply(uptime, samples, busy, waited):
    """A STATS reply in the daemon's format: one worker, one client."""
    lines = [f"uptime_seconds {uptime:.6f}", "workers.target 2", "workers.alive 1",
             "clients.attached 1", "datasets 2", "datasets.failed 0", "jobs.queued 0",
             f"total.batches {samples // 10}", f"total.samples {samples}",
             f"total.jobs {samples // 10}", f"time.busy_seconds {busy:.6f}",
             f"time.io_seconds {busy / 4:.6f}", f"time.decode_seconds {busy / 2:.6f}",
             f"time.transform_seconds {busy / 4:.6f}", "errors.bad_samples 0",
             "memory.rings_bytes 2097152", "memory.locked_bytes 2097152",
             "memory.budget_bytes 1073741824", "io.backend io_uring", "io.reason -",
             "workers.0.pid 4242", "workers.0.state ready",
             f"workers.0.jobs {samples // 10}", f"workers.0.samples {samples}",
             f"workers.0.busy_s {busy:.3f}", f"workers.0.io_s {busy / 4:.3f}",
             f"workers.0.decode_s {busy / 2:.3f}", f"workers.0.transform_s {busy / 4:.3f}",
             "clients.7.dataset fmnist-train", "clients.7.name a-rather-long-trainer-name",
             "clients.7.rank 1", "clients.7.world 4", "clients.7.batch 10",
             "clients.7.depth 4", f"clients.7.batches {samples // 10}",
             f"clients.7.samples {samples}", f"clients.7.waited_s {waited:.3f}",
             "clients.7.ready 2", "clients.7.inflight 2", "clients.7.ring_bytes 2097152",
             "clients.7.locked 1", "clients.7.failed 0"]
    return f"OK {len(lines)}\n" + "".join(line + "\n" for line in lines)


TOP_FRAME = """\
ringfeedd 9.9.9  up 00:00:12  io io_uring  workers 1/2  clients 1  datasets 2 (0 failed)
samples/s 2000.0  batches/s 200.0  jobs/s 200.0  queued 0  bad samples 0 (0.0/s)
rings 2.0 MiB of 1.0 GiB  locked 2.0 MiB  pool busy 75.0%  (io 25.0%  decode 50.0%  transform 25.0%)
rates over 2.00 s

WORKER      PID STATE      BUSY%   JOBS/S SAMPLES/S    IO% DECODE%  XFORM%
     0     4242 ready       75.0    200.0    2000.0   25.0    50.0    25.0

CLIENT USER     NAME                       DATASET      RANK  BATCH/S SAMPLES/S  WAIT%   READY  INFL VERDICT
     7 -        a-rather-long-trainer-name fmnist-train  1/4    200.0    2000.0   40.0     2/4     2 input-bound
"""


def test_top(ctl, tmp):
    """ringfeedctl top: --once's frame over a pipe, its usage errors, a
    daemon that is not there or goes away."""
    path = os.path.join(tmp, "top.sock")
    status = "OK ringfeedd 9.9.9: workers=1/2 clients=1\n"
    fake = Fake(path, {"STATUS": status,
                       "STATS": [stats_reply(10.0, 1000, 1.0, 0.1),
                                 stats_reply(12.0, 5000, 2.5, 0.9)]}, multi=True)
    r = ctl("--socket", path, "top", "--once", "--interval", "0.1")
    # rates over the daemon's 2 s of uptime (not the 0.1 s slept): exact
    ok(r.returncode == 0 and r.stdout == TOP_FRAME, "top --once: the frame, over 2 s", r)
    ok("\033" not in r.stdout, "top --once down a pipe: no escape codes", r.stdout)
    ok(fake.lines == ["STATUS", "STATS", "STATUS", "STATS"],
       "top --once: STATUS and STATS, twice", fake.lines)

    sent = len(fake.lines)
    for args, name in ((("top", "--bogus"), "unknown option"),
                       (("top", "--interval"), "--interval without seconds"),
                       (("top", "--interval", "0"), "--interval 0"),
                       (("top", "--interval", "1s"), "--interval 1s"),
                       (("--json", "top", "--once"), "--json")):
        r = ctl("--socket", path, *args)
        ok(r.returncode == 2 and r.stdout == "" and "top" in r.stderr,
           f"top usage error: {name}: exit 2", r)
    ok(len(fake.lines) == sent, "top usage errors send nothing", fake.lines[sent:])
    r = ctl("--help")
    ok(r.returncode == 0 and "top [--once] [--interval SECONDS]" in r.stdout,
       "--help lists top [--once] [--interval SECONDS]", r.stdout)
    r = ctl("top", "--help")
    ok(r.returncode == 0 and "--interval SECONDS" in r.stdout and "--once" in r.stdout,
       "top --help", r)

    # without --once down a pipe: a plain frame per interval; the daemon
    # gone for good: a message and exit 1
    p = subprocess.Popen([sys.argv[1], "--socket", path, "top", "--interval", "0.1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    fake.close()
    os.unlink(path)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    ok(p.returncode == 1 and "lost the daemon" in err and "is ringfeedd running" in err,
       "top: the daemon gone: a message, exit 1", (p.returncode, err))
    ok(out.count("WORKER ") >= 2 and "\033" not in out and "CLIENT " in out,
       "top down a pipe: plain frames, one per refresh", out)

    r = ctl("--socket", os.path.join(tmp, "none.sock"), "top", "--once")
    ok(r.returncode == 1 and "is ringfeedd running" in r.stderr and r.stdout == "",
       "top --once, no daemon: exit 1", r)


def test_output_file(ctl, path, tmp):
    """metrics --output FILE: a symlink planted at FILE.tmp (or any other
    name) is never written through; the file takes a plain create's mode;
    a failed rename leaves nothing behind."""
    box = os.path.join(tmp, "textfile")
    os.mkdir(box)
    out, victim = os.path.join(box, "rf.prom"), os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, out + ".tmp")
    want = "".join(REPLIES["METRICS"].splitlines(True)[1:])
    old_mask = os.umask(0o022)
    try:
        r = ctl("--socket", path, "metrics", "--output", out)
    finally:
        os.umask(old_mask)
    with open(victim) as f:
        kept = f.read()
    ok(r.returncode == 0 and kept == "precious\n",
       "metrics --output: a symlink at FILE.tmp is not followed", (r, kept))
    ok(os.path.islink(out + ".tmp") and not os.path.islink(out),
       "metrics --output: the planted link left alone, FILE a file of its own",
       sorted(os.listdir(box)))
    with open(out) as f:
        ok(f.read() == want, "metrics --output: FILE holds the metrics")
    ok(os.stat(out).st_mode & 0o777 == 0o644, "metrics --output: FILE is 0666 less the umask",
       oct(os.stat(out).st_mode))
    ok(sorted(os.listdir(box)) == ["rf.prom", "rf.prom.tmp"],
       "metrics --output: no temporary file left", sorted(os.listdir(box)))

    # the rename fails (FILE is a folder that is not empty): exit 1, no temporary file left
    for f in os.listdir(box):
        os.unlink(os.path.join(box, f))
    os.mkdir(out)
    open(os.path.join(out, "x"), "w").close()
    r = ctl("--socket", path, "metrics", "--output", out)
    ok(r.returncode == 1 and "renaming" in r.stderr and os.listdir(box) == ["rf.prom"],
       "metrics --output: a failed rename removes the temporary file",
       (r, sorted(os.listdir(box))))
    os.unlink(os.path.join(out, "x"))
    os.rmdir(out)
    os.rmdir(box)
    os.unlink(victim)


def main():
    exe = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="rf-ctl-")
    path = os.path.join(tmp, "ctl.sock")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RINGFEED_SOCKET", "XDG_RUNTIME_DIR")}
    fake = Fake(path, REPLIES)

    def ctl(*args, environ=None):
        return subprocess.run([exe, *args], capture_output=True, text=True,
                              env=environ or env, timeout=60)

    r = ctl("--socket", path, "ping")
    ok(r.returncode == 0 and r.stdout == "pong\n", "ping prints pong", r)
    ok(fake.lines[-1] == "PING", "ping sends PING", fake.lines)
    r = ctl("--socket", path, "--json", "ping")
    ok(r.returncode == 0 and json.loads(r.stdout) == {"reply": "pong"}, "ping --json", r)

    r = ctl("--socket", path, "status")
    want = ("ringfeedd 0.1.0: stopping\n"
            "workers   2/4\n"
            "clients   1\n"
            "datasets  2\n"
            "io        io_uring\n"
            "uptime    12s\n"
            'note      a"b\\c\n')
    ok(r.returncode == 0 and r.stdout == want, "status: bare words, then aligned key/value",
       r.stdout)
    r = ctl("--socket", path, "--json", "status")
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = None
    ok(j == {"status": "ringfeedd 0.1.0: stopping", "workers": "2/4", "workers_alive": 2,
             "workers_target": 4, "clients": 1, "datasets": 2, "io": "io_uring",
             "uptime": "12s", "uptime_s": 12, "note": 'a"b\\c'},
       "status --json: numbers as numbers (workers and uptime split out too), quote and "
       "backslash escaped", r.stdout)

    r = ctl("--socket", path, "stats")
    want = ("clients.1.batches  120\n"
            "workers.0.jobs     40\n"
            "io.backend         io_uring\n")
    ok(r.returncode == 0 and r.stdout == want, "stats: aligned key/value", r.stdout)
    r = ctl("--socket", path, "--json", "stats")
    ok(r.returncode == 0 and json.loads(r.stdout) ==
       {"clients.1.batches": 120, "workers.0.jobs": 40, "io.backend": "io_uring"},
       "stats --json: one flat object", r.stdout)

    r = ctl("--socket", path, "datasets")
    want = ("NAME          SAMPLES  KIND  SHAPE      CLASSES\n"
            "fmnist        60000    raw   1x28x28    10\n"
            "imagenet-val  50000    jpeg  3x224x224  1000\n")
    ok(r.returncode == 0 and r.stdout == want, "datasets: a table", r.stdout)
    r = ctl("--socket", path, "--json", "datasets")
    ok(r.returncode == 0 and json.loads(r.stdout) == {"datasets": [
        {"name": "fmnist", "samples": 60000, "kind": "raw", "shape": "1x28x28",
         "classes": 10},
        {"name": "imagenet-val", "samples": 50000, "kind": "jpeg", "shape": "3x224x224",
         "classes": 1000}]}, "datasets --json", r.stdout)

    r = ctl("--socket", path, "workers", "8")
    ok(r.returncode == 0 and r.stdout == "workers: 8\n", "workers 8", r)
    ok(fake.lines[-1] == "WORKERS 8", "workers sends WORKERS 8", fake.lines)
    r = ctl("--socket", path, "--json", "workers", "8")
    ok(r.returncode == 0 and json.loads(r.stdout) == {"workers": 8}, "workers --json", r)
    r = ctl("--socket", path, "workers", "auto")
    ok(r.returncode == 0 and r.stdout == "workers: auto\n", "workers auto", r)
    ok(fake.lines[-1] == "WORKERS auto", "workers auto sends WORKERS auto", fake.lines)
    r = ctl("--socket", path, "--json", "workers", "auto")
    ok(r.returncode == 0 and json.loads(r.stdout) == {"workers": "auto"}, "workers auto --json",
       r)

    r = ctl("--socket", path, "metrics")
    ok(r.returncode == 0 and r.stdout == "".join(REPLIES["METRICS"].splitlines(True)[1:]),
       "metrics: the Prometheus text as sent", r.stdout)
    r = ctl("--socket", path, "--json", "metrics")
    ok(r.returncode == 0 and json.loads(r.stdout) == {"metrics": {
        "ringfeed_total_batches": 5, 'ringfeed_client_batches{client="1",name="a b"}': 3}},
       "metrics --json: series to value, comments left out", r.stdout)

    test_output_file(ctl, path, tmp)

    r = ctl("ping", environ={**env, "RINGFEED_SOCKET": path})
    ok(r.returncode == 0 and r.stdout == "pong\n", "RINGFEED_SOCKET is the default", r)
    os.symlink(path, os.path.join(tmp, "ringfeed.sock"))
    r = ctl("ping", environ={**env, "XDG_RUNTIME_DIR": tmp})
    ok(r.returncode == 0 and r.stdout == "pong\n",
       "else $XDG_RUNTIME_DIR/ringfeed.sock when it exists", r)
    os.unlink(os.path.join(tmp, "ringfeed.sock"))
    r = ctl("ping", environ={**env, "XDG_RUNTIME_DIR": tmp})
    ok(r.returncode == 1 and "/run/ringfeed/ringfeed.sock" in r.stderr,
       "else the system socket /run/ringfeed/ringfeed.sock", r.stderr)

    # usage errors: exit 2, nothing sent
    sent = len(fake.lines)
    for args, name in ((("--socket", path), "no command"),
                       (("--socket", path, "frobnicate"), "unknown command"),
                       (("--socket", path, "attach", "dataset=x"), "attach is not a command"),
                       (("--socket", path, "workers"), "workers without N"),
                       (("--socket", path, "workers", "x"), "workers x"),
                       (("--socket", path, "workers", "0"), "workers 0"),
                       (("--socket", path, "workers", "257"), "workers 257"),
                       (("--socket", path, "workers", "banana"), "workers banana"),
                       (("--socket", path, "ping", "extra"), "ping with an argument"),
                       (("--bogus", "ping"), "unknown option")):
        r = ctl(*args)
        ok(r.returncode == 2 and r.stdout == "" and r.stderr, f"usage error: {name}: exit 2", r)
    ok(len(fake.lines) == sent, "usage errors send nothing", fake.lines[sent:])
    r = ctl("--help")
    ok(r.returncode == 0 and "workers <n>" in r.stdout, "--help lists the commands", r)
    fake.close()

    # ERR replies and broken replies
    path2 = os.path.join(tmp, "ctl2.sock")
    fake2 = Fake(path2, {"STATUS": "ERR busy the pool is resizing, try again\n",
                         "STATS": "OK 3\nonly.one 1\n",
                         "PING": "OK 1\npong\n",
                         "RELOAD": "ERR bad-verb unknown verb RELOAD\n"})
    r = ctl("--socket", path2, "status")
    ok(r.returncode == 1 and r.stdout == "" and
       "the pool is resizing, try again" in r.stderr, "ERR: message on stderr, exit 1", r)
    # a daemon older than RELOAD: its refusal, named (a failed systemctl reload)
    r = ctl("--socket", path2, "reload")
    ok(r.returncode == 1 and "unknown verb RELOAD" in r.stderr and "(bad-verb)" in r.stderr,
       "reload against an older daemon: its ERR bad-verb, exit 1", r)
    r = ctl("--socket", path2, "stats")
    ok(r.returncode == 1 and "closed the connection" in r.stderr,
       "a reply cut short: exit 1", r)
    r = ctl("--socket", path2, "ping")
    ok(r.returncode == 1 and "multi-line" in r.stderr, "a multi-line pong: exit 1", r)
    fake2.close()

    r = ctl("--socket", os.path.join(tmp, "none.sock"), "ping")
    ok(r.returncode == 1 and "is ringfeedd running" in r.stderr, "no daemon: exit 1", r)

    test_top(ctl, tmp)

    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    return done()


if __name__ == "__main__":
    sys.exit(main())
