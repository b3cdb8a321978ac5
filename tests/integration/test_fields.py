"""test_fields.py - datasets of named fields end to end: written with
ringfeed.Writer, served by a real ringfeedd, read as dict batches by
ringfeed.Loader and by ringfeed-read, each sample checked against the
source it was written from (indices from loader.last):

  1. every field kind and dtype through transform none: images and masks
     exact, boxes as written, ragged and bytes rows (empty samples
     included) with every batch's offsets monotone from 0 to the values'
     rows, tensors of every dtype, scalars; numpy output and copies too;
  2. train crops: each sample's mask and boxes are what the workers' own
     transform gives for that sample's stream (tests/targets_run, checked
     against torchvision and a numpy reference by test_targets.py), the
     dropped boxes counted in the batch (loader.last.dropped) and STATS;
  3. a kill storm on a fields stream and two readers sharing its batches
     (decode once): every digest (each field's and the whole) equals a
     clean solo read's.
"""
import json
import os
import random
import signal
import struct
import subprocess
import threading

import numpy as np
import pytest
import torch

import ringfeed
from conftest import binary, proc_alive, read_tool, run_read, wait_for, workers_held

SIDE = 24


def source_samples(n, seed=5):
    """n samples of every kind, some ragged ones empty."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        img = rng.integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8)
        nb = int(rng.integers(0, 6)) if i % 7 else 0
        x0 = rng.uniform(0, SIDE - 4, nb)
        y0 = rng.uniform(0, SIDE - 4, nb)
        boxes = np.stack([x0, y0, x0 + rng.uniform(1, 4, nb), y0 + rng.uniform(1, 4, nb)],
                         1).astype(np.float32).reshape(-1, 4)
        out.append({
            "image": img,
            "mask": rng.integers(0, 5, (SIDE, SIDE), dtype=np.uint8),
            "boxes": boxes,
            "tokens": rng.integers(-2**31, 2**31 - 1, int(rng.integers(0, 9)), dtype=np.int32),
            "caption": "sample %d " % i + "x" * int(rng.integers(0, 30)),
            "emb": rng.standard_normal(6).astype(np.float16),
            "bf": torch.randn(3).to(torch.bfloat16),
            "big": rng.integers(-2**62, 2**62, (2, 2), dtype=np.int64),
            "score": float(rng.standard_normal()),
            "label": i % 10,
        })
    return out


FIELDS = {
    "image": lambda: ringfeed.Image(mode="raw"),
    "mask": lambda: ringfeed.Image(mask="image"),
    "boxes": lambda: ringfeed.Ragged("float32", (4,), boxes="image"),
    "tokens": lambda: ringfeed.Ragged("int32"),
    "caption": lambda: ringfeed.Bytes(),
    "emb": lambda: ringfeed.Tensor("float16", (6,)),
    "bf": lambda: ringfeed.Tensor("bfloat16", (3,)),
    "big": lambda: ringfeed.Tensor("int64", (2, 2)),
    "score": lambda: ringfeed.Scalar("float64"),
    "label": lambda: ringfeed.Scalar("int64"),
}


def write(path, samples, fields=None):
    with ringfeed.Writer(path, {k: f() for k, f in (fields or FIELDS).items()}) as w:
        for s in samples:
            w.write(s)
    return path


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory):
    root = tmp_path_factory.mktemp("fields")
    samples = source_samples(150)
    return write(str(root / "every"), samples), samples


def check_ragged(r, count, what):
    off = np.asarray(r.offsets)
    assert off.shape == (count + 1,) and off[0] == 0, what
    assert (np.diff(off) >= 0).all(), f"{what}: offsets not monotone: {off}"
    assert off[-1] == r.values.shape[0], f"{what}: offsets end at {off[-1]}, " \
                                         f"{r.values.shape[0]} rows"


def check_batch(b, idx, samples):
    n = len(idx)
    assert b["image"].shape == (n, 3, SIDE, SIDE) and b["image"].dtype == torch.uint8
    for k in ("boxes", "tokens", "caption"):
        check_ragged(b[k], n, k)
    boxes, tokens, caps = b["boxes"].split(), b["tokens"].split(), b["caption"].split()
    for j, i in enumerate(idx):
        s = samples[i]
        assert torch.equal(b["image"][j], torch.from_numpy(s["image"]).permute(2, 0, 1)), i
        assert np.array_equal(np.asarray(b["mask"][j]).reshape(SIDE, SIDE), s["mask"]), i
        assert np.array_equal(np.asarray(boxes[j]), s["boxes"]), (i, boxes[j], s["boxes"])
        assert np.array_equal(np.asarray(tokens[j]), s["tokens"]), i
        assert bytes(np.asarray(caps[j]).tobytes()).decode() == s["caption"], i
        assert np.array_equal(np.asarray(b["emb"][j]), s["emb"]), i
        assert torch.equal(b["bf"][j], s["bf"]), i
        assert np.array_equal(np.asarray(b["big"][j]), s["big"]), i
        assert float(b["score"][j]) == s["score"], i
        assert int(b["label"][j]) == s["label"], i


def test_every_kind_through_the_daemon(every_kind, daemon_factory):
    path, samples = every_kind
    d = daemon_factory({"every": path}, workers=2)
    loader = ringfeed.Loader("every", batch_size=16, transform="none", shuffle=True, seed=3,
                             socket=d.sock)
    assert [f["name"] for f in loader.fields] == list(FIELDS)
    seen = []
    for b in loader:
        assert isinstance(b, dict) and list(b) == list(FIELDS)
        idx = [int(i) for i in loader.last.indices]
        check_batch(b, idx, samples)
        seen += idx
        del b
    assert sorted(seen) == list(range(len(samples))), "an epoch delivers every sample once"

    # numpy output and copies give the same values
    for kw in ({"output": "numpy"}, {"copy": True}):
        ld = ringfeed.Loader("every", batch_size=16, transform="none", shuffle=False,
                             socket=d.sock, **kw)
        b = next(iter(ld))
        idx = [int(i) for i in ld.last.indices]
        if kw.get("output") == "numpy":
            assert isinstance(b["image"], np.ndarray)
            b = {k: (v if not isinstance(v, np.ndarray) else torch.from_numpy(v)
                     if v.dtype != np.float16 else v) for k, v in b.items()}
            b["bf"] = torch.from_numpy(np.asarray(b["bf"])).to(torch.bfloat16)
        check_batch(b, idx, samples)
        ld.close()
    loader.close()


def test_a_legacy_pack_still_gives_images_and_labels(tmp_path, daemon_factory):
    rng = np.random.default_rng(1)
    imgs = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(20)]
    with ringfeed.Writer(str(tmp_path / "old"), {"image": ringfeed.Image(),
                                                 "label": ringfeed.Scalar("int64")},
                         classes=4) as w:
        for i, im in enumerate(imgs):
            w.write({"image": im, "label": i % 4})
    d = daemon_factory({"old": str(tmp_path / "old")}, workers=1)
    loader = ringfeed.Loader("old", batch_size=5, transform="none", shuffle=False,
                             socket=d.sock)
    x, y = next(iter(loader))
    assert tuple(x.shape) == (5, 3, 8, 8) and y.tolist() == [0, 1, 2, 3, 0]
    assert torch.equal(x[1], torch.from_numpy(imgs[1]).permute(2, 0, 1))
    loader.close()


# ---- 2. train crops: masks and boxes follow each sample's crop -------------

def rfpx(arr):
    h, w = arr.shape[:2]
    c = 1 if arr.ndim == 2 else arr.shape[2]
    vb = arr.dtype.itemsize
    return b"RFPX" + bytes([1, c, 2 if vb == 2 else 0, 0]) + struct.pack("<II", w, h) + \
        np.ascontiguousarray(arr).tobytes()


def test_train_masks_and_boxes_follow_each_crop(tmp_path, daemon_factory):
    rng = np.random.default_rng(8)
    samples = []
    for i in range(40):
        h, w = int(rng.integers(30, 90)), int(rng.integers(30, 90))
        nb = int(rng.integers(0, 12))
        x0, y0 = rng.uniform(0, w - 2, nb), rng.uniform(0, h - 2, nb)
        boxes = np.stack([x0, y0, np.minimum(w, x0 + rng.uniform(1, w / 2, nb)),
                          np.minimum(h, y0 + rng.uniform(1, h / 2, nb))], 1)
        samples.append({"image": rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
                        "mask": rng.integers(0, 255, (h, w), dtype=np.uint8),
                        "boxes": boxes.astype(np.float32).reshape(-1, 4),
                        "which": np.arange(nb, dtype=np.int64)})  # each box's own number
    fields = {"image": lambda: ringfeed.Image(mode="raw"),
              "mask": lambda: ringfeed.Image(mask="image"),
              "boxes": lambda: ringfeed.Ragged("float32", (4,), boxes="image"),
              "which": lambda: ringfeed.Ragged("int64", rows="boxes")}
    path = write(str(tmp_path / "crops"), samples, fields)
    d = daemon_factory({"crops": path}, workers=2)
    size, seed = 32, 17
    loader = ringfeed.Loader("crops", batch_size=8, transform="train", size=size, seed=seed,
                             shuffle=True, socket=d.sock)
    loader.set_epoch(0)
    dropped = 0
    for b in loader:
        idx = [int(i) for i in loader.last.indices]
        check_ragged(b["boxes"], len(idx), "boxes")
        got_boxes, got_which = b["boxes"].split(), b["which"].split()
        kept = 0
        for j, i in enumerate(idx):
            want_mask, want_boxes, crop = reference(tmp_path, samples[i], size, seed, i)
            assert np.array_equal(np.asarray(b["mask"][j]).reshape(size, size), want_mask), i
            assert np.allclose(np.asarray(got_boxes[j]), want_boxes, atol=1e-4), \
                (i, got_boxes[j], want_boxes)
            # rows= follows its boxes: the numbers of the boxes whose centre
            # is inside the crop (i j h w: top, left, height, width)
            top, left, ch, cw = crop
            src = samples[i]["boxes"].astype(np.float64)
            cx, cy = (src[:, 0] + src[:, 2]) / 2, (src[:, 1] + src[:, 3]) / 2
            inside = (cx >= left) & (cx < left + cw) & (cy >= top) & (cy < top + ch)
            assert np.asarray(got_which[j]).tolist() == np.flatnonzero(inside).tolist(), i
            kept += want_boxes.shape[0]
        assert loader.last.dropped == sum(samples[i]["boxes"].shape[0] for i in idx) - kept
        dropped += loader.last.dropped
        del b
    loader.close()
    assert dropped > 0, "no crop dropped a box: the test shows nothing"
    st = d.stats()
    counts = [int(v) for k, v in st.items() if k.endswith("boxes_dropped")]
    assert counts and max(counts) >= dropped, {k: v for k, v in st.items() if "drop" in k}


def reference(tmp, s, size, seed, index):
    """The workers' own train transform for (seed, epoch 0, index), run by
    tests/targets_run on the sample: (mask, kept boxes, crop i j h w)."""
    img, mask, boxes, out = (os.path.join(tmp, n) for n in ("img", "mask", "boxes", "out"))
    for p, data in ((img, rfpx(s["image"])), (mask, rfpx(s["mask"])),
                    (boxes, s["boxes"].astype("<f4").tobytes()), (out, b"")):
        with open(p, "wb") as f:
            f.write(data)
    r = subprocess.run([binary("tests/targets_run"), "train", str(size), str(seed), str(index),
                        "1", img, mask, boxes, out], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    ok = [ln for ln in r.stdout.splitlines() if ln.startswith("ok ")][0].split()
    crop = tuple(int(v) for v in ok[2:6])
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("boxes ")][0].split()
    kept = np.array([float(v) for v in line[2:]], dtype=np.float32).reshape(-1, 4)
    assert kept.shape[0] == int(line[1])
    with open(out, "rb") as f:
        m = np.frombuffer(f.read(), dtype=np.uint8).reshape(size, size)
    return m, kept, crop


# ---- 3. kill storm and decode once with a fields stream --------------------

def digest(sock, dataset, batch, epochs, extra=()):
    out, _ = run_read(sock, dataset, batch=batch, epochs=epochs,
                      extra=["--transform", "none"] + list(extra))
    return out


def test_kill_storm_on_a_fields_stream(every_kind, daemon_factory):
    path, _ = every_kind
    d = daemon_factory({"every": path}, workers=2)
    args = ["--seed", "4", "--depth", "2"]
    clean = digest(d.sock, "every", 8, 6, args)
    assert clean.get("fields"), clean
    stop = threading.Event()
    hits = []
    rng = random.Random(2)

    def storm():
        while not stop.is_set():
            kids = [k for k in d.pid_tree() if k not in hits and proc_alive(k)]
            if kids:
                victim = rng.choice(kids)
                try:
                    os.kill(victim, signal.SIGKILL)
                    hits.append(victim)
                except ProcessLookupError:
                    pass
            stop.wait(0.05)

    t = threading.Thread(target=storm, daemon=True)
    t.start()
    try:
        stormy = digest(d.sock, "every", 8, 6, args)
    finally:
        stop.set()
        t.join(30)
    assert hits, "the storm never hit a worker"
    assert stormy["digest"] == clean["digest"], (len(hits), d.read_log()[-3000:])
    assert stormy["fields"] == clean["fields"]
    wait_for(lambda: int(d.stats()["workers.alive"]) == 2, "the pool back to 2")
    assert int(d.stats()["errors.substituted"]) == 0


def test_two_readers_share_a_fields_stream(every_kind, daemon_factory):
    path, _ = every_kind
    d = daemon_factory({"every": path}, workers=2)
    cmd = [read_tool(), "--socket", d.sock, "--dataset", "every", "--batch", "8", "--epochs",
           "30", "--transform", "none", "--seed", "6", "--json"]
    want = digest(d.sock, "every", 8, 30, ["--seed", "6", "--params", "share=0"])
    # both attached before any batch is made: the second joins the first's
    # group at its first batch whatever the machine's load (started freely,
    # the first could be past the point where the second may join)
    with workers_held(d):
        ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
        wait_for(lambda: d.stats()["clients.attached"] == "2", "both readers to attach")
    outs = [p.communicate(timeout=300) for p in ps]
    for p, (o, e) in zip(ps, outs):
        assert p.returncode == 0, e
        got = json.loads(o.strip().splitlines()[-1])
        assert got["digest"] == want["digest"] and got["fields"] == want["fields"]
    st = d.stats()
    assert int(st.get("sharing.batches", 0)) > 0, {k: v for k, v in st.items() if "shar" in k}
