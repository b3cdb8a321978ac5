"""scripts/gpu-check's own machinery, without a GPU: its judges fail what
they must (a ring that was not registered, a batch that took another
path, a ring/pinned ratio below the goal), and its runner keeps the
budget and the record (a step that hangs is killed at what is left of the
budget, its output is in $OUT/gpu-check.log, and gpu-check.json says
TIMEOUT and is valid JSON after every step).  The whole check runs in
scripts/gpu-rehearsal (meson test gpu_rehearsal)."""
import importlib.machinery
import importlib.util
import json
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load():
    path = os.path.join(ROOT, "scripts", "gpu-check")
    loader = importlib.machinery.SourceFileLoader("gpu_check", path)
    spec = importlib.util.spec_from_loader("gpu_check", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


gc = load()


def cuda_doc(**kw):
    doc = {"backend": "cuda", "test_accuracy": 0.87, "pinned_train": True, "pinned_eval": True,
           "pin_note": "ring registered with cudaHostRegister",
           "copy_path": {"dma_pinned": 1488, "dma_pageable": 0, "plain_copy": 0, "in_place": 0},
           "world": 1, "param_checksums": ["00aa"], "allreduce": "none"}
    doc.update(kw)
    return doc


def test_train_judge_passes_a_pinned_run():
    assert gc.judge_train(cuda_doc(), "cuda") == []


def test_train_judge_fails_an_unregistered_ring():
    bad = gc.judge_train(cuda_doc(pinned_train=False, pin_note="cudaHostRegister: not "
                                  "supported"), "cuda")
    assert any("not registered" in b and "cudaHostRegister: not supported" in b for b in bad)


@pytest.mark.parametrize("path", ["dma_pageable", "plain_copy", "in_place"])
def test_train_judge_fails_any_batch_off_the_pinned_path(path):
    cp = {"dma_pinned": 1487, "dma_pageable": 0, "plain_copy": 0, "in_place": 0}
    cp[path] = 1
    bad = gc.judge_train(cuda_doc(copy_path=cp), "cuda")
    assert any("not every batch was DMA'd" in b for b in bad), bad


def test_train_judge_fails_low_accuracy_and_missing_path():
    assert any("accuracy" in b for b in gc.judge_train(cuda_doc(test_accuracy=0.5), "cuda"))
    doc = cuda_doc()
    del doc["copy_path"]
    assert any("no copy_path" in b for b in gc.judge_train(doc, "cuda"))


def test_train_judge_cpu_twin_reads_in_place():
    cp = {"dma_pinned": 0, "dma_pageable": 0, "plain_copy": 0, "in_place": 548}
    assert gc.judge_train(cuda_doc(backend="cpu", copy_path=cp), "cpu") == []
    cp = {"dma_pinned": 0, "dma_pageable": 0, "plain_copy": 548, "in_place": 0}
    assert gc.judge_train(cuda_doc(backend="cpu", copy_path=cp), "cpu")


def test_train_judge_two_ranks():
    ok = cuda_doc(world=2, param_checksums=["ab", "ab"],
                  allreduce="mpi (host memory): ranks 0 and 1 share CUDA device 0")
    assert gc.judge_train(ok, "cuda", world=2) == []
    bad = gc.judge_train(dict(ok, param_checksums=["ab", "ac"]), "cuda", world=2)
    assert any("checksums differ" in b for b in bad)
    bad = gc.judge_train(dict(ok, allreduce="nccl"), "cuda", world=2)
    assert any("MPI fallback" in b for b in bad)
    assert any("world 1" in b for b in gc.judge_train(dict(ok, world=1), "cuda", world=2))


def h2d_doc(**kw):
    doc = {"pinned": True, "ring_full": True, "ratio": 0.97, "goal": 0.9, "pass": True,
           "pin_note": "registered"}
    doc.update(kw)
    return doc


def test_h2d_judge():
    assert gc.judge_h2d(h2d_doc()) == []
    assert any("not pinned" in b for b in gc.judge_h2d(h2d_doc(pinned=False, **{"pass": False})))
    assert any("below the goal" in b for b in gc.judge_h2d(h2d_doc(ratio=0.6, **{"pass": False})))
    assert any("not full" in b for b in gc.judge_h2d(h2d_doc(ring_full=False)))
    assert gc.judge_h2d(None) == ["h2d-sweep wrote no JSON"]


def test_last_json_takes_the_trainer_line():
    out = "ringfeed-train: something\n{\"a\": 1}\nnot json {\n{\"b\": 2}\n"
    assert gc.last_json(out) == {"b": 2}
    assert gc.last_json("no json here") is None


def test_a_hung_step_is_killed_at_the_budget_and_recorded(tmp_path):
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    tmp.mkdir()
    report = gc.Report(str(out), budget=gc.RESERVE_S + gc.MIN_STEP_S + 3)
    run = gc.Run(report, str(tmp))
    t0 = time.monotonic()
    st = run.step("hang", "a step that never ends", 600,
                  [sys.executable, "-c", "import time; print('started', flush=True); "
                   "time.sleep(600)"])
    took = time.monotonic() - t0
    assert st == "TIMEOUT"
    assert took < gc.MIN_STEP_S + 3 + 10, took      # its share of the budget, not 600 s
    doc = json.load(open(out / "gpu-check.json"))
    assert doc["steps"][-1]["id"] == "hang" and doc["steps"][-1]["status"] == "TIMEOUT"
    log = open(out / "gpu-check.log").read()
    assert "== hang: a step that never ends" in log and "started" in log
    # nothing is left of the budget now: the next step is skipped, not started
    st = run.step("next", "the step after", 60, [sys.executable, "-c", "print('ran')"])
    assert st == "SKIP"
    doc = json.load(open(out / "gpu-check.json"))
    assert doc["steps"][-1]["status"] == "SKIP" and "out of time" in doc["steps"][-1]["why"]
    assert "ran" not in open(out / "gpu-check.log").read().split("== next")[1]


def test_steps_pass_fail_and_skip_on_77(tmp_path):
    report = gc.Report(str(tmp_path / "out"), budget=120)
    run = gc.Run(report, str(tmp_path))
    py = sys.executable
    assert run.step("ok", "exit 0", 30, [py, "-c", "print('fine')"]) == "PASS"
    assert run.step("bad", "exit 3", 30, [py, "-c", "import sys; print('broke'); "
                                          "sys.exit(3)"]) == "FAIL"
    assert run.step("dev", "exit 77", 30, [py, "-c", "import sys; print('1..0 # SKIP no "
                                           "CUDA device'); sys.exit(77)"],
                    skip77="needs a device") == "SKIP"
    # without a reason to skip, a 77 is a failure: the probe found a device
    assert run.step("dev2", "exit 77", 30, [py, "-c", "import sys; sys.exit(77)"]) == "FAIL"
    doc = json.load(open(tmp_path / "out" / "gpu-check.json"))
    got = {s["id"]: (s["status"], s.get("why", "")) for s in doc["steps"]}
    assert got["bad"] == ("FAIL", "exit 3: broke")
    assert got["dev"] == ("SKIP", "needs a device: no CUDA device")
    assert report.failed


def test_wrappers_give_libraries_to_their_binary_only(tmp_path):
    report = gc.Report(str(tmp_path / "out"), budget=60)
    run = gc.Run(report, str(tmp_path / "t"))
    run.lib_dirs = ["/bundle/lib"]
    run.cuda_dirs = ["/cuda/lib64"]
    run.extra_env = {"OPAL_PREFIX": "/bundle/mpi"}
    w = run.wrap("env", "/usr/bin/env")
    lines = os.popen(w).read().splitlines()
    assert "LD_LIBRARY_PATH=/bundle/lib:/cuda/lib64" in lines
    assert "OPAL_PREFIX=/bundle/mpi" in lines
    assert "/bundle/lib" not in os.environ.get("LD_LIBRARY_PATH", "")


def test_a_missing_library_is_a_skip_that_names_it(tmp_path):
    report = gc.Report(str(tmp_path / "out"), budget=60)
    run = gc.Run(report, str(tmp_path / "t"))
    run.missing = {"ringfeed-train": ["libcublas.so.13"]}
    run.cuda_dirs = ["/usr/local/cuda/lib64"]
    st = run.step("train_fp32", "the trainer", 30, [sys.executable, "-c", "print('ran')"],
                  needs="ringfeed-train")
    assert st == "SKIP"
    s = json.load(open(tmp_path / "out" / "gpu-check.json"))["steps"][-1]
    assert "libcublas.so.13" in s["why"] and "/usr/local/cuda/lib64" in s["why"]
    assert not report.failed


def test_cublas_is_found_where_the_trainer_opens_it(tmp_path, monkeypatch):
    """ringfeed-train opens cuBLAS with dlopen, so ldd cannot say it is
    missing: find_cublas looks where kernels/cuda/cu_blas.c does."""
    report = gc.Report(str(tmp_path / "out"), budget=60)
    run = gc.Run(report, str(tmp_path / "t"))
    wheel = tmp_path / "wheel"
    wheel.mkdir()
    (wheel / "libcublas.so.13").write_bytes(b"")
    run.nvidia_dirs = [str(wheel)]
    monkeypatch.delenv("RINGFEED_CUBLAS", raising=False)
    assert gc.find_cublas(run) == str(wheel / "libcublas.so.13")
    # $RINGFEED_CUBLAS is the trainer's only candidate when set
    monkeypatch.setenv("RINGFEED_CUBLAS", str(tmp_path / "none.so"))
    assert gc.find_cublas(run) is None
    monkeypatch.setenv("RINGFEED_CUBLAS", str(wheel / "libcublas.so.13"))
    assert gc.find_cublas(run) == str(wheel / "libcublas.so.13")
