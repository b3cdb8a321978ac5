"""servers.py - what test_fetch.py and test_remote.py share: a small idx
pack, nginx serving a folder on loopback (with its access log, to count
requests), and moto_server holding a pack in a bucket.  Each server is a
context manager whose waits are bounded; a missing program skips the test,
saying which."""
import contextlib
import os
import re
import shutil
import socket
import struct
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import wait_for  # noqa: E402

PACK = os.environ.get("RINGFEED_PACK", os.path.join(
    os.environ.get("RINGFEED_BUILD_DIR", "build"), "tools/ringfeed-pack"))
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def listening_in(pid, addr, port):
    """Is a TCP socket listening on addr:port in the network namespace of
    process pid?  (/proc/PID/net/tcp: readable from any namespace, where a
    connect would need a route into that one.)"""
    want = "%08X:%04X" % (int.from_bytes(socket.inet_aton(addr), "little"), port)
    try:
        with open(f"/proc/{pid}/net/tcp") as f:
            next(f)
            return any(line.split()[1] == want and line.split()[3] == "0A" for line in f)
    except OSError:
        return False


def idx_pack(root, n=300, h=8, w=8, shard_size="8K"):
    """A tensor pack of n h x w images in several small shards, in
    root/srv/fm; returns (its folder, its shard names)."""
    images = bytes((i * 7 + j) % 251 for i in range(n) for j in range(h * w))
    with open(root / "images", "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, h, w) + images)
    with open(root / "labels", "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(i % 10 for i in range(n)))
    out = root / "srv" / "fm"
    out.parent.mkdir()
    subprocess.run([PACK, "idx", "--images", str(root / "images"), "--labels",
                    str(root / "labels"), "--codec", "none", "--shard-size", shard_size, str(out)],
                   check=True, capture_output=True, timeout=60)
    shards = sorted(p.name for p in out.iterdir() if p.name.endswith(".rfs"))
    assert len(shards) >= 3
    return out, shards


@contextlib.contextmanager
def nginx_server(root, d, addr="127.0.0.1", wrap=(), port=None):
    """nginx serving the folder root on addr, its files under d, on port (a
    free one when None: give the same one to start it again); /forbidden/
    answers 403; wrap: a command prefix that nginx runs under (and execs
    into), e.g. `ip netns exec NS` to serve inside a network namespace.
    Yields (base URL, access log path); the log's lines start with the
    client's address (nginx's combined format)."""
    if not os.path.exists(NGINX):
        pytest.skip("nginx is not installed (scripts/install-deps installs nginx-light)")
    port = port or free_port()
    conf = d / "nginx.conf"
    temps = "".join(f"{k}_temp_path {d}/{k};\n" for k in ("client_body", "proxy", "fastcgi"))
    # as root, nginx's workers would switch to nobody, who cannot read the
    # test's 0700 temporary folders
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(f"""daemon off;
{user}
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log {d}/access.log;
  {temps}
  server {{
    listen {addr}:{port};
    root {root};
    location /forbidden/ {{ return 403; }}
  }}
}}
""")
    proc = subprocess.Popen([*wrap, NGINX, "-c", str(conf), "-p", str(d), "-e", str(d / "error.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: listening_in(proc.pid, addr, port) or proc.poll() is not None, "nginx",
                 timeout=15)
        if proc.poll() is not None:
            pytest.fail(f"nginx did not start: {proc.stderr.read().decode()}")
        yield f"http://{addr}:{port}", d / "access.log"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def requests_for(log, path):
    """GETs of path in an nginx access log."""
    with open(log) as f:
        return sum(1 for line in f if f"GET {path} " in line)


def boto_python():
    for py in ("/usr/bin/python3", shutil.which("python3.11")):
        if py and subprocess.run([py, "-c", "import boto3"], capture_output=True).returncode == 0:
            return py
    return None


class Moto:
    """A running moto_server: its endpoint, the keys that sign for the
    bucket, and its log (one line per request)."""

    def __init__(self, endpoint, key, secret, log):
        self.endpoint, self.key, self.secret, self.log = endpoint, key, secret, log


# With auth, moto lets the first INITIAL_NO_AUTH_ACTION_COUNT actions through
# unsigned (moto/core/authorization.py counts them per server process), then
# checks every request's SigV4 signature against the keys of its IAM users.
# The setup spends exactly those three actions on an IAM user, its policy
# and its access key; the bucket is then made and filled with that key, so
# from the first S3 action on, a request that is not signed right is
# refused.
AUTH_SETUP = """
iam = boto3.client("iam", endpoint_url=ENDPOINT, region_name="us-east-1",
                   aws_access_key_id="AKIDSETUP", aws_secret_access_key="unchecked")
iam.create_user(UserName="rf-reader")
iam.put_user_policy(UserName="rf-reader", PolicyName="s3", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*",
                                             "Resource": "*"}]}))
k = iam.create_access_key(UserName="rf-reader")["AccessKey"]
KEY, SECRET = k["AccessKeyId"], k["SecretAccessKey"]
"""
AUTH_ACTIONS = 3


@contextlib.contextmanager
def moto_server(pack_dir, d, auth=False):
    """moto_server on loopback with pack_dir's files under s3://rf-packs/fm/;
    yields a Moto.  auth=True makes moto check every S3 request's signature
    against an IAM user's access key (Moto.key, Moto.secret); without it
    any keys are accepted.  Skips where moto or boto3 is missing."""
    server = shutil.which("moto_server")
    if not server:
        pytest.skip("moto_server is not installed")
    py = boto_python()
    if not py:
        pytest.skip("no python3 with boto3 (neither /usr/bin/python3 nor python3.11)")
    port = free_port()
    env = dict(os.environ)
    if auth:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(AUTH_ACTIONS)
    log_path = d / "moto.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=log,
                            stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: listening(port) or proc.poll() is not None, "moto_server", timeout=30)
        assert proc.poll() is None, log_path.read_text()
        endpoint = f"http://127.0.0.1:{port}"
        setup = f"""
import boto3, json, os, sys
ENDPOINT = "{endpoint}"
KEY, SECRET = "AKIDTEST", "secrettest"
{AUTH_SETUP if auth else ""}
s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                  aws_access_key_id=KEY, aws_secret_access_key=SECRET)
s3.create_bucket(Bucket="rf-packs")
for name in sorted(os.listdir("{pack_dir}")):
    s3.upload_file(os.path.join("{pack_dir}", name), "rf-packs", "fm/" + name)
print(KEY, SECRET)
"""
        p = subprocess.run([py, "-c", setup], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr + log_path.read_text()
        key, secret = p.stdout.split()
        yield Moto(endpoint, key, secret, log_path)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


def moto_gets(log, path):
    """The statuses of the GETs of path in moto_server's log, in order."""
    out = []
    with open(log) as f:
        for line in f:
            m = re.search(r'"GET (\S+) HTTP/[\d.]+" (\d+)', line)
            if m and m.group(1) == path:
                out.append(int(m.group(2)))
    return out


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """A tensor pack of 300 8x8 images in several small shards (idx_pack)."""
    return idx_pack(tmp_path_factory.mktemp("pack"))


@pytest.fixture(scope="module")
def nginx(pack, tmp_path_factory):
    """nginx serving the pack's parent folder; /forbidden/ answers 403."""
    with nginx_server(pack[0].parent, tmp_path_factory.mktemp("nginx")) as srv:
        yield srv
