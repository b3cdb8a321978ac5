#!/usr/bin/python3
"""test_ringfeedctl.py - ringfeedctl against a fake control server that
answers with canned replies in the daemon's formats: the human output
(aligned key/value lines, the datasets table), --json (a valid object with
numbers as numbers and strings escaped), the line sent for each verb, ERR
replies on stderr with exit 1, usage errors with exit 2, an unreachable
daemon and a reply that breaks the protocol.

    test_ringfeedctl.py PATH-TO-ringfeedctl        (prints TAP)
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

REPLIES = {
    "PING": "OK pong\n",
    "STATUS": ('OK ringfeedd 0.1.0: workers=2/4 clients=1 datasets=2 io=io_uring '
               'uptime=12s note=a"b\\c stopping\n'),
    "STATS": ("OK 3\nclients.1.batches 120\nworkers.0.jobs 40\n"
              "io.backend io_uring\n"),
    "DATASETS": ("OK 2\nfmnist samples=60000 kind=raw shape=1x28x28 classes=10\n"
                 "imagenet-val samples=50000 kind=jpeg shape=3x224x224 classes=1000\n"),
    "WORKERS 8": "OK workers 8\n",
    "METRICS": ("OK 4\n# HELP ringfeed_total_batches Batches published\n"
                "# TYPE ringfeed_total_batches counter\n"
                "ringfeed_total_batches 5\n"
                'ringfeed_client_batches{client="1",name="a b"} 3\n'),
}


class Fake:
    """Answers each request line with REPLIES[line] (or `override`)."""

    def __init__(self, path, replies):
        self.path, self.replies, self.lines = path, replies, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while b"\n" not in buf:
                    data = conn.recv(4096)
                    if not data:
                        break
                    buf += data
                line = buf.decode().rstrip("\n")
                self.lines.append(line)
                conn.sendall(self.replies.get(line, "ERR bad-verb unknown verb\n").encode())

    def close(self):
        self.sock.close()


n = 0
failed = 0


def ok(cond, name, diag=None):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(f"{'' if cond else 'not '}ok {n} - {name}")
    if not cond and diag is not None:
        for line in str(diag).splitlines():
            print(f"#   {line}")
    sys.stdout.flush()


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
    ok(j == {"status": "ringfeedd 0.1.0: stopping", "workers": "2/4", "clients": 1,
             "datasets": 2, "io": "io_uring", "uptime": "12s", "note": 'a"b\\c'},
       "status --json: numbers as numbers, quote and backslash escaped", r.stdout)

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

    r = ctl("--socket", path, "metrics")
    ok(r.returncode == 0 and r.stdout == "".join(REPLIES["METRICS"].splitlines(True)[1:]),
       "metrics: the Prometheus text as sent", r.stdout)
    r = ctl("--socket", path, "--json", "metrics")
    ok(r.returncode == 0 and json.loads(r.stdout) == {"metrics": {
        "ringfeed_total_batches": 5, 'ringfeed_client_batches{client="1",name="a b"}': 3}},
       "metrics --json: series to value, comments left out", r.stdout)

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
                         "PING": "OK 1\npong\n"})
    r = ctl("--socket", path2, "status")
    ok(r.returncode == 1 and r.stdout == "" and
       "the pool is resizing, try again" in r.stderr, "ERR: message on stderr, exit 1", r)
    r = ctl("--socket", path2, "stats")
    ok(r.returncode == 1 and "closed the connection" in r.stderr,
       "a reply cut short: exit 1", r)
    r = ctl("--socket", path2, "ping")
    ok(r.returncode == 1 and "multi-line" in r.stderr, "a multi-line pong: exit 1", r)
    fake2.close()

    r = ctl("--socket", os.path.join(tmp, "none.sock"), "ping")
    ok(r.returncode == 1 and "is ringfeedd running" in r.stderr, "no daemon: exit 1", r)

    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
