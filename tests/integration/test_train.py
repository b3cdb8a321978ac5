"""ringfeed-train end to end: a real ringfeedd feeding the trainer on the
CPU twin (or CUDA where a device answers: the assertions hold on both).

- two epochs of Fashion-MNIST reach more than 80% test accuracy, with the
  table, the peak memory and the verdict printed;
- the figures do not depend on the daemon's worker count (1 vs 2 workers:
  identical per-epoch losses, accuracies and final weights);
- --accum 2 --batch 64 trains what --batch 128 trains (within fp32
  summation-order tolerance);
- the CUDA path's code (--copy-batches, on the CPU) trains exactly what the
  in-place CPU path trains;
- ranks from the environment: a rank's share of each epoch, and padding
  left out of the evaluation;
- every batch, training and evaluation, is counted once by the way it
  reached the backend (JSON copy_path, the text's "batches in:" line): in
  place on the CPU twin, plain copies with --copy-batches, DMA from the
  registered ring on a GPU;
- bad usage exits 2; --json is one object;
- without a usable device (here: no NVIDIA driver; the trainer links no
  CUDA library, so it starts anyway) --backend cuda fails with a one-line
  reason and auto trains on the CPU twin, its header giving that reason.

No timing is asserted: timings only have to be present and sane.
"""
import json
import os
import re
import subprocess

import pytest

from conftest import binary


def trainer():
    return binary("examples/ringfeed-train")


def run_train(sock, *args, env=None, timeout=600, check=True):
    cmd = [trainer(), "--socket", sock] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def run_json(sock, *args, env=None):
    r = run_train(sock, "--json", *args, env=env)
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout
    return json.loads(lines[0])


PATHS = ("dma_pinned", "dma_pageable", "plain_copy", "in_place")


def batches_taken(out):
    """The batches a one-rank run took, by its JSON: each epoch's training
    batches (fewer than batches_per_epoch where --max-steps stopped it) and
    one evaluation pass after each epoch."""
    return (sum(e["batches"] for e in out["epochs"])
            + len(out["epochs"]) * out["eval_batches_per_epoch"])


def check_copy_path(out, way):
    """copy_path counts every batch of the run once, all of them under
    `way` (the others 0); the rings' registration agrees with it."""
    assert out["world"] == 1
    paths = out["copy_path"]
    assert sorted(paths) == sorted(PATHS), paths
    total = batches_taken(out)
    assert total > 0
    assert paths == {k: total if k == way else 0 for k in PATHS}, (paths, total)
    pinned = way == "dma_pinned"
    assert out["pinned_train"] is pinned and out["pinned_eval"] is pinned, out
    assert out["pinned"] is out["pinned_train"]
    assert isinstance(out["pin_note"], str) and out["pin_note"], out
    if out["backend"] == "cpu":   # no CUDA call was made
        assert out["pin_note"].startswith("not registered"), out["pin_note"]


def plain_way(out):
    """How a run without --copy-batches takes its batches on its backend."""
    return "in_place" if out["backend"] == "cpu" else "dma_pinned"


@pytest.fixture
def fm_daemon(daemon_factory, packed_fmnist):
    def make(workers=2):
        return daemon_factory({"fmnist-train": packed_fmnist["train"],
                               "fmnist-test": packed_fmnist["test"]}, workers=workers)
    return make


def test_two_epochs_pass_80_percent(fm_daemon):
    d = fm_daemon()
    r = run_train(d.sock, "--epochs", 2)
    out = r.stdout
    rows = [line for line in out.splitlines() if re.match(r"^\s+\d+\s+\d", line)]
    assert len(rows) == 2, out
    header = [line for line in out.splitlines() if line.startswith("epoch")]
    assert header and header[0].split()[:3] == ["epoch", "train", "loss"], out
    for row in rows:
        f = row.split()
        loss, acc, tloss, tacc, sps, wait, h2d, comp, ar = map(float, f[1:10])
        assert 0 < loss < 3 and 0 < acc <= 1 and 0 < tacc <= 1, row
        assert sps > 0 and wait >= 0 and h2d >= 0 and comp > 0, row
        assert ar == 0, row                # one rank: no all-reduce
        assert f[10] in ("input", "compute"), row
    assert re.search(r"^peak memory: (host|device): ", out, re.M), out
    assert re.search(r"^verdict: (input|compute)-bound: ", out, re.M), out
    # every batch of both epochs, training and evaluation, counted once
    m = re.search(r"^ringfeed-train: train fmnist-train, (\d+) batches of 128 an epoch; "
                  r"eval fmnist-test, (\d+) batches of 1000$", out, re.M)
    assert m, out
    bpe, eval_bpe = int(m.group(1)), int(m.group(2))
    assert (bpe, eval_bpe) == (469, 10)   # 60000 / 128 rounded up, 10000 / 1000
    m = re.search(r"^ringfeed-train: batches in: (\d+) DMA from the registered ring, "
                  r"(\d+) DMA from pageable memory, (\d+) plain copies, (\d+) read in place$",
                  out, re.M)
    assert m, out
    counts = dict(zip(PATHS, map(int, m.groups())))
    way = "in_place" if out.startswith("ringfeed-train: backend cpu ") else "dma_pinned"
    assert counts == {k: 2 * (bpe + eval_bpe) if k == way else 0 for k in PATHS}, counts
    last = out.strip().splitlines()[-1]
    m = re.fullmatch(r"test accuracy: (0\.\d{4})", last)
    assert m, last
    assert float(m.group(1)) > 0.80, out
    assert "backend " in out.splitlines()[0], out


def test_same_figures_for_any_worker_count(fm_daemon):
    """The stream is a function of the seed, not of the pool: the trainer's
    per-epoch figures are identical with 1 and 2 workers."""
    runs = []
    for workers in (1, 2):
        d = fm_daemon(workers=workers)
        runs.append(run_json(d.sock, "--train", "fmnist-test", "--epochs", 2,
                             "--seed", 11))
        d.cleanup()
    a, b = runs
    assert len(a["epochs"]) == len(b["epochs"]) == 2
    for ea, eb in zip(a["epochs"], b["epochs"]):
        assert ea["loss"] == eb["loss"], (ea, eb)
        assert ea["train_acc"] == eb["train_acc"]
        assert ea["test_loss"] == eb["test_loss"]
        assert ea["test_acc"] == eb["test_acc"]
    assert a["weights_l2"] == b["weights_l2"] and a["weights_sum"] == b["weights_sum"]


def test_copy_path_trains_the_same(fm_daemon):
    """--copy-batches runs the CUDA path's code on the CPU (double-buffered
    copies, events, host-staged labels, slots released after the copy):
    the same bytes reach the same steps, so the figures are identical."""
    d = fm_daemon()
    plain = run_json(d.sock, "--train", "fmnist-test", "--epochs", 2)
    copied = run_json(d.sock, "--train", "fmnist-test", "--epochs", 2, "--copy-batches")
    if plain["backend"] != "cpu":
        pytest.skip("--copy-batches matters on the CPU backend only")
    assert "in place" in plain["input"] and "copy" in copied["input"]
    for ep, ec in zip(plain["epochs"], copied["epochs"]):
        assert ep["loss"] == ec["loss"] and ep["test_acc"] == ec["test_acc"]
        assert ep["h2d_ms"] == 0 and ec["h2d_ms"] > 0
    assert plain["weights_l2"] == copied["weights_l2"]
    # each run's every batch by its way in: 2 x (79 train + 10 eval)
    for out in (plain, copied):
        assert out["batches_per_epoch"] == 79 and out["eval_batches_per_epoch"] == 10
        assert [e["batches"] for e in out["epochs"]] == [79, 79]
        assert batches_taken(out) == 2 * (79 + 10)
    check_copy_path(plain, "in_place")
    check_copy_path(copied, "plain_copy")


def test_copy_path_counts_a_run_cut_short(fm_daemon):
    """--max-steps stops inside the first epoch: only the batches taken
    count (30 trained, then the evaluation pass), in place or copied."""
    d = fm_daemon()
    for copy in (False, True):
        out = run_json(d.sock, "--train", "fmnist-test", "--epochs", 2, "--max-steps", 30,
                       *(["--copy-batches"] if copy else []))
        assert [e["batches"] for e in out["epochs"]] == [30]
        assert out["eval_batches_per_epoch"] == 10 and batches_taken(out) == 30 + 10
        # --copy-batches changes nothing on CUDA
        check_copy_path(out, "plain_copy" if copy and out["backend"] == "cpu"
                        else plain_way(out))


def test_accum_matches_the_bigger_batch(fm_daemon):
    """--accum 2 --batch 64 makes the updates --batch 128 makes.  Over a few
    updates they agree to fp32 rounding (only the order of sums differs);
    over whole epochs SGD amplifies those last bits (from ~1e-8 after 40
    updates to ~1e-4 after 70 here), so the whole run is held to the
    accuracy, not the digits."""
    d = fm_daemon()
    few = {}
    for args in (("--batch", 128), ("--batch", 64, "--accum", 2)):
        few[len(args)] = run_json(d.sock, "--train", "fmnist-test", "--epochs", 2,
                                  "--max-steps", 30, *args)
    big, acc = few[2], few[4]
    assert acc["accum"] == 2 and acc["batch"] == 64
    assert acc["updates"] == big["updates"] == 30
    assert acc["updates_planned"] == big["updates_planned"] == 2 * 79
    ea, eb = acc["epochs"][0], big["epochs"][0]
    assert ea["batches"] == 2 * eb["batches"] == 60
    assert ea["samples"] == eb["samples"] == 30 * 128
    assert ea["loss"] == pytest.approx(eb["loss"], rel=1e-5)
    assert acc["weights_l2"] == pytest.approx(big["weights_l2"], rel=1e-6)
    assert acc["weights_sum"] == pytest.approx(big["weights_sum"], rel=1e-5, abs=1e-3)

    big = run_json(d.sock, "--train", "fmnist-test", "--epochs", 2, "--batch", 128)
    acc = run_json(d.sock, "--train", "fmnist-test", "--epochs", 2, "--batch", 64,
                   "--accum", 2)
    assert acc["updates"] == big["updates"] == 2 * 79
    for ea, eb in zip(acc["epochs"], big["epochs"]):
        assert ea["batches"] == 2 * eb["batches"] - 1  # 10000 = 78*128 + 16
        assert ea["samples"] == eb["samples"] == 10000
        assert ea["loss"] == pytest.approx(eb["loss"], rel=1e-2)
        assert abs(ea["test_acc"] - eb["test_acc"]) <= 0.005


def test_ranks_from_the_environment(fm_daemon):
    """RANK/WORLD_SIZE as torchrun sets them: rank 1 of 3 trains on its
    share and scores its share of the test set without the padding."""
    d = fm_daemon()
    out = run_json(d.sock, "--train", "fmnist-test", "--epochs", 1,
                   env={"RANK": "1", "WORLD_SIZE": "3"})
    e = out["epochs"][0]
    assert e["samples"] == 3334          # ceil(10000 / 3), one of them padding
    assert e["test_samples"] == 3333     # the padding sample is not scored
    assert 0 < e["test_acc"] <= 1
    # this rank's batches: 27 of 128 (the last of 6 samples), 4 of 1000
    # (the last of 334)
    assert out["batches_per_epoch"] == e["batches"] == 27
    assert out["eval_batches_per_epoch"] == 4
    check_copy_path(out, plain_way(out))


def test_json_figures(fm_daemon):
    d = fm_daemon()
    out = run_json(d.sock, "--epochs", 1, "--max-steps", 30, "--precision", "bf16")
    assert out["precision"] == "bf16" and out["updates"] == 30
    assert out["updates_planned"] == 469
    e = out["epochs"][0]
    assert e["batches"] == 30 and e["samples"] == 30 * 128
    assert e["test_samples"] == 10000
    assert e["timed_steps"] == 20        # the first 10 are warm-up
    assert e["wait_ms"] >= 0 and e["compute_ms"] > 0 and e["h2d_ms"] >= 0
    assert out["verdict"] in ("input-bound", "compute-bound")
    assert out["peak_bytes"] > 0 and out["peak_rss_bytes"] > 0
    if out["backend"] == "cpu":
        assert e["h2d_ms"] == 0 and out["pinned"] is False
        assert "in place" in out["input"]
    else:
        assert e["h2d_ms"] > 0
    assert out["batches_per_epoch"] == 469 and out["eval_batches_per_epoch"] == 10
    check_copy_path(out, plain_way(out))


def test_bad_usage(fm_daemon):
    d = fm_daemon()
    for args in (["--precision", "fp16"], ["--accum", "0"], ["--backend", "tpu"],
                 ["--epochs", "x"], ["extra"]):
        r = run_train(d.sock, *args, check=False)
        assert r.returncode == 2, (args, r.stderr)
    r = run_train(d.sock, "--train", "no-such-set", check=False)
    assert r.returncode == 1 and "no-such-set" in r.stderr, r.stderr


def test_cuda_backend_without_a_device_says_why(fm_daemon):
    d = fm_daemon()
    r = run_train(d.sock, "--backend", "cuda", "--epochs", 1, "--max-steps", 5,
                  check=False)
    if r.returncode == 0:
        pytest.skip("a CUDA device answered")
    assert r.returncode == 1
    assert "CUDA" in r.stderr or "cuda" in r.stderr, r.stderr
    # one line says why (no driver, no device, no cuBLAS) ...
    lines = [ln for ln in r.stderr.splitlines() if "CUDA" in ln or "cuBLAS" in ln]
    assert len(lines) == 1, r.stderr
    # ... and auto trains on the CPU with that same reason in its header
    # ("built without CUDA" in a build without it, else what the device said)
    out = run_json(d.sock, "--epochs", 1, "--max-steps", 5)
    assert out["backend"] == "cpu" and out["updates"] == 5, out
    reason, sep, _ = out["backend_note"].partition("; cpu: ")
    assert sep and reason and lines[0].endswith(reason), (lines[0], out["backend_note"])
