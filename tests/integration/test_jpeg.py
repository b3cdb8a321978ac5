"""test_jpeg.py - the workers' JPEG transforms end to end (issue 4).

Photographs are made at test time from Debian's mate-backgrounds with
Pillow (4:2:0, 4:2:2, 4:4:4, progressive, grayscale, CMYK, a small one to
enlarge, two large originals that take the 1/4 and 1/8 DCT scales), packed
with `ringfeed-pack imagefolder`, and served by a real daemon:

  1. eval against Pillow: Image.open -> resize the shorter side to
     int(size / crop) with BILINEAR (antialiased, no reducing_gap) -> center
     crop with torchvision's rounding; mean absolute difference per pixel at
     most 3 of 255 for every image (the figures are printed: pytest -s);
     CHW and HWC hold the same pixels;
  2. train against Pillow: tests/xform_run (the same transform outside the
     daemon) reports each sample's crop and flip; Pillow's crop + resize +
     flip of that crop is within 3 of it, and the daemon's sample is byte
     for byte xform_run's for the same (seed, epoch, index);
  3. train is deterministic: the same digest from 1 and 2 workers, another
     with another seed;
  4. bad files (made here, packed as they are by tests/pack_bytes): each is
     counted under its reason and replaced by the next good sample, flagged;
     the epoch comes out in full batches; the daemon and its workers stay up;
  5. a run of bad samples past max-bad-samples fails the stream with a
     reason; the pixel-cap setting reaches the workers; train on a tensor
     dataset is refused with a reason; STATS splits the workers' time into
     decode, resize and write.
No test asserts a duration.
"""
import os
import random
import shutil
import struct
import subprocess

import numpy as np
import pytest
from PIL import Image

from conftest import binary, ctl, pack_tool, run_read

MATE = "/usr/share/backgrounds/mate"
SIZE = 224
FLAG_SUBSTITUTED = 2

pytestmark = pytest.mark.skipif(not os.path.isdir(MATE),
                                reason="mate-backgrounds is not installed")


def mate(rel):
    return Image.open(os.path.join(MATE, rel)).convert("RGB")


def crop_resize(im, box, size):
    return im.crop(box).resize(size, Image.BILINEAR)


# name: (class, how it is made).  Sorted by class then name, as ImageFolder.
def make_photos(root):
    made = {
        "c0/a_420.jpg": lambda p: crop_resize(mate("nature/Garden.jpg"), (300, 200, 2300, 1700),
                                              (500, 375)).save(p, quality=90, subsampling=2),
        "c0/b_422.jpg": lambda p: crop_resize(mate("nature/LadyBird.jpg"), (800, 100, 1925, 1600),
                                              (375, 500)).save(p, quality=85, subsampling=1),
        "c0/c_444.jpg": lambda p: crop_resize(mate("nature/Aqua.jpg"), (0, 0, 2560, 1600),
                                              (640, 400)).save(p, quality=95, subsampling=0),
        "c1/d_progressive.jpg": lambda p: crop_resize(mate("nature/Dune.jpg"), (400, 0, 1188, 1050),
                                                      (333, 444)).save(p, quality=90,
                                                                       progressive=True),
        "c1/e_gray.jpg": lambda p: crop_resize(mate("nature/Storm.jpg"), (0, 0, 1920, 1280),
                                               (420, 280)).convert("L").save(p, quality=90),
        "c1/f_cmyk.jpg": lambda p: crop_resize(mate("nature/Blinds.jpg"), (500, 0, 1400, 1200),
                                               (300, 400)).convert("CMYK").save(p, quality=90),
        "c2/g_small.jpg": lambda p: crop_resize(mate("nature/YellowFlower.jpg"),
                                                (900, 500, 1700, 1100), (200, 150)).save(
                                                    p, quality=90),
        "c2/h_1920.jpg": lambda p: shutil.copy(os.path.join(MATE, "abstract/Elephants.jpg"), p),
        "c2/i_2560.jpg": lambda p: shutil.copy(os.path.join(MATE, "nature/Wood.jpg"), p),
    }
    for rel, make in made.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        make(path)
    return [os.path.join(root, rel) for rel in sorted(made)]


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    root = tmp_path_factory.mktemp("photos")
    files = make_photos(str(root / "tree"))
    ds = str(root / "ds")
    subprocess.run([pack_tool(), "imagefolder", str(root / "tree"), ds], check=True,
                   capture_output=True)
    return {"files": files, "ds": ds, "labels": [int(f.split("/")[-2][1]) for f in files]}


def rf_dump(sock, dataset, out, *args):
    cmd = [binary("tests/rf_dump"), "--socket", sock, "--dataset", dataset, out] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"
    import json
    meta = json.loads(r.stdout)
    n, sb = meta["samples"], meta["sample_bytes"]
    raw = open(out, "rb").read()
    assert len(raw) == n * (24 + sb)
    rows = []
    for k in range(n):
        off = k * (24 + sb)
        idx, label, flags, epoch = struct.unpack_from("<QiIQ", raw, off)
        rows.append((idx, label, flags, epoch, np.frombuffer(raw, np.uint8, sb, off + 24)))
    return meta, rows


def pil_eval(path, size=SIZE, crop=0.875):
    """torchvision's Resize(int(size / crop)) + CenterCrop(size) on PIL."""
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = int(size / crop)
    if w <= h:
        nw, nh = s, int(s * h / w)
    else:
        nh, nw = s, int(s * w / h)
    im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    return np.asarray(im.crop((left, top, left + size, top + size)))


def pil_train(path, i, j, h, w, flip, size=SIZE):
    """torchvision's resized_crop + hflip on PIL."""
    im = Image.open(path).convert("RGB").crop((j, i, j + w, i + h))
    im = im.resize((size, size), Image.BILINEAR)
    if flip:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(im)


def assert_clean(d):
    """No sanitizer report from the daemon or its workers (the ASan build)."""
    log = d.read_log()
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        assert bad not in log, log[-4000:]


def mad(a, b):
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def chw_to_hwc(x, size=SIZE):
    return x.reshape(3, size, size).transpose(1, 2, 0)


def test_eval_matches_pil(photos, daemon_factory):
    d = daemon_factory({"photos": photos["ds"]}, workers=2)
    n = len(photos["files"])
    meta, rows = rf_dump(d.sock, "photos", os.path.join(d.dir, "eval.bin"), "--transform",
                         "eval", "--size", str(SIZE), "--batch", str(n), "--no-shuffle")
    assert meta["shape"] == [3, SIZE, SIZE] and meta["layout"] == 1
    assert [r[0] for r in rows] == list(range(n))
    assert [r[1] for r in rows] == photos["labels"]
    assert all(r[2] == 0 for r in rows)
    print()
    worst = 0.0
    for idx, _, _, _, px in rows:
        path = photos["files"][idx]
        m = mad(chw_to_hwc(px), pil_eval(path))
        im = Image.open(path)
        print(f"eval MAD vs Pillow {os.path.basename(path):22s} {im.size[0]}x{im.size[1]} "
              f"{im.mode:5s}: {m:.3f}")
        worst = max(worst, m)
        assert m <= 3.0, f"{path}: mean absolute difference {m:.3f} > 3"
    # HWC is the same pixels
    _, hwc = rf_dump(d.sock, "photos", os.path.join(d.dir, "hwc.bin"), "--transform", "eval",
                     "--size", str(SIZE), "--batch", str(n), "--no-shuffle", "--params",
                     "layout=hwc")
    for a, b in zip(rows, hwc):
        assert a[0] == b[0]
        assert np.array_equal(chw_to_hwc(a[4]), b[4].reshape(SIZE, SIZE, 3))
    assert_clean(d)


def test_train_matches_pil_and_standalone(photos, daemon_factory, tmp_path):
    d = daemon_factory({"photos": photos["ds"]}, workers=2)
    n = len(photos["files"])
    _, rows = rf_dump(d.sock, "photos", os.path.join(d.dir, "train.bin"), "--transform",
                      "train", "--size", str(SIZE), "--batch", "3", "--seed", "7")
    assert sorted(r[0] for r in rows) == list(range(n))
    flips = 0
    mads = []
    print()
    for idx, _, flags, epoch, px in rows:
        assert flags == 0 and epoch == 0
        path = photos["files"][idx]
        out = str(tmp_path / f"x{idx}.bin")
        r = subprocess.run([binary("tests/xform_run"), "train", str(SIZE), "7", str(idx), out,
                            path, "--chw"], capture_output=True, text=True, check=True)
        ok = r.stdout.split("\n")[0].split()
        assert ok[0] == "ok", r.stdout
        i, j, h, w, flip = (int(v) for v in ok[4:9])
        flips += flip
        mine = np.fromfile(out, np.uint8)
        assert np.array_equal(mine, px), f"{path}: daemon and xform_run differ"
        m = mad(chw_to_hwc(px), pil_train(path, i, j, h, w, flip))
        print(f"train MAD vs Pillow {os.path.basename(path):22s} crop {w}x{h} at ({j},{i})"
              f"{' flipped' if flip else ''}: {m:.3f}")
        assert m <= 3.0, f"{path}: crop {i} {j} {h} {w} flip {flip}: MAD {m:.3f} > 3"
        mads.append(m)
    # the train crops' DCT scale rule (jpeg.h, JPG_COVER_TRAIN) keeps the
    # mean within 1.0 of Pillow (bench/jpeg-scale has the figures)
    assert sum(mads) / len(mads) <= 1.0, f"mean train MAD {sum(mads) / len(mads):.3f} > 1.0"
    assert_clean(d)


def test_train_same_bytes_any_worker_count(photos, daemon_factory):
    digests = {}
    for workers in (1, 2):
        d = daemon_factory({"photos": photos["ds"]}, workers=workers)
        out, _ = run_read(d.sock, "photos", batch=4, epochs=3,
                          extra=["--transform", "train", "--seed", "11"])
        digests[workers] = out["digest"]
        other, _ = run_read(d.sock, "photos", batch=4, epochs=3,
                            extra=["--transform", "train", "--seed", "12"])
        assert other["digest"] != out["digest"]
        d.stop()
    assert digests[1] == digests[2]


# ---- bad files ---------------------------------------------------------------

def sof_patched(data, w, h):
    for marker in (b"\xff\xc0", b"\xff\xc1", b"\xff\xc2"):
        at = data.find(marker)
        if at >= 0:
            return data[:at + 5] + struct.pack(">HH", h, w) + data[at + 9:]
    raise AssertionError("no SOF marker")


def many_scans(progressive, copies):
    """The last scan of a progressive file repeated: scans past the cap."""
    last = progressive.rfind(b"\xff\xda")
    eoi = progressive.rfind(b"\xff\xd9")
    return progressive[:eoi] + progressive[last:eoi] * copies + progressive[eoi:]


def bit_flipped(data):
    out = bytearray(data)
    for k in range(len(out) // 3, len(out) - 4, 37):
        out[k] ^= 0x5A
    return bytes(out)


def make_bad(root, photos):
    """(files to pack as (path, label), expected reason per index or None)."""
    good = [open(p, "rb").read() for p in photos["files"][:6]]
    prog = open(photos["files"][3], "rb").read()
    png = os.path.join(root, "png.png")
    Image.open(photos["files"][0]).save(png, "PNG")
    one = os.path.join(root, "one.jpg")
    Image.new("RGB", (1, 1), (200, 30, 40)).save(one, quality=95)
    rng = random.Random(4)
    items = [
        ("good0", good[0], None),
        ("trunc_header", good[1][:100], "decode"),
        ("good1", good[1], None),
        ("trunc_scan", good[2][:len(good[2]) // 2], "decode"),
        ("zero", b"", "decode"),
        ("good2", good[2], None),
        ("garbage", bytes(rng.getrandbits(8) for _ in range(5000)), "decode"),
        ("huge_sof", sof_patched(good[0], 60000, 60000), "too_large"),
        ("good3", good[3], None),
        ("bitflip", bit_flipped(good[0]), "decode"),
        ("png", open(png, "rb").read(), "decode"),
        ("cmyk", good[5], None),
        ("many_scans", many_scans(prog, 150), "too_large"),
        ("one_pixel", open(one, "rb").read(), None),
        ("good4", good[4], None),
    ]
    files = []
    for k, (name, data, _) in enumerate(items):
        p = os.path.join(root, f"{k:02d}_{name}.jpg")
        with open(p, "wb") as f:
            f.write(data)
        files.append((p, k % 3))
    return files, [why for _, _, why in items], [name for name, _, _ in items]


def pack_bytes(out, files, classes=3):
    subprocess.run([binary("tests/pack_bytes"), out, str(classes)] +
                   [f"{p}:{label}" for p, label in files], check=True)


def wait_idle(d):
    """STATS once no job is queued and the busy time stops moving."""
    import time
    last = None
    for _ in range(600):
        st = d.stats()
        key = (st.get("jobs.queued"), st.get("time.busy_seconds"), st.get("total.jobs"))
        if st.get("jobs.queued") == "0" and st.get("jobs.running") == "0" and key == last:
            return st
        last = key
        time.sleep(0.1)
    return d.stats()


def test_bad_files_replaced_counted_survived(photos, daemon_factory, tmp_path):
    files, why, names = make_bad(str(tmp_path), photos)
    ds = str(tmp_path / "bad")
    pack_bytes(ds, files)
    d = daemon_factory({"bad": ds}, workers=2)
    pids = sorted(d.worker_pids())
    n = len(files)
    _, rows = rf_dump(d.sock, "bad", str(tmp_path / "bad.bin"), "--transform", "eval", "--size",
                      str(SIZE), "--batch", "5", "--no-shuffle")
    assert len(rows) == n, "the epoch comes out whole, in full batches"
    good = [k for k in range(n) if why[k] is None]
    for k, (idx, label, flags, epoch, px) in enumerate(rows):
        if why[k] is None:
            assert (idx, flags) == (k, 0), f"{names[k]} is a good sample"
        else:
            want = next(g for g in good + [g + n for g in good] if g > k) % n
            assert flags & FLAG_SUBSTITUTED, f"{names[k]} flagged as substituted"
            assert idx == want and label == files[want][1], \
                f"{names[k]} replaced by the next good sample {names[want]}, got {idx}"
            assert np.array_equal(px, rows[want][4]) if why[want] is None else True
    # the 1x1 image is a valid picture: enlarged to a flat sample of its colour
    one = chw_to_hwc(rows[names.index("one_pixel")][4])
    assert np.abs(one.astype(int) - [200, 30, 40]).max() <= 3
    st = wait_idle(d)
    dec, big = int(st["errors.bad.decode"]), int(st["errors.bad.too_large"])
    # a worker counts every bad sample it meets: the planned one, and those
    # its search for the next good one passes over
    per_epoch = {"decode": 0, "too_large": 0}
    for k in range(n):
        j = k
        while why[j % n] is not None and (j == k or j % n != k):
            per_epoch[why[j % n]] += 1
            j += 1
    # at least the epoch read (the daemon may have planned batches past it,
    # and a stream's last jobs may or may not run before it detaches), and
    # under no other reason
    assert dec >= per_epoch["decode"] and big >= per_epoch["too_large"], (per_epoch, st)
    for other in ("read", "checksum", "shape", "quarantined"):
        assert st[f"errors.bad.{other}"] == "0", (other, st)
    assert int(st["errors.substituted"]) >= len([w for w in why if w]), st
    assert int(st["workers.deaths"]) == 0 and sorted(d.worker_pids()) == pids
    assert d.proc.poll() is None
    log = d.read_log()
    for reason in ("PNG data, not a JPEG", "empty record", "over the pixel cap", "scan cap",
                   "Premature end"):
        assert reason in log, f"the log names the reason: {reason}"
    # still serving
    out, _ = run_read(d.sock, "bad", batch=5, epochs=1, extra=["--transform", "train"])
    assert out["samples"] == n
    assert_clean(d)


def test_run_of_bad_samples_fails_the_stream(photos, daemon_factory, tmp_path):
    junk = str(tmp_path / "junk.jpg")
    with open(junk, "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 not really a jpeg")
    files = [(photos["files"][0], 0)] + [(junk, 1)] * 12
    ds = str(tmp_path / "junk")
    pack_bytes(ds, files, classes=2)
    conf = str(tmp_path / "c.conf")
    with open(conf, "w") as f:
        f.write("max-bad-samples = 4\n")
    d = daemon_factory({"junk": ds}, workers=2, extra=["--config", conf])
    out, r = run_read(d.sock, "junk", batch=13, epochs=1, check=False,
                      extra=["--transform", "eval", "--no-shuffle"])
    assert r.returncode == 1, r.stdout
    assert "bad samples in a row" in r.stderr, r.stderr
    assert d.proc.poll() is None and int(d.stats()["workers.deaths"]) == 0
    assert_clean(d)


def test_pixel_cap_reaches_workers(photos, daemon_factory, tmp_path):
    conf = str(tmp_path / "c.conf")
    with open(conf, "w") as f:
        f.write("pixel-cap = 250000\n")  # the 640x400 and larger are over it
    d = daemon_factory({"photos": photos["ds"]}, workers=1, extra=["--config", conf])
    n = len(photos["files"])
    _, rows = rf_dump(d.sock, "photos", str(tmp_path / "cap.bin"), "--transform", "eval",
                      "--size", "64", "--batch", str(n), "--no-shuffle")
    over = {k for k, p in enumerate(photos["files"])
            if Image.open(p).size[0] * Image.open(p).size[1] > 250000}
    assert over and len(over) < n
    for k, row in enumerate(rows):
        assert bool(row[2] & FLAG_SUBSTITUTED) == (k in over), photos["files"][k]
    st = wait_idle(d)
    assert int(st["errors.bad.too_large"]) >= len(over)
    assert st["errors.bad.decode"] == "0"


def test_train_on_tensor_dataset_refused(packed_fmnist, daemon_factory):
    d = daemon_factory({"fmnist": packed_fmnist["test"]}, workers=1)
    out, r = run_read(d.sock, "fmnist", batch=8, epochs=1, check=False,
                      extra=["--transform", "train"])
    assert r.returncode != 0
    assert "needs a jpeg dataset" in r.stderr, r.stderr


def test_stats_split_stages(photos, daemon_factory):
    d = daemon_factory({"photos": photos["ds"]}, workers=2)
    # the resampler's vertical pass stores into the slot in either layout
    # (HWC too): that write is part of resize, and the JPEG transforms have
    # no write stage of their own
    run_read(d.sock, "photos", batch=3, epochs=2,
             extra=["--transform", "train", "--params", "layout=hwc"])
    st = wait_idle(d)
    for key in ("time.image_decode_seconds", "time.resize_seconds"):
        assert float(st[key]) > 0, key
    assert float(st["time.write_seconds"]) == 0
    assert float(st["time.transform_seconds"]) >= float(st["time.image_decode_seconds"])
    m = ctl(d.sock, "metrics").stdout
    assert "ringfeed_time_resize_seconds_total" in m


def test_tiles_counted(photos, daemon_factory, tmp_path):
    """A default pack's records carry restart-interval tiles, and most train
    crops are decoded from them (total.jpeg_tiled); the same tree packed
    --as-is (files without restart markers) has none, with the same pixels."""
    tree = os.path.dirname(os.path.dirname(photos["files"][0]))
    as_is = str(tmp_path / "as-is")
    subprocess.run([pack_tool(), "imagefolder", "--as-is", tree, as_is], check=True,
                   capture_output=True)
    d = daemon_factory({"photos": photos["ds"], "plain": as_is}, workers=2)
    digests = {}
    for name in ("photos", "plain"):
        out, _ = run_read(d.sock, name, batch=3, epochs=2,
                          extra=["--transform", "train", "--seed", "3"])
        digests[name] = out["digest"]
        st = wait_idle(d)
        digests[name + ".tiled"] = int(st["total.jpeg_tiled"])
        digests[name + ".made"] = int(st["total.samples_made"])
    made = digests["photos.made"]
    assert digests["photos.tiled"] > made // 2, digests
    assert digests["plain.tiled"] == digests["photos.tiled"], digests  # none more
    assert digests["photos"] == digests["plain"], "tiles changed a pixel"
    assert "ringfeed_jpeg_tiled_total" in ctl(d.sock, "metrics").stdout
    assert_clean(d)
