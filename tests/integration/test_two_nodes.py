"""test_two_nodes.py - two nodes and a store, made of network namespaces:
one data-parallel job across them reads a remote dataset through each
node's own ringfeedd and node cache (docs/design/remote.md, "Two nodes").

  hosts    three namespaces joined by veth pairs to a bridge in a fourth:
           node A (10.213.0.1, hostname rf-a), node B (.2, rf-b), store S
           (.3); each with loopback up and a hosts file naming the three
           (`ip netns exec` mounts /etc/netns/NS/hosts); processes that
           take part in a job also get their node's hostname (a UTS
           namespace), so torch's rendezvous and Open MPI see two hosts.
  store    nginx in S serves a pack of 2000 Fashion-MNIST samples in
           several shards over HTTP on S's address; its access log names
           the client of every request.
  nodes    A and B each run a ringfeedd in their namespace with their own
           config (`dataset.small = http://10.213.0.3:PORT/ds/`), cache
           folder and socket; the test waits (bounded) until STATS shows
           the dataset served.
  torch    `torchrun --nnodes 2 --nproc_per_node 1` (c10d rendezvous at A's
           address) runs examples/train_torch.py, node 0 in A, node 1 in B,
           each rank on its node's daemon, gloo over the veth interfaces;
  mpi      `mpirun` in A starts ringfeed-train there and, through an rsh
           agent that enters B's namespace, in B, one rank per node on its
           node's daemon, TCP (oob and btl) kept to 10.213.0.0/24.
  checks   for both jobs: every epoch the ranks' samples together are the
           dataset once (no repeat, none lost) and the ranks end with
           identical parameters; each node's daemon served batches; then
           nginx's log shows each node fetched each shard exactly once and
           nothing reached S from any other address.

Skips, saying why, where namespaces cannot be made (not root, no `ip` or
`unshare`, the kernel refuses) or nginx, torch, torchrun or mpirun (or an
MPI build of ringfeed-train) is missing.  The namespaces, the processes in
them and the hosts files go whatever happens.  About 10 s on 2 cores.
"""
import collections
import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import BUILD, Daemon, binary, dump_rows, pack_first, wait_for  # noqa: E402
from servers import NGINX, nginx_server, requests_for  # noqa: E402
from test_train_mpi import checksums, json_of  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "train_torch.py")
N = 2000          # samples: even, so 2 ranks split an epoch with no padding
NET = "10.213.0"  # the hosts' subnet (/24), private to this run's bridge
HOSTS = {"a": 1, "b": 2, "s": 3}   # host -> last byte of its address


def addr(host):
    return f"{NET}.{HOSTS[host]}"


def hostname(host):
    return f"rf-{host}"


def sh(*cmd, check=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}: {r.stderr}")
    return r


class Hosts:
    """The namespaces of one run, named after the test's pid: rf<pid>x (the
    bridge) and rf<pid>a, rf<pid>b, rf<pid>s (the hosts)."""

    def __init__(self):
        self.tag = f"rf{os.getpid()}"
        self.made = []

    def ns(self, host):
        return self.tag + host

    def make(self):
        """Creates the namespaces and links; skips where the first cannot
        be made."""
        for tool in ("ip", "unshare"):
            if not shutil.which(tool):
                pytest.skip(f"no `{tool}` (iproute2, util-linux): cannot make network namespaces")
        if os.geteuid() != 0:
            pytest.skip("network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")
        bridge = self.ns("x")
        r = sh("ip", "netns", "add", bridge, check=False)
        if r.returncode != 0:
            pytest.skip(f"cannot make a network namespace: {r.stderr.strip()}")
        self.made.append(bridge)
        sh("ip", "-n", bridge, "link", "add", "name", "br0", "type", "bridge")
        sh("ip", "-n", bridge, "link", "set", "br0", "up")
        names = "".join(f"{addr(h)} {hostname(h)}\n" for h in HOSTS)
        for h in HOSTS:
            ns = self.ns(h)
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            etc = f"/etc/netns/{ns}"
            os.makedirs(etc, exist_ok=True)
            with open(f"{etc}/hosts", "w") as f:
                f.write("127.0.0.1 localhost\n" + names)
            sh("ip", "-n", bridge, "link", "add", "name", f"v{h}", "type", "veth",
               "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", bridge, "link", "set", f"v{h}", "master", "br0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr(h)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
        return self

    def on(self, host, named=False):
        """A command prefix that runs in host's namespace (exec: the pid is
        the command's); named: also in a UTS namespace with host's name."""
        wrap = ["ip", "netns", "exec", self.ns(host)]
        if named:
            wrap += ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname(host)]
        return wrap

    def remove(self):
        """Kills what still runs in the namespaces (only this run's
        processes are in them), deletes them and their hosts files."""
        for ns in reversed(self.made):
            r = sh("ip", "netns", "pids", ns, check=False)
            for pid in r.stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
        self.made = []
        with contextlib.suppress(OSError):   # only when no other run uses it
            os.rmdir("/etc/netns")


@pytest.fixture
def hosts():
    h = Hosts()
    try:
        yield h.make()
    finally:
        h.remove()


def node_daemon(hosts, host, url, tmp_path):
    """host's ringfeedd: its own config, cache folder and socket, started in
    its namespace; returned once the remote dataset is served."""
    conf = tmp_path / f"{host}.conf"
    conf.write_text(f"dataset.small = {url}\ncache-dir = {tmp_path / ('cache-' + host)}\n"
                    "cache-size = 1G\n")
    d = Daemon({}, extra=("--config", str(conf)))
    d.args = hosts.on(host) + d.args
    d.start()
    # ATTACH is refused while the dataset is fetched: wait for it served
    wait_for(lambda: int(d.stats()["datasets"]) == 1 or int(d.stats()["datasets.failing"]),
             f"node {host}'s daemon to serve the remote dataset", timeout=60)
    st = d.stats()
    assert int(st["datasets"]) == 1 and int(st["datasets.failing"]) == 0, (st, d.read_log())
    return d


def run_pair(cmds, timeout=240):
    """Runs the commands together (one per node); returns their completed
    (stdout, stderr), or fails with both outputs if one exits non-zero."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               GLOO_SOCKET_IFNAME="eth0")
    procs = [subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                              start_new_session=True) for cmd in cmds]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.communicate()
    bad = [(cmd, p.returncode, o) for cmd, p, o in zip(cmds, procs, outs) if p.returncode]
    assert not bad, "\n\n".join(f"{c} exited {rc}:\n{o[0]}\n{o[1]}" for c, rc, o in bad)
    return outs


def once_per_epoch(dumps, epochs):
    """Every epoch, the ranks' dumped indices together are 0..N-1 once."""
    ranks = [dump_rows(p) for p in dumps]
    for e in range(epochs):
        got = collections.Counter(i for r in ranks for s in sorted(r[e]) for i in r[e][s])
        assert sorted(got) == list(range(N)) and set(got.values()) == {1}, (
            e, [i for i, c in got.items() if c != 1][:10], len(got))
        # each rank read half the epoch
        assert [sum(len(v) for v in r[e].values()) for r in ranks] == [N // 2] * 2, e


def served_samples(d):
    """Samples the daemon published (STATS total.samples)."""
    return int(d.stats()["total.samples"])


def test_two_nodes_remote_dataset(hosts, tmp_path):
    if not os.path.exists(NGINX):
        pytest.skip("nginx is not installed (scripts/install-deps installs nginx-light)")
    pytest.importorskip("torch")
    torchrun = shutil.which("torchrun") or "/usr/bin/torchrun"
    if not os.path.exists(torchrun):
        pytest.skip("no torchrun")
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("no mpirun (openmpi-bin)")
    with open(os.path.join(BUILD, "config.h")) as f:
        if "#define RINGFEED_HAVE_MPI 1" not in f.read():
            pytest.skip("ringfeed-train was built without MPI (-Dmpi, libopenmpi-dev)")
    trainer = binary("examples/ringfeed-train")

    (tmp_path / "pack").mkdir()
    pack = pack_first(tmp_path / "pack", N, extra=("--shard-size", "256K"))
    shards = sorted(f for f in os.listdir(pack) if f.endswith(".rfs"))
    assert len(shards) >= 3, shards
    (tmp_path / "nginx").mkdir()
    with contextlib.ExitStack() as stack:
        base, log = stack.enter_context(nginx_server(os.path.dirname(pack), tmp_path / "nginx",
                                                     addr=addr("s"), wrap=hosts.on("s")))
        url = f"{base}/{os.path.basename(pack)}/"
        daemons = {}
        for h in ("a", "b"):
            daemons[h] = node_daemon(hosts, h, url, tmp_path)
            stack.callback(daemons[h].cleanup)

        # PyTorch: one torchrun per node, rank 0 in A (the rendezvous orders
        # the nodes by hostname), each rank on its node's daemon
        before = {h: served_samples(d) for h, d in daemons.items()}
        torch_out = run_pair([hosts.on(h, named=True) + [
            torchrun, "--nnodes", 2, "--nproc_per_node", 1, "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"{addr('a')}:29400", "--rdzv_id", hosts.tag,
            "--max_restarts", 0, "--redirects", 2, "--tee", 2,
            "--log_dir", tmp_path / f"torch-logs-{h}", EXAMPLE,
            "--socket", daemons[h].sock, "--train", "small", "--eval", "small",
            "--batch", 100, "--epochs", 2, "--lr", 0.02, "--json",
            "--dump-indices", tmp_path / "torch.{rank}"] for h in ("a", "b")])
        a_out, b_out = (o[0] for o in torch_out)
        objs = [ln for ln in a_out.splitlines() if ln.startswith("{")]
        assert len(objs) == 1 and not any(ln.startswith("{") for ln in b_out.splitlines()), (
            a_out, b_out)
        job = json.loads(objs[0])
        assert job["world"] == 2 and job["batches_per_epoch"] == N // 2 // 100, job
        r0, r1 = job["ranks"]
        assert (r0["rank"], r1["rank"]) == (0, 1)
        assert r0["param_sha256"] == r1["param_sha256"], job["ranks"]
        assert [e["test_samples"] for e in job["epochs"]] == [N, N], job["epochs"]
        once_per_epoch([tmp_path / "torch.0", tmp_path / "torch.1"], 2)
        for h, d in daemons.items():
            # at least its rank's training share of both epochs
            assert served_samples(d) - before[h] >= N, (h, d.stats())
        print(f"torchrun across 2 nodes: world {job['world']}, "
              f"{job['batches_per_epoch']} batches/epoch/rank, "
              f"epochs {[(e['loss'], e['test_acc']) for e in job['epochs']]}, "
              f"param_sha256 rank0 {r0['param_sha256'][:16]} rank1 {r1['param_sha256'][:16]}")

        # MPI: mpirun in A; B reached through the rsh agent
        agent = tmp_path / "netns-agent"
        agent.write_text(f"""#!/bin/sh
# Open MPI's rsh agent for test_two_nodes.py: runs a command on a host,
# i.e. in that host's network namespace, named as the host; logs the host
host=$1; shift
echo "$host" >> {tmp_path / "agent.log"}
case $host in
  {hostname('a')}) ns={hosts.ns('a')} ;;
  {hostname('b')}) ns={hosts.ns('b')} ;;
  *) echo "netns-agent: no namespace for host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
""")
        agent.chmod(agent.stat().st_mode | stat.S_IXUSR)
        before = {h: served_samples(d) for h, d in daemons.items()}
        net = f"{NET}.0/24"
        common = ["--train", "small", "--eval", "small", "--batch", 100, "--epochs", 2,
                  "--print-checksum", "--json", "--dump-indices", tmp_path / "mpi.{rank}"]
        outdir = tmp_path / "mpi-out"
        (mpi_out, mpi_err), = run_pair([hosts.on("a", named=True) + [
            mpirun, "--oversubscribe", "--bind-to", "none", "--output-filename", outdir,
            "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", net,
            "--mca", "btl_tcp_if_include", net, "--mca", "btl", "self,tcp",
            "-x", "OPENBLAS_NUM_THREADS",
            "-np", 1, "--host", hostname("a"), trainer, "--socket", daemons["a"].sock, *common,
            ":", "-np", 1, "--host", hostname("b"), trainer, "--socket", daemons["b"].sock,
            *common]])
        # mpirun started A's rank itself and reached B once, by the agent
        assert (tmp_path / "agent.log").read_text() == f"{hostname('b')}\n"
        sums = checksums(None, outdir)
        assert sorted(sums) == [0, 1] and sums[0] == sums[1], (sums, mpi_out, mpi_err)
        out = json_of(None, outdir)
        assert out["world"] == 2 and out["mpi"] is True, out
        once_per_epoch([tmp_path / "mpi.0", tmp_path / "mpi.1"], 2)
        for h, d in daemons.items():
            # at least its rank's training share of both epochs
            assert served_samples(d) - before[h] >= N, (h, d.stats())
        print(f"mpirun across 2 nodes: world {out['world']}, allreduce {out['allreduce']}, "
              f"epochs {[(e['loss'], e.get('test_acc')) for e in out['epochs']]}, "
              f"checksums {sums}")

    # the node cache: each node fetched each shard once, whatever ran on it
    with open(log) as f:
        clients = collections.Counter(line.split()[0] for line in f)
    assert set(clients) == {addr("a"), addr("b")}, clients
    for h in ("a", "b"):
        with open(log) as f:
            mine = [ln for ln in f if ln.startswith(addr(h) + " ")]
        for s in shards:
            n = sum(1 for ln in mine if f"GET /{os.path.basename(pack)}/{s} " in ln)
            assert n == 1, (h, s, n)
    print(f"nginx in S: {len(shards)} shards, requests per node {dict(clients)}; "
          f"each node fetched each shard once ({requests_for(log, f'/{os.path.basename(pack)}/MANIFEST')} MANIFEST GETs)")
