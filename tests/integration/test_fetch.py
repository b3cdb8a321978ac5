"""test_fetch.py - the remote-fetch layer (daemon/fetch/) against real
servers on loopback, driven through tests/fetch_run.c: nginx serving a pack
folder (whole and ranged GETs, 403 and 404 after one request), a small
faulty server in this process (500 twice then 200, a truncated and a
corrupted shard the cache refuses), a port nobody listens on, the cache's
reopen and lock, and moto_server for signed S3 GETs (skipped, saying why,
where moto or boto3 is missing).  Every wait is bounded.
"""
import http.server
import os
import subprocess
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from servers import (free_port, moto_gets, moto_server, requests_for,  # noqa: E402
                     nginx, pack)  # noqa: F401 (fixtures)

FETCH_RUN = os.environ.get("RINGFEED_FETCH_RUN", os.path.join(
    os.environ.get("RINGFEED_BUILD_DIR", "build"), "tests/fetch_run"))


def run(*args, retries=2, backoff=10, input=None):
    """fetch_run's result line and exit code."""
    p = subprocess.run([FETCH_RUN, "--retries", str(retries), "--backoff-ms", str(backoff),
                        *args], capture_output=True, text=True, timeout=60, input=input)
    return p.returncode, p.stdout + p.stderr


def test_whole_and_ranged(nginx, pack, tmp_path):
    base, _ = nginx
    src = pack[0] / pack[1][0]
    data = src.read_bytes()
    rc, out = run("get", f"{base}/fm/{pack[1][0]}", "0", "0", str(tmp_path / "whole"))
    assert rc == 0 and "status=200 tries=1" in out, out
    assert (tmp_path / "whole").read_bytes() == data
    rc, out = run("get", f"{base}/fm/{pack[1][0]}", "100", "50", str(tmp_path / "range"))
    assert rc == 0 and "status=206 tries=1 bytes=50" in out, out
    assert (tmp_path / "range").read_bytes() == data[100:150]
    rc, out = run("get", f"{base}/fm/{pack[1][0]}", str(len(data) - 10), "0", str(tmp_path / "tail"))
    assert rc == 0 and "bytes=10" in out, out
    assert (tmp_path / "tail").read_bytes() == data[-10:]


def test_404_and_403_one_request(nginx, tmp_path):
    base, log = nginx
    rc, out = run("get", f"{base}/fm/nothing-here", "0", "0", str(tmp_path / "x"), retries=4)
    assert rc == 1 and "tries=1" in out and "HTTP 404" in out and f"{base}/fm/nothing-here" in out, out
    assert "after 1 try" in out, out
    assert requests_for(log, "/fm/nothing-here") == 1
    rc, out = run("get", f"{base}/forbidden/x", "0", "0", str(tmp_path / "x"), retries=4)
    assert rc == 1 and "HTTP 403" in out and "tries=1" in out, out
    assert requests_for(log, "/forbidden/x") == 1


def test_server_down(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/fm/MANIFEST"
    rc, out = run("get", url, "0", "0", str(tmp_path / "x"), retries=2)
    assert rc == 1 and "tries=3" in out and url in out and "curl error 7" in out, out
    assert "after 3 tries" in out, out


class Faulty(http.server.ThreadingHTTPServer):
    """Serves a folder; plan[path] lists statuses to answer before the file,
    or "truncate" / "corrupt" to serve it damaged every time."""

    def __init__(self, root):
        super().__init__(("127.0.0.1", 0), FaultyHandler)
        self.root, self.plan, self.count, self.lock = root, {}, {}, threading.Lock()


class FaultyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        srv = self.server
        with srv.lock:
            srv.count[self.path] = srv.count.get(self.path, 0) + 1
            plan = srv.plan.get(self.path, [])
            step = plan.pop(0) if plan and isinstance(plan, list) else plan
        if isinstance(step, int):
            body = b"<Error><Code>InternalError</Code></Error>"
            self.send_response(step)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        path = os.path.join(srv.root, self.path.lstrip("/"))
        if not os.path.isfile(path):
            self.send_error(404)
            return
        data = open(path, "rb").read()
        if step == "truncate":
            data = data[:-100]
        elif step == "corrupt":
            data = data[:-5] + bytes([data[-5] ^ 0xFF]) + data[-4:]
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def faulty(pack):
    srv = Faulty(str(pack[0].parent))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv, f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=10)


def test_500_twice_then_200(faulty, pack, tmp_path):
    srv, base = faulty
    path = f"/fm/{pack[1][1]}"
    srv.plan[path] = [500, 500]
    rc, out = run("get", base + path, "0", "0", str(tmp_path / "x"), retries=4)
    assert rc == 0 and "tries=3" in out and "status=200" in out, out
    assert srv.count[path] == 3
    assert (tmp_path / "x").read_bytes() == (pack[0] / pack[1][1]).read_bytes()
    srv.plan[path] = [503, 503, 503]
    rc, out = run("get", base + path, "0", "0", str(tmp_path / "y"), retries=1)
    assert rc == 1 and "HTTP 503 InternalError" in out and "after 2 tries" in out, out


def test_cache_verifies_and_survives(faulty, pack, tmp_path):
    srv, base = faulty
    cache = tmp_path / "cache"
    bad_t, bad_c = pack[1][0], pack[1][2]
    srv.plan[f"/fm/{bad_t}"] = "truncate"
    srv.plan[f"/fm/{bad_c}"] = "corrupt"
    rc, out = run("cache", str(cache), f"{base}/fm/")
    assert rc == 1, out
    assert f"error {bad_t}: cache: {bad_t} from {base}/fm/{bad_t} does not verify" in out, out
    assert f"error {bad_c}:" in out and "CRC" in out, out
    packs = list((cache / "packs").iterdir())
    assert len(packs) == 1
    present = sorted(p.name for p in packs[0].iterdir())
    assert bad_t not in present and bad_c not in present
    assert not any(n.startswith(".part-") for n in present), present
    good = [s for s in pack[1] if s not in (bad_t, bad_c)]
    assert present == good
    for s in good:
        assert (packs[0] / s).read_bytes() == (pack[0] / s).read_bytes()
    used = sum((pack[0] / s).stat().st_size for s in good)
    assert f"used {used}" in out, out

    # reopened: what is there verifies; fixed server: the rest arrives
    rc, out = run("lookup", str(cache), f"{base}/fm/")
    assert all(f"present {s}" in out for s in good) and f"absent {bad_t}" in out, out
    del srv.plan[f"/fm/{bad_t}"], srv.plan[f"/fm/{bad_c}"]
    before = dict(srv.count)
    rc, out = run("cache", str(cache), f"{base}/fm/")
    assert rc == 0, out
    assert all(srv.count.get(f"/fm/{s}") == before.get(f"/fm/{s}") for s in good), \
        "a verified shard was fetched again"
    # damaged while no daemon ran: found at the first lookup and removed
    victim = packs[0] / good[0]
    b = bytearray(victim.read_bytes())
    b[-3] ^= 1
    victim.write_bytes(bytes(b))
    rc, out = run("lookup", str(cache), f"{base}/fm/")
    assert f"absent {good[0]}: cache: removed" in out and not victim.exists(), out


def test_cache_budget_and_lock(faulty, pack, tmp_path):
    _, base = faulty
    cache = tmp_path / "cache"
    first = (pack[0] / pack[1][0]).stat().st_size
    rc, out = run("cache", str(cache), f"{base}/fm/", str(first))
    assert rc == 1 and f"ok {pack[1][0]}" in out and "evict first" in out, out
    holder = subprocess.Popen([FETCH_RUN, "hold", str(cache)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        rc, out = run("cache", str(cache), f"{base}/fm/")
        assert rc == 1 and f"cache folder {cache} is in use by another ringfeedd " \
                           f"(pid {holder.pid})" in out, out
    finally:
        holder.stdin.close()
        holder.wait(timeout=15)
    rc, out = run("hold", str(cache), input="")
    assert rc == 0 and "held" in out, out


def test_cache_folder_removed(faulty, tmp_path):
    _, base = faulty
    rc, out = run("cache", "/proc/no-such-place/cache", f"{base}/fm/")
    assert rc == 1 and "cache folder /proc/no-such-place/cache" in out, out


@pytest.fixture(scope="module")
def moto(pack, tmp_path_factory):
    with moto_server(pack[0], tmp_path_factory.mktemp("moto")) as srv:
        yield srv.endpoint


@pytest.fixture(scope="module")
def moto_auth(pack, tmp_path_factory):
    """moto_server checking every S3 request's signature (servers.moto_server)."""
    with moto_server(pack[0], tmp_path_factory.mktemp("moto-auth"), auth=True) as srv:
        yield srv


def s3get(srv, key, secret, name, out_file, home):
    env = dict(os.environ, AWS_ENDPOINT_URL=srv.endpoint, AWS_ACCESS_KEY_ID=key,
               AWS_SECRET_ACCESS_KEY=secret, AWS_REGION="us-east-1", HOME=str(home))
    env.pop("AWS_SESSION_TOKEN", None)
    return subprocess.run([FETCH_RUN, "--retries", "3", "--backoff-ms", "10", "s3get",
                           "s3://rf-packs/fm/", name, str(out_file)],
                          env=env, capture_output=True, text=True, timeout=60)


def test_s3_signature_checked(moto_auth, pack, tmp_path):
    """moto recomputes the SigV4 signature of each GET: the IAM user's keys
    fetch the shard; a wrong secret and an unknown key id are refused with
    403 and S3's code after one request (a 403 is not retried)."""
    srv, shard, out_file = moto_auth, pack[1][0], tmp_path / "s"
    p = s3get(srv, srv.key, srv.secret, shard, out_file, tmp_path)
    assert p.returncode == 0 and "signed=1" in p.stdout and "tries=1" in p.stdout, \
        p.stdout + p.stderr
    assert out_file.read_bytes() == (pack[0] / shard).read_bytes()
    path = f"/rf-packs/fm/{shard}"
    assert moto_gets(srv.log, path) == [200]
    wrong = srv.secret[:-1] + ("A" if srv.secret[-1] != "A" else "B")
    p = s3get(srv, srv.key, wrong, shard, out_file, tmp_path)
    assert p.returncode == 1 and "HTTP 403 SignatureDoesNotMatch" in p.stdout and \
        "tries=1" in p.stdout, p.stdout + p.stderr
    assert moto_gets(srv.log, path) == [200, 403]
    p = s3get(srv, "AKIAUNKNOWNKEY000000", srv.secret, shard, out_file, tmp_path)
    assert p.returncode == 1 and "HTTP 403 InvalidAccessKeyId" in p.stdout and \
        "tries=1" in p.stdout, p.stdout + p.stderr
    assert moto_gets(srv.log, path) == [200, 403, 403]


def test_s3_signed_get(moto, pack, tmp_path):
    env = dict(os.environ, AWS_ENDPOINT_URL=moto, AWS_ACCESS_KEY_ID="AKIDTEST",
               AWS_SECRET_ACCESS_KEY="secrettest", AWS_SESSION_TOKEN="tok",
               AWS_REGION="us-east-1", HOME=str(tmp_path))
    out_file = tmp_path / "s"
    p = subprocess.run([FETCH_RUN, "--retries", "1", "--backoff-ms", "10", "s3get",
                        "s3://rf-packs/fm/", pack[1][0], str(out_file)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "signed=1" in p.stdout, p.stdout + p.stderr
    assert out_file.read_bytes() == (pack[0] / pack[1][0]).read_bytes()
    p = subprocess.run([FETCH_RUN, "--retries", "3", "--backoff-ms", "10", "s3get",
                        "s3://rf-packs/fm/", "missing.rfs", str(out_file)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "HTTP 404 NoSuchKey" in p.stdout and "tries=1" in p.stdout, \
        p.stdout
