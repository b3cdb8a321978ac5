"""test_remote.py - remote datasets end to end (daemon/remote.h, ahead.h): a
pack served by nginx and by moto_server on loopback, its shards fetched
into the node cache as the streams need them and read with the same digest
as the local folder; a restart fetches nothing again; a pack larger than
cache-size is served through eviction with block shuffle, and a global
shuffle whose batch cannot fit is refused naming why; a server that is
down, a 404 shard and a shard larger than cache-size each fail alone,
naming why, while a local dataset serves on; a reload fetches a failed one
again; ATTACH while the MANIFEST is held back is refused with the
progress, and a stream whose shards are held back waits on the network
(STATS says so); a server killed mid-epoch and started again, and a cache
folder removed under the daemon, cost nothing but time.  Every wait is
bounded (conftest.wait_for on STATS)."""
import contextlib
import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Daemon, raw_request, read_tool, run_read, wait_for  # noqa: E402
from servers import (free_port, idx_pack, moto_gets, moto_server,  # noqa: E402
                     nginx_server, requests_for, nginx, pack)  # noqa: F401 (fixtures)


def pack_files(folder):
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def start(tmp_path, datasets, lines, env=None, name="rf.conf", workers=2):
    """A daemon with datasets (name -> folder or URL) and config lines."""
    conf = tmp_path / name
    conf.write_text("".join(f"dataset.{k} = {v}\n" for k, v in datasets.items()) +
                    "".join(f"{line}\n" for line in lines))
    d = Daemon({}, workers=workers, extra=("--config", str(conf)), env=env)
    try:
        return d.start()
    except BaseException:
        d.cleanup()
        raise


def settled(d, served, failing=0):
    """Waits until STATS shows served datasets and failing ones; returns STATS."""
    wait_for(lambda: int(d.stats()["datasets"]) == served and
             int(d.stats()["datasets.failing"]) == failing,
             f"{served} dataset(s) served, {failing} failing", timeout=60)
    return d.stats()


def digest(d, name):
    out, _ = run_read(d.sock, name, batch=64, extra=("--seed", "7"))
    return out["digest"]


def test_http_dataset_then_restart(nginx, pack, tmp_path):
    base, log = nginx
    cache = tmp_path / "cache"
    lines = [f"cache-dir = {cache}", "cache-size = 1G"]
    files = pack_files(pack[0])
    # two datasets of one pack share the cache's files: fetched once
    remote = {"web": f"{base}/fm/", "web2": f"{base}/fm/"}
    d = start(tmp_path, {**remote, "local": pack[0]}, lines)
    try:
        settled(d, 3)
        assert digest(d, "web") == digest(d, "local") == digest(d, "web2")
        st = d.stats()
        assert int(st["fetch.objects"]) == len(files), st
        assert int(st["cache.shards"]) == len(files) - 1, st
        assert int(st["cache.evictions"]) == 0, st
        assert int(st["cache.limit_bytes"]) == 1 << 30
        size = sum((pack[0] / f).stat().st_size for f in files)
        assert int(st["cache.bytes"]) == size, st
        assert int(st["fetch.failures"]) == 0 and int(st["fetch.retries"]) == 0
    finally:
        d.cleanup()
    # each dataset reads the MANIFEST; the first also fetches it into the cache
    for f in files:
        assert requests_for(log, f"/fm/{f}") == (3 if f == "MANIFEST" else 1), f
    # a restart reads the MANIFEST (the pack may have changed) and nothing else
    d = start(tmp_path, {**remote, "local": pack[0]}, lines)
    try:
        settled(d, 3)
        assert digest(d, "web") == digest(d, "local")
        st = d.stats()
        assert int(st["fetch.objects"]) == 0, st
        assert int(st["cache.hits"]) > 0, st
    finally:
        d.cleanup()
    for f in files:
        assert requests_for(log, f"/fm/{f}") == (5 if f == "MANIFEST" else 1), f


def test_s3_dataset(pack, tmp_path):
    """moto checks every request's SigV4 signature: the IAM user's keys read
    the dataset with the local digest; a wrong secret fails it alone after
    one request, naming 403 SignatureDoesNotMatch, while a local one serves."""
    with moto_server(pack[0], tmp_path, auth=True) as moto:
        lines = [f"s3-endpoint = {moto.endpoint}", "s3-region = us-east-1"]
        env = {"AWS_ACCESS_KEY_ID": moto.key, "AWS_SECRET_ACCESS_KEY": moto.secret,
               "HOME": str(tmp_path)}
        d = start(tmp_path, {"lake": "s3://rf-packs/fm/", "local": pack[0]},
                  lines + [f"cache-dir = {tmp_path / 'cache'}"], env=env)
        try:
            settled(d, 2)
            assert digest(d, "lake") == digest(d, "local")
        finally:
            d.cleanup()
        manifest = "/rf-packs/fm/MANIFEST"
        before = len(moto_gets(moto.log, manifest))
        wrong = moto.secret[:-1] + ("A" if moto.secret[-1] != "A" else "B")
        env["AWS_SECRET_ACCESS_KEY"] = wrong
        d = start(tmp_path, {"lake": "s3://rf-packs/fm/", "local": pack[0]},
                  lines + [f"cache-dir = {tmp_path / 'cache2'}", "fetch-retries = 4"], env=env,
                  name="wrong.conf")
        try:
            st = settled(d, 1, failing=1)
            assert int(st["fetch.retries"]) == 0, st
            _, r = run_read(d.sock, "lake", check=False)
            assert r.returncode != 0 and "HTTP 403 SignatureDoesNotMatch" in r.stderr and \
                "after 1 try" in r.stderr, r.stderr
            digest(d, "local")
        finally:
            d.cleanup()
        assert moto_gets(moto.log, manifest)[before:] == [403]


def test_server_down_fails_alone(pack, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/fm/"
    d = start(tmp_path, {"down": url, "local": pack[0]},
              [f"cache-dir = {tmp_path / 'cache'}", "fetch-retries = 1"])
    try:
        st = settled(d, 1, failing=1)
        assert int(st["fetch.failures"]) == 1 and int(st["fetch.retries"]) == 1, st
        _, r = run_read(d.sock, "down", check=False)
        assert r.returncode != 0 and url in r.stderr and "curl error 7" in r.stderr, r.stderr
        digest(d, "local")
    finally:
        d.cleanup()


def test_404_shard_one_request(pack, tmp_path):
    root = tmp_path / "srv"
    shutil.copytree(pack[0], root / "fm")
    (root / "fm" / pack[1][1]).unlink()
    with nginx_server(root, tmp_path) as (base, log):
        d = start(tmp_path, {"holey": f"{base}/fm/", "local": pack[0]},
                  [f"cache-dir = {tmp_path / 'cache'}", "fetch-retries = 4"])
        try:
            settled(d, 2)  # the MANIFEST is there: served; the shard fails when needed
            _, r = run_read(d.sock, "holey", check=False)
            assert r.returncode != 0 and "404" in r.stderr and pack[1][1] in r.stderr, r.stderr
            digest(d, "local")
        finally:
            d.cleanup()
        assert requests_for(log, f"/fm/{pack[1][1]}") == 1


def test_shard_larger_than_cache_fails_alone(tmp_path):
    (tmp_path / "big").mkdir()
    big, _ = idx_pack(tmp_path / "big", n=1200, h=64, w=64, shard_size="1536K")
    with nginx_server(big.parent, tmp_path) as (base, log):
        d = start(tmp_path, {"big": f"{base}/fm/"},
                  [f"cache-dir = {tmp_path / 'cache'}", "cache-size = 1M"])
        try:
            settled(d, 0, failing=1)
            _, r = run_read(d.sock, "big", check=False)
            assert r.returncode != 0 and "cache-size is 1048576" in r.stderr, r.stderr
            assert "shard-00000.rfs" in r.stderr and "raise cache-size" in r.stderr, r.stderr
        finally:
            d.cleanup()
        assert requests_for(log, "/fm/MANIFEST") == 1


@pytest.fixture
def big(tmp_path):
    """A pack of 300 64x64 images in ~256K shards (1.2 MB: more than a 1M
    cache), local under tmp_path/big/srv/fm; returns (folder, shards)."""
    (tmp_path / "big").mkdir()
    return idx_pack(tmp_path / "big", n=300, h=64, w=64, shard_size="256K")


def test_pack_larger_than_cache(big, tmp_path):
    size = sum(p.stat().st_size for p in big[0].iterdir())
    fetched = {}
    with nginx_server(big[0].parent, tmp_path) as (base, log):
        for policy in ("belady", "lru"):
            d = start(tmp_path, {"big": f"{base}/fm/", "local": big[0]},
                      [f"cache-dir = {tmp_path / policy}", "cache-size = 1M",
                       f"cache-evict = {policy}"])
            try:
                settled(d, 2)
                block = ("--seed", "3", "--shuffle", "block", "--params", "block=60")
                out, _ = run_read(d.sock, "big", batch=20, epochs=2, extra=block)
                ref, _ = run_read(d.sock, "local", batch=20, epochs=2, extra=block)
                assert out["digest"] == ref["digest"]
                st = d.stats()
                assert int(st["cache.bytes"]) <= 1 << 20, st
                assert int(st["cache.evictions"]) > 0, st
                fetched[policy] = int(st["fetch.bytes"])
                # the default block (4 shards) is too large for this cache: the
                # error gives one that fits (a quarter of the shards it holds)
                _, r = run_read(d.sock, "big", batch=20, extra=("--shuffle", "block"),
                                check=False)
                assert r.returncode != 0 and "block=63 or less (1 shard of 63" in r.stderr, \
                    r.stderr
                # a global shuffle's batch lies in every shard: more than the
                # cache holds at once, refused with what to do
                _, r = run_read(d.sock, "big", batch=64, check=False)
                assert r.returncode != 0 and "shuffle=block" in r.stderr, r.stderr
                assert "cache-size is 1048576" in r.stderr, r.stderr
                # 64 samples span 3 one-shard blocks (6 shards) at worst: the
                # error says the batch that fits (the cache holds 4 shards)
                assert "block=63 and a batch of at most 63" in r.stderr, r.stderr
                digest(d, "local")
            finally:
                d.cleanup()
    # belady fetches each block's shards about once an epoch (2 epochs); lru
    # evicts shards needed again soon, so it fetches no less
    assert fetched["belady"] < 2 * 1.5 * size, (fetched, size)
    assert fetched["lru"] >= fetched["belady"], fetched


def test_server_killed_mid_epoch(big, tmp_path):
    port = free_port()
    srv = tmp_path / "srv1"
    srv.mkdir()
    d = None
    ctx = nginx_server(big[0].parent, srv, port=port)
    base, _ = ctx.__enter__()
    try:
        d = start(tmp_path, {"big": f"{base}/fm/", "local": big[0]},
                  [f"cache-dir = {tmp_path / 'cache'}", "cache-size = 1M",
                   "fetch-retries = 20"])
        settled(d, 2)
        block = ("--seed", "5", "--shuffle", "block", "--params", "block=60")
        ref, _ = run_read(d.sock, "local", batch=20, epochs=2, extra=block)
        # a trainer's pace (100 ms a batch): the second epoch needs shards the
        # first evicted, fetched long after the server is killed below
        cmd = [read_tool(), "--socket", d.sock, "--dataset", "big", "--batch", "20",
               "--epochs", "2", "--json", "--step-ms", "100", *block]
        reader = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        # the reader is under way: some shards fetched, the pack not all in
        wait_for(lambda: int(d.stats()["fetch.objects"]) >= 3, "fetches under way", timeout=60)
        ctx.__exit__(None, None, None)
        ctx = None
        wait_for(lambda: d.stats()["clients.network_waiting"] == "1",
                 "the stream waits while the server is down", timeout=60)
        assert reader.poll() is None
        (tmp_path / "srv2").mkdir()
        ctx = nginx_server(big[0].parent, tmp_path / "srv2", port=port)  # started again
        ctx.__enter__()
        out, err = reader.communicate(timeout=120)
        assert reader.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["digest"] == ref["digest"]
    finally:
        if ctx:
            ctx.__exit__(None, None, None)
        if d:
            d.cleanup()


def test_cache_folder_removed_under_the_daemon(big, tmp_path):
    cache = tmp_path / "cache"
    with nginx_server(big[0].parent, tmp_path) as (base, _):
        # One worker: it opened the pack in the first read.  A worker that
        # first opens an on-demand pack after its cache folder went fails
        # that pack until a reload (its MANIFEST is not fetched again): a
        # gap the stop's note names, not what this test is about.
        d = start(tmp_path, {"big": f"{base}/fm/", "local": big[0]},
                  [f"cache-dir = {cache}", "cache-size = 1M"], workers=1)
        try:
            settled(d, 2)
            block = ("--seed", "9", "--shuffle", "block", "--params", "block=60")
            ref, _ = run_read(d.sock, "local", batch=20, extra=block)
            assert run_read(d.sock, "big", batch=20, extra=block)[0]["digest"] == ref["digest"]
            shutil.rmtree(cache)
            before = int(d.stats()["fetch.objects"])
            # What the daemon thought it held is fetched again, into a new
            # folder.  The pause lets each worker's sweep close the files it
            # held (SWEEP_NS) while the daemon's last look at them is still
            # fresh (AHEAD_RECHECK_NS): a batch is planned on a shard no
            # worker can open, and must wait for it, not fail (a CI run
            # failed the stream here).
            time.sleep(0.15)
            assert run_read(d.sock, "big", batch=20, extra=block)[0]["digest"] == ref["digest"]
            assert int(d.stats()["fetch.objects"]) > before
            digest(d, "local")
        finally:
            d.cleanup()


def test_reload_fetches_a_failed_one(pack, tmp_path):
    root = tmp_path / "srv"
    (root / "fm").mkdir(parents=True)
    with nginx_server(root, tmp_path) as (base, _):
        d = start(tmp_path, {"web": f"{base}/fm/", "local": pack[0]},
                  [f"cache-dir = {tmp_path / 'cache'}", "fetch-retries = 0"])
        try:
            settled(d, 1, failing=1)
            reply = raw_request(d.sock, b"ATTACH dataset=web batch=10\n").decode()
            assert reply.startswith("ERR ") and "404" in reply and f"{base}/fm/" in reply, reply
            # the operator publishes the pack and reloads: it is fetched and served
            shutil.rmtree(root / "fm")
            shutil.copytree(pack[0], root / "fm")
            reloads = int(d.stats()["reloads"])
            d.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: int(d.stats()["reloads"]) > reloads, "the reload", timeout=60)
            st = settled(d, 2)
            assert st["reloads.failed"] == "0", d.read_log()[-2000:]
            assert digest(d, "web") == digest(d, "local")
        finally:
            d.cleanup()


class HeldHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the pack, but holds every GET whose path ends with `held`
    until the test releases it."""
    held = ".rfs"
    release = threading.Event()
    asked = threading.Event()

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.endswith(self.held):
            self.asked.set()
            self.release.wait(60)
        super().do_GET()


@contextlib.contextmanager
def held_server(pack_dir, held, tmp_path):
    """A server of pack_dir's parent holding GETs ending with held, and a
    daemon reading it as "web" beside the local pack; yields (base URL,
    daemon).  Released, stopped and cleaned up however the test ends."""
    HeldHandler.held = held
    HeldHandler.release = threading.Event()
    HeldHandler.asked = threading.Event()
    handler = functools.partial(HeldHandler, directory=str(pack_dir.parent))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    d = None
    try:
        d = start(tmp_path, {"web": f"{base}/fm/", "local": pack_dir},
                  [f"cache-dir = {tmp_path / 'cache'}"])
        yield base, d
    finally:
        HeldHandler.release.set()
        if d:
            d.cleanup()
        srv.shutdown()
        srv.server_close()


def test_attach_while_fetching_is_refused_with_progress(pack, tmp_path):
    with held_server(pack[0], "/MANIFEST", tmp_path) as (base, d):
        assert HeldHandler.asked.wait(60), "the MANIFEST was not asked for"
        st = d.stats()
        assert st["datasets"] == "1" and st["datasets.failing"] == "0", st
        reply = raw_request(d.sock, b"ATTACH dataset=web batch=10\n").decode()
        assert reply.startswith("ERR ") and "not served yet, still fetching: reading the " \
            "MANIFEST" in reply, reply
        assert f"{base}/fm/" in reply, reply
        HeldHandler.release.set()
        settled(d, 2)
        assert digest(d, "web") == digest(d, "local")


def test_stream_waits_on_the_network(pack, tmp_path):
    with held_server(pack[0], ".rfs", tmp_path) as (base, d):
        settled(d, 2)
        cmd = [read_tool(), "--socket", d.sock, "--dataset", "web", "--batch", "64",
               "--epochs", "1", "--json", "--seed", "7"]
        reader = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        assert HeldHandler.asked.wait(60), "no shard was asked for"
        wait_for(lambda: d.stats()["clients.network_waiting"] == "1",
                 "the stream waits on the network", timeout=60)
        assert b"ringfeed_client_network_wait_seconds_total" in raw_request(d.sock,
                                                                             b"METRICS\n")
        HeldHandler.release.set()
        out, err = reader.communicate(timeout=120)
        assert reader.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["digest"] == digest(d, "local")
        st = d.stats()
        assert st["clients.network_waiting"] == "0" and int(st["cache.misses"]) > 0, st
        assert b"ringfeed_fetch_seconds_count" in raw_request(d.sock, b"METRICS\n")


def test_cache_disk_full_fails_the_stream_alone(big, tmp_path):
    """A cache folder on a file system smaller than cache-size: the shard
    that does not fit fails its stream with the reason; the local dataset,
    and the daemon, serve on."""
    cache = tmp_path / "small-fs"
    cache.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(cache)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {r.stderr.strip()}")
    try:
        with nginx_server(big[0].parent, tmp_path) as (base, _):
            d = start(tmp_path, {"big": f"{base}/fm/", "local": big[0]},
                      [f"cache-dir = {cache}", "cache-size = 4M"])
            try:
                settled(d, 2)
                _, r = run_read(d.sock, "big", batch=20, check=False,
                                extra=("--shuffle", "block", "--params", "block=60"))
                assert r.returncode != 0 and "No space left on device" in r.stderr, r.stderr
                assert f"{base}/fm/" in r.stderr, r.stderr
                digest(d, "local")
                assert int(d.stats()["datasets"]) == 2
            finally:
                d.cleanup()
    finally:
        subprocess.run(["umount", "-l", str(cache)], capture_output=True)
