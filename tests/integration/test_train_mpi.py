"""ringfeed-train as one data-parallel job under `mpirun -np 2` (CPU twin,
MPI all-reduce over host memory), fed by real ringfeedd daemons:

1. after N updates the two ranks' parameter checksums are bit-identical
   (also with --accum 2: one all-reduce per applied update);
2. 2 ranks at batch B make the updates 1 rank at batch 2B makes: update s
   sees the same samples (rank 0's batch s + rank 1's batch s == the
   1-rank batch s, as sets, by the sampler's round-robin rule) and the
   losses and weights agree to fp32 summation order (tolerances at the
   check);
3. over an epoch the two ranks' indices cover the dataset once, plus the
   one padding sample an odd count needs; the job's figures are printed
   once (rank 0), with the all-reduce column and the job's accuracy, and
   the job's batches (both ranks', training and evaluation) counted once
   each in the "batches in:" line (JSON copy_path: summed over the ranks
   as the epochs' batches are);
4. a rank whose daemon is SIGKILLed and restarted mid-epoch resumes, and
   the job ends with identical parameters on both ranks, the same as a run
   without the restart;
5. a rank SIGKILLed mid-run ends the whole job with a clear message in
   bounded time (no hang).

Skips only when mpirun is missing or the build has no MPI.  2 ranks on 2
cores: --oversubscribe --bind-to none, one OpenBLAS thread per rank.
No timing is asserted.
"""
import collections
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILD, Daemon, binary, dump_rows, pack_first, pid_children, wait_for

SMALL = 2001   # odd: 2 ranks need one padding sample


def mpirun():
    path = shutil.which("mpirun")
    if not path:
        pytest.skip("no mpirun (openmpi-bin)")
    cfg = os.path.join(BUILD, "config.h")
    with open(cfg) as f:
        if "#define RINGFEED_HAVE_MPI 1" not in f.read():
            pytest.skip("ringfeed-train was built without MPI (-Dmpi, libopenmpi-dev)")
    return path


SUPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan-openmpi.supp")


def env():
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
             OPENBLAS_NUM_THREADS="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
             # components stay loaded, so LeakSanitizer can name (and the
             # suppressions match) Open MPI's own allocations
             OMPI_MCA_mca_base_component_disable_dlclose="1")
    e["LSAN_OPTIONS"] = ":".join(filter(None, [e.get("LSAN_OPTIONS"), f"suppressions={SUPP}",
                                               "print_suppressions=0"]))
    # the full stack of each allocation (Open MPI is built without frame
    # pointers: the fast unwinder stops in it before any name to match)
    e["ASAN_OPTIONS"] = ":".join(filter(None, [e.get("ASAN_OPTIONS"),
                                               "fast_unwind_on_malloc=0"]))
    return e


def mpi_cmd(np=2, out=None):
    """mpirun for np ranks; out: a folder where mpirun also writes each
    rank's output apart (OUT/<job>/rank.N/stdout), for rank_stdout."""
    cmd = [mpirun(), "-np", str(np), "--oversubscribe", "--bind-to", "none"]
    return cmd + (["--output-filename", out] if out else [])


def rank_stdout(out, rank):
    """Rank's own stdout from mpi_cmd(out=...): whole lines, which mpirun's
    forwarded stdout does not keep (it passes each rank's output on in the
    chunks it reads, so one rank's line can land inside another's)."""
    found = glob.glob(os.path.join(str(out), "*", f"rank.{rank}", "stdout"))
    assert len(found) == 1, (out, found)
    with open(found[0]) as f:
        return f.read()


def trainer():
    return binary("examples/ringfeed-train")


def run(cmd, timeout=300, check=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=timeout, env=env())
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def json_of(r, out=None):
    """The job's figures: rank 0's JSON line (out: from its own stdout, see
    rank_stdout; two CI runs found rank 1's checksum line inside it in
    mpirun's forwarded stdout, once missing the checksum, once breaking the
    JSON)."""
    text = rank_stdout(out, 0) if out else r.stdout
    objs = [line for line in text.splitlines() if line.startswith("{")]
    assert len(objs) == 1, text   # rank 0 alone prints the job's figures
    return json.loads(objs[0])


def checksums(r, out=None, ranks=2):
    """{rank: its parameter checksum}: from each rank's own stdout (out), or
    found anywhere in mpirun's forwarded stdout, not anchored at a line's
    start (see rank_stdout)."""
    text = "".join(rank_stdout(out, k) for k in range(ranks)) if out else r.stdout
    found = dict(re.findall(r"ringfeed-train: rank (\d+) of \d+: parameter checksum "
                            r"([0-9a-f]{16}) ", text))
    return {int(k): v for k, v in found.items()}


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    """The first SMALL samples of Fashion-MNIST's test split, packed."""
    return pack_first(tmp_path_factory.mktemp("small"), SMALL)


def small_args(sock, *more):
    return [trainer(), "--socket", sock, "--train", "small", "--eval", "small"] + list(more)


def test_ranks_end_bit_identical(daemon_factory, small_set, tmp_path):
    mpirun()
    d = daemon_factory({"small": small_set})
    for k, extra in enumerate(((), ("--accum", 2))):
        where = tmp_path / f"out{k}"
        r = run(mpi_cmd(out=where) + small_args(d.sock, "--batch", 64, "--epochs", 2,
                                                "--max-steps", 12, "--print-checksum", "--json",
                                                *extra))
        sums = checksums(r, where)
        assert sorted(sums) == [0, 1], r.stdout
        assert sums[0] == sums[1], (extra, sums)
        out = json_of(r, where)
        assert out["world"] == 2 and out["mpi"] is True and out["global_batch"] == 128
        assert out["param_checksums"] == [sums[0], sums[1]]
        assert out["updates"] == 12   # into the second epoch, with or without accum
        assert out["allreduce"].startswith("mpi (host memory)"), out["allreduce"]
        # copy_path is the job's: epochs[].batches (summed over the ranks)
        # plus both ranks' evaluation passes (eval_batches_per_epoch is a
        # rank's: 1001 samples in 2 batches of 1000)
        assert out["eval_batches_per_epoch"] == 2
        job = (sum(e["batches"] for e in out["epochs"])
               + len(out["epochs"]) * 2 * out["eval_batches_per_epoch"])
        assert out["copy_path"] == {"dma_pinned": 0, "dma_pageable": 0, "plain_copy": 0,
                                    "in_place": job}, (out["copy_path"], job)
        assert out["pinned_train"] is False and out["pinned_eval"] is False


def test_two_ranks_at_b_match_one_rank_at_2b(daemon_factory, small_set, tmp_path):
    mpirun()
    d = daemon_factory({"small": small_set})
    B, N = 64, 15      # 15 updates: all inside epoch 0's full batches
    two = run(mpi_cmd(out=tmp_path / "out") +
              small_args(d.sock, "--lr", 0.02, "--batch", B, "--epochs", 2, "--max-steps", N,
                         "--json", "--print-checksum", "--dump-indices", tmp_path / "two.{rank}"))
    one = run(small_args(d.sock, "--lr", 0.02, "--batch", 2 * B, "--epochs", 2,
                         "--max-steps", N, "--json", "--dump-indices", tmp_path / "one"))
    a, b = json_of(two, tmp_path / "out"), json_of(one)
    assert a["updates"] == b["updates"] == N and b["world"] == 1

    # the samples: update s of the job == update s of the 1-rank run
    ranks = [dump_rows(tmp_path / f"two.{r}") for r in (0, 1)]
    single = dump_rows(tmp_path / "one")
    assert sorted(single[0]) == list(range(N))
    for s in range(N):
        assert len(ranks[0][0][s]) == len(ranks[1][0][s]) == B
        assert sorted(single[0][s]) == sorted(ranks[0][0][s] + ranks[1][0][s]), s

    # The figures.  The job's update divides the sum of two 64-sample
    # gradient sums by 128; the 1-rank run's GEMM sums 128 samples at once:
    # the same mean up to fp32 summation order.  Measured on the CPU twin:
    # epoch-0 loss (mean over the 15 updates' 1920 samples) 2.7e-9 relative
    # apart, the final weights' L2 norm 7e-11, their sum 5e-9.  The bounds
    # (1e-5 for the loss and L2, 1e-4 for the sum) are 1000 times that and,
    # by estimate, 1000 times below what one wrong sample in an update does
    # (~1e-2 on the loss).  lr 0.02, as in the PyTorch
    # example's test: at 0.05 the first updates amplify last bits fast.
    ea, eb = a["epochs"][0], b["epochs"][0]
    assert ea["samples"] == eb["samples"] == N * 2 * B
    assert ea["loss"] == pytest.approx(eb["loss"], rel=1e-5), (ea["loss"], eb["loss"])
    assert ea["train_acc"] == pytest.approx(eb["train_acc"], abs=1.0 / (N * 2 * B) + 1e-12)
    assert a["weights_l2"] == pytest.approx(b["weights_l2"], rel=1e-5)
    assert a["weights_sum"] == pytest.approx(b["weights_sum"], rel=1e-4, abs=1e-3)
    print(f"parity: loss 2x{B} {ea['loss']!r} vs {2 * B} {eb['loss']!r}; "
          f"L2 {a['weights_l2']!r} vs {b['weights_l2']!r}; "
          f"sum {a['weights_sum']!r} vs {b['weights_sum']!r}; "
          f"checksums {checksums(two, tmp_path / 'out')}")


def test_epoch_is_covered_once_and_printed_once(daemon_factory, small_set, tmp_path):
    mpirun()
    d = daemon_factory({"small": small_set})
    B = 64
    per_rank = (SMALL + 1) // 2
    r = run(mpi_cmd() + small_args(d.sock, "--batch", B, "--epochs", 1,
                                   "--dump-indices", tmp_path / "ix.{rank}"))
    out = r.stdout
    assert out.count("test accuracy: ") == 1, out
    assert len([ln for ln in out.splitlines() if ln.startswith("epoch ")]) == 1, out
    assert re.search(r"^ringfeed-train: ranks 2 \(.*\), global batch 128 = 2 x 64; "
                     r"allreduce: mpi \(host memory\)", out, re.M), out
    header = [ln for ln in out.splitlines() if ln.startswith("epoch ")][0].split()
    assert header[-3:] == ["allreduce", "ms", "bound"], header
    rows = [ln for ln in out.splitlines() if re.match(r"^\s+\d+\s+\d", ln)]
    assert len(rows) == 1, out
    f = rows[0].split()
    assert float(f[9]) >= 0 and f[10] in ("input", "compute", "comm"), rows
    assert re.search(r"^verdict: (input|compute|communication)-bound: ", out, re.M), out
    acc = float(re.search(r"^test accuracy: (0\.\d{4})$", out, re.M).group(1))
    assert acc > 0.5, out
    # the job's batches, once: 2 ranks x (16 of 64 + 2 of 1000) of 1001 samples
    lines = re.findall(r"^ringfeed-train: batches in: .*$", out, re.M)
    assert lines == ["ringfeed-train: batches in: 0 DMA from the registered ring, "
                     "0 DMA from pageable memory, 0 plain copies, 36 read in place"], out

    ranks = [dump_rows(tmp_path / f"ix.{k}") for k in (0, 1)]
    flat = [[i for s in sorted(rk[0]) for i in rk[0][s]] for rk in ranks]
    assert len(flat[0]) == len(flat[1]) == per_rank
    count = collections.Counter(flat[0] + flat[1])
    assert set(count) == set(range(SMALL))
    # the padding: the epoch's first position again, as the last rank's last sample
    assert [i for i, c in count.items() if c != 1] == [flat[0][0]] and count[flat[0][0]] == 2
    assert flat[1][-1] == flat[0][0]


def test_daemon_restart_mid_epoch(daemon_factory, packed_fmnist, tmp_path):
    """Two "nodes": each rank attaches to its own daemon (mpirun's MPMD
    form gives each its --socket); rank 1's daemon is SIGKILLed and
    restarted on the same socket mid-epoch."""
    mpi = mpirun()
    sets = {"fmnist-train": packed_fmnist["train"], "fmnist-test": packed_fmnist["test"]}
    d0 = daemon_factory(sets)
    d1 = daemon_factory(sets)
    common = ["--batch", 64, "--epochs", 1, "--max-steps", 300, "--print-checksum"]

    def cmd(s0, s1, dump):
        return ([mpi, "--oversubscribe", "--bind-to", "none", "--output-filename", dump + ".out",
                 "-np", 1, trainer(), "--socket", s0, *common, "--dump-indices", dump + ".0",
                 ":", "-np", 1, trainer(), "--socket", s1, *common,
                 "--dump-indices", dump + ".1"])

    clean = run(cmd(d0.sock, d0.sock, str(tmp_path / "clean")))
    want = checksums(clean, tmp_path / "clean.out")
    assert want[0] == want[1], clean.stdout

    p = subprocess.Popen([str(c) for c in cmd(d0.sock, d1.sock, str(tmp_path / "kill"))],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        dump1 = tmp_path / "kill.1"
        wait_for(lambda: dump1.exists() and dump1.stat().st_size > 64 * 1024,
                 "rank 1 to train a while", timeout=60)
        d1.kill9()
        time.sleep(0.3)
        d1b = Daemon(sets, sock=d1.sock)
        try:
            d1b.start()
            out, err = p.communicate(timeout=240)
        finally:
            d1b.cleanup()
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, out + err
    got = checksums(None, tmp_path / "kill.out")
    assert sorted(got) == [0, 1] and got[0] == got[1], out
    assert got == want, (got, want)   # the restart did not change the stream
    assert dump_rows(tmp_path / "kill.1") == dump_rows(tmp_path / "clean.1")


def test_a_dead_rank_ends_the_job(daemon_factory, packed_fmnist, tmp_path):
    mpirun()
    d = daemon_factory({"fmnist-train": packed_fmnist["train"],
                        "fmnist-test": packed_fmnist["test"]})
    cmd = mpi_cmd() + [trainer(), "--socket", d.sock, "--batch", 64, "--epochs", 5,
                       "--comm-timeout", 20, "--dump-indices", tmp_path / "ix.{rank}"]
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env())
    try:
        wait_for(lambda: (tmp_path / "ix.1").exists() and
                 (tmp_path / "ix.1").stat().st_size > 64 * 1024, "the job to train", timeout=60)

        def rank1():
            for pid in pid_children(p.pid):
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        if b"OMPI_COMM_WORLD_RANK=1\0" in f.read():
                            return pid
                except OSError:
                    pass
            return None
        victim = wait_for(rank1, "rank 1's process", timeout=10)
        t0 = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        out, _ = p.communicate(timeout=90)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode != 0, out
    assert took < 60, took
    assert ("exited on signal 9" in out or "a rank died or hangs" in out), out
