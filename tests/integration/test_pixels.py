"""test_pixels.py - RFPX pixel records (proto/pixels.h) in a jpeg dataset,
served end to end.

Images are made here with numpy (smooth gradients with a pattern and some
noise, sizes from 1x1 to a 3-pixel strip to 641x479), written as RFPX
records beside two JPEGs (Pillow) and packed with tests/pack_bytes
(--zstd --raw-images N: ringfeed-pack imagefolder does not write them on
this branch), then served by a real daemon:

  1. ringfeed-pack info shows raw_images; verify passes, and fails naming
     both numbers when the MANIFEST's count is wrong;
  2. eval against Pillow on the same pixels: Resize(int(size / crop)) with
     BILINEAR, then CenterCrop with torchvision's rounding, as
     test_jpeg.py does for JPEGs, with its bound: mean absolute difference
     per pixel at most 3 of 255 for every image (the figures are printed:
     pytest -s);
  3. train: the daemon's sample is byte for byte tests/xform_run's for the
     same (seed, epoch, index), and within the same bound of Pillow's crop
     + resize + flip of the crop xform_run reports;
  4. a damaged RFPX record is a bad sample (decode), substituted, and
     verify names it;
  5. transform none: a dataset of 32x32 RFPX records packed with
     --image-shape 32x32 comes out exactly as its source pixels, chw and
     hwc, through rf_dump and through the Python binding ((N, 3, 32, 32)
     uint8); ringfeed-pack info shows the shape; without image_shape,
     ATTACH transform=none is refused naming the missing key.
No test asserts a duration.
"""
import json
import os
import struct
import subprocess

import numpy as np
import pytest
from PIL import Image

from conftest import binary, pack_tool

SIZE = 224
FLAG_SUBSTITUTED = 2
SIZES = [(300, 200), (200, 300), (64, 64), (17, 31), (1, 1), (500, 3), (3, 500), (641, 479),
         (1024, 768)]


def image(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / max(w, 2) * 6.0 + seed)
    g = 255 * y / max(h - 1, 1)
    b = ((x // 9 + y // 9) % 2) * 120 + 60
    px = np.stack([r, g, b], axis=-1) + rng.normal(0, 12, (h, w, 3))
    return np.clip(px, 0, 255).astype(np.uint8)


def rfpx(px):
    h, w, _ = px.shape
    return b"RFPX" + bytes([1, 3, 0, 0]) + struct.pack("<II", w, h) + px.tobytes()


@pytest.fixture(scope="module")
def pixels(tmp_path_factory):
    root = tmp_path_factory.mktemp("pixels")
    files, refs = [], []
    for k, (w, h) in enumerate(SIZES):
        px = image(w, h, k)
        path = str(root / f"p{k}.rfpx")
        with open(path, "wb") as f:
            f.write(rfpx(px))
        files.append((path, k % 3))
        refs.append(Image.fromarray(px, "RGB"))
    # two JPEGs among them: the dataset mixes both kinds of record
    for k, (w, h) in enumerate([(320, 240), (180, 260)]):
        path = str(root / f"j{k}.jpg")
        Image.fromarray(image(w, h, 50 + k), "RGB").save(path, quality=95)
        files.insert(2 + 3 * k, (path, 1))
        refs.insert(2 + 3 * k, Image.open(path).convert("RGB"))
    ds = str(root / "ds")
    pack(ds, files, len(SIZES))
    return {"ds": ds, "files": files, "refs": refs, "root": root}


def pack(out, files, raw_images, shape=None):
    extra = ["--image-shape", f"{shape[0]}x{shape[1]}"] if shape else []
    subprocess.run([binary("tests/pack_bytes"), "--zstd", "--raw-images", str(raw_images)] +
                   extra + [out, "3"] + [f"{p}:{label}" for p, label in files], check=True)


def rf_dump(sock, dataset, out, *args):
    cmd = [binary("tests/rf_dump"), "--socket", sock, "--dataset", dataset, out] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"
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


def pil_eval(im, size=SIZE, crop=0.875):
    """torchvision's Resize(int(size / crop)) + CenterCrop(size) on PIL."""
    w, h = im.size
    s = int(size / crop)
    if w <= h:
        nw, nh = s, int(s * h / w)
    else:
        nh, nw = s, int(s * w / h)
    im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    return np.asarray(im.crop((left, top, left + size, top + size)))


def pil_train(im, i, j, h, w, flip, size=SIZE):
    im = im.crop((j, i, j + w, i + h)).resize((size, size), Image.BILINEAR)
    if flip:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(im)


def mad(a, b):
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def chw_to_hwc(x, size=SIZE):
    return x.reshape(3, size, size).transpose(1, 2, 0)


def assert_clean(d):
    log = d.read_log()
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        assert bad not in log, log[-4000:]


def test_info_and_verify(pixels, tmp_path):
    r = subprocess.run([pack_tool(), "info", pixels["ds"]], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"pixels    {len(SIZES)} records RFPX" in r.stdout, r.stdout
    assert ", 2 JPEG" in r.stdout, r.stdout
    r = subprocess.run([pack_tool(), "verify", pixels["ds"]], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(pixels['files'])} good, 0 problems" in r.stdout, r.stdout
    # the MANIFEST's count one short: verify fails naming both numbers
    wrong = str(tmp_path / "wrong")
    pack(wrong, pixels["files"], len(SIZES) - 1)
    r = subprocess.run([pack_tool(), "verify", wrong], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout
    assert (f"{len(SIZES)} RFPX pixel records found, the MANIFEST's raw_images says "
            f"{len(SIZES) - 1}") in r.stdout, r.stdout
    # without the key at all: 0 said, 9 found
    none = str(tmp_path / "none")
    pack(none, pixels["files"], 0)
    r = subprocess.run([pack_tool(), "verify", none], capture_output=True, text=True)
    assert r.returncode == 1 and "raw_images says 0" in r.stdout, r.stdout
    assert "raw_images" not in open(os.path.join(none, "MANIFEST")).read()
    assert f"raw_images {len(SIZES)}\n" in open(os.path.join(pixels["ds"], "MANIFEST")).read()


def test_eval_matches_pil(pixels, daemon_factory):
    d = daemon_factory({"px": pixels["ds"]}, workers=2)
    n = len(pixels["files"])
    meta, rows = rf_dump(d.sock, "px", os.path.join(d.dir, "eval.bin"), "--transform", "eval",
                         "--size", str(SIZE), "--batch", str(n), "--no-shuffle")
    assert meta["shape"] == [3, SIZE, SIZE]
    assert [r[0] for r in rows] == list(range(n))
    assert [r[1] for r in rows] == [label for _, label in pixels["files"]]
    assert all(r[2] == 0 for r in rows), [r[2] for r in rows]
    print()
    for idx, _, _, _, px in rows:
        path, ref = pixels["files"][idx][0], pixels["refs"][idx]
        m = mad(chw_to_hwc(px), pil_eval(ref))
        print(f"eval MAD vs Pillow {os.path.basename(path):10s} {ref.size[0]}x{ref.size[1]}: "
              f"{m:.3f}")
        assert m <= 3.0, f"{path}: mean absolute difference {m:.3f} > 3"
    assert_clean(d)


def test_train_matches_standalone_and_pil(pixels, daemon_factory, tmp_path):
    d = daemon_factory({"px": pixels["ds"]}, workers=2)
    n = len(pixels["files"])
    _, rows = rf_dump(d.sock, "px", os.path.join(d.dir, "train.bin"), "--transform", "train",
                      "--size", str(SIZE), "--batch", "4", "--seed", "7")
    assert sorted(r[0] for r in rows) == list(range(n))
    print()
    for idx, _, flags, epoch, px in rows:
        assert flags == 0 and epoch == 0
        path, ref = pixels["files"][idx][0], pixels["refs"][idx]
        out = str(tmp_path / f"x{idx}.bin")
        r = subprocess.run([binary("tests/xform_run"), "train", str(SIZE), "7", str(idx), out,
                            path, "--chw"], capture_output=True, text=True, check=True)
        ok = r.stdout.split("\n")[0].split()
        assert ok[0] == "ok", r.stdout
        assert (int(ok[2]), int(ok[3])) == ref.size
        i, j, h, w, flip = (int(v) for v in ok[4:9])
        assert np.array_equal(np.fromfile(out, np.uint8), px), \
            f"{path}: daemon and xform_run differ"
        m = mad(chw_to_hwc(px), pil_train(ref, i, j, h, w, flip))
        print(f"train MAD vs Pillow {os.path.basename(path):10s} crop {w}x{h} at ({j},{i})"
              f"{' flipped' if flip else ''}: {m:.3f}")
        assert m <= 3.0, f"{path}: crop {i} {j} {h} {w} flip {flip}: MAD {m:.3f} > 3"
    assert_clean(d)


def test_damaged_record_is_bad_sample(pixels, daemon_factory, tmp_path):
    files = list(pixels["files"][:4])
    short = str(tmp_path / "short.rfpx")
    with open(files[0][0], "rb") as f:
        whole = f.read()
    with open(short, "wb") as f:
        f.write(whole[:-3])
    files.insert(1, (short, 0))
    ds = str(tmp_path / "bad")
    pack(ds, files, sum(1 for p, _ in files if p.endswith(".rfpx")))
    r = subprocess.run([pack_tool(), "verify", ds], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout
    assert "record 1 at byte" in r.stdout and "RFPX 300x200 is" in r.stdout, r.stdout
    d = daemon_factory({"bad": ds}, workers=1)
    n = len(files)
    _, rows = rf_dump(d.sock, "bad", os.path.join(d.dir, "bad.bin"), "--transform", "eval",
                      "--size", "32", "--batch", str(n), "--no-shuffle")
    assert len(rows) == n
    assert [bool(r[2] & FLAG_SUBSTITUTED) for r in rows] == [k == 1 for k in range(n)]
    st = d.stats()
    assert int(st["errors.bad.decode"]) >= 1, st
    assert "RFPX 300x200 is" in d.read_log()
    assert_clean(d)


def test_imagefolder_of_every_format_served_as_pillow_sees_it(daemon_factory, tmp_path):
    """A PNG, WebP, BMP, TIFF, PPM and JPEG ImageFolder packed by ringfeed-pack
    and served: sample i is ImageFolder's sample i, and its eval crop is
    torchvision's Resize + CenterCrop of Image.open(f).convert("RGB")
    within test_jpeg.py's bound (mean absolute difference <= 3 of 255)."""
    src = tmp_path / "src"
    made = []
    kinds = [("cats", "a.png", {}), ("cats", "b.webp", {"lossless": True}),
             ("cats", "c.bmp", {}), ("dogs", "d.tif", {}), ("dogs", "e.ppm", {}),
             ("dogs", "f.jpg", {"quality": 95}), ("dogs", "g.png", {"mode": "L"}),
             ("dogs", "h.png", {"mode": "P"})]
    for k, (cls, name, kw) in enumerate(kinds):
        os.makedirs(src / cls, exist_ok=True)
        im = Image.fromarray(image(120 + 37 * k, 90 + 23 * k, 100 + k), "RGB")
        mode = kw.pop("mode", None)
        if mode == "L":
            im = im.convert("L")
        elif mode == "P":
            im = im.convert("P", palette=Image.ADAPTIVE, colors=64)
        im.save(src / cls / name, **kw)
        made.append((str(src / cls / name), 0 if cls == "cats" else 1))
    made.sort()                         # ImageFolder's order: class, then file name
    ds = str(tmp_path / "ds")
    r = subprocess.run([pack_tool(), "imagefolder", str(src), ds], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"raw_images {len(made) - 1}" in open(os.path.join(ds, "MANIFEST")).read()
    d = daemon_factory({"folder": ds}, workers=2)
    meta, rows = rf_dump(d.sock, "folder", os.path.join(d.dir, "eval.bin"), "--transform",
                         "eval", "--size", str(SIZE), "--batch", str(len(made)), "--no-shuffle")
    assert [r[0] for r in rows] == list(range(len(made)))
    assert [r[1] for r in rows] == [label for _, label in made]
    assert all(r[2] == 0 for r in rows), [r[2] for r in rows]
    print()
    for idx, _, _, _, px in rows:
        path = made[idx][0]
        with Image.open(path) as im:
            ref = pil_eval(im.convert("RGB"))
        m = mad(chw_to_hwc(px), ref)
        print(f"eval MAD vs Pillow {os.path.basename(path)}: {m:.3f}")
        assert m <= 3.0, f"{path}: mean absolute difference {m:.3f} > 3"
    assert_clean(d)

# ---- transform none --------------------------------------------------------

SMALL = 32


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Twelve 32x32 RFPX records, packed with and without image_shape."""
    root = tmp_path_factory.mktemp("small")
    files, pxs = [], []
    for k in range(12):
        px = image(SMALL, SMALL, 100 + k)
        path = str(root / f"s{k}.rfpx")
        with open(path, "wb") as f:
            f.write(rfpx(px))
        files.append((path, k % 3))
        pxs.append(px)
    shaped, plain = str(root / "shaped"), str(root / "plain")
    pack(shaped, files, len(files), (SMALL, SMALL))
    pack(plain, files, len(files))
    return {"shaped": shaped, "plain": plain, "files": files, "pixels": pxs}


def test_none_exact(small, daemon_factory):
    r = subprocess.run([pack_tool(), "info", small["shaped"]], capture_output=True, text=True)
    assert r.returncode == 0 and "every image 32x32" in r.stdout, r.stdout + r.stderr
    assert "image_shape 32x32\n" in open(os.path.join(small["shaped"], "MANIFEST")).read()
    d = daemon_factory({"cifar": small["shaped"]}, workers=2)
    n = len(small["files"])
    meta, rows = rf_dump(d.sock, "cifar", os.path.join(d.dir, "chw.bin"), "--transform", "none",
                         "--batch", str(n), "--no-shuffle")
    assert meta["shape"] == [3, SMALL, SMALL] and meta["sample_bytes"] == 3 * SMALL * SMALL
    assert [r[0] for r in rows] == list(range(n))
    for idx, label, flags, _, px in rows:
        assert flags == 0 and label == small["files"][idx][1]
        assert np.array_equal(px.reshape(3, SMALL, SMALL).transpose(1, 2, 0),
                              small["pixels"][idx]), f"record {idx}: chw differs"
    meta, rows = rf_dump(d.sock, "cifar", os.path.join(d.dir, "hwc.bin"), "--transform", "none",
                         "--batch", str(n), "--no-shuffle", "--params", "layout=hwc")
    assert meta["shape"] == [SMALL, SMALL, 3]
    for idx, _, flags, _, px in rows:
        assert flags == 0
        assert np.array_equal(px.reshape(SMALL, SMALL, 3), small["pixels"][idx]), \
            f"record {idx}: hwc differs"
    # asking none to resize is refused, not ignored
    r = subprocess.run([binary("tests/rf_dump"), "--socket", d.sock, "--dataset", "cifar",
                        os.path.join(d.dir, "x.bin"), "--transform", "none", "--size", "64"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "size=64" in r.stderr, r.stderr
    assert_clean(d)


def test_none_python(small, daemon_factory):
    ringfeed = _import_ringfeed()
    d = daemon_factory({"cifar": small["shaped"]}, workers=1)
    n = len(small["files"])
    loader = ringfeed.Loader("cifar", batch_size=n, transform="none", shuffle=False,
                             socket=d.sock)
    images, info = next(iter(loader))
    images = images.numpy() if hasattr(images, "numpy") else np.asarray(images)
    assert images.shape == (n, 3, SMALL, SMALL) and images.dtype == np.uint8, images.shape
    want = np.stack(small["pixels"]).transpose(0, 3, 1, 2)
    assert np.array_equal(images, want)
    del images, info
    loader.close()
    assert_clean(d)


def test_none_refused_without_shape(small, daemon_factory):
    d = daemon_factory({"plain": small["plain"]}, workers=1)
    r = subprocess.run([binary("tests/rf_dump"), "--socket", d.sock, "--dataset", "plain",
                        os.path.join(d.dir, "x.bin"), "--transform", "none"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout
    assert "MANIFEST has no image_shape" in r.stderr and "use train or eval" in r.stderr, \
        r.stderr
    r = subprocess.run([pack_tool(), "info", small["plain"]], capture_output=True, text=True)
    assert "not one size (no image_shape" in r.stdout, r.stdout
    assert_clean(d)


def _import_ringfeed():
    """The package from the build tree (test_python.py's PYTHONPATH), or skip."""
    import sys
    build = os.environ.get("RINGFEED_BUILD_DIR")
    if build and os.path.join(build, "python") not in sys.path:
        sys.path.insert(0, os.path.join(build, "python"))
    return pytest.importorskip("ringfeed")


def test_png_folder_of_one_size_delivered_as_is(daemon_factory, tmp_path):
    """A CIFAR-like ImageFolder (32x32 PNGs and a JPEG) packed by
    ringfeed-pack gets image_shape 32x32, and transform none gives Pillow's
    pixels of every file exactly, in ImageFolder's order; a folder of two
    sizes gets no image_shape."""
    ringfeed = _import_ringfeed()
    src = tmp_path / "src"
    made = []
    for k in range(9):
        cls = f"c{k % 3}"
        os.makedirs(src / cls, exist_ok=True)
        name = f"{k:02d}.jpg" if k == 4 else f"{k:02d}.png"
        Image.fromarray(image(SMALL, SMALL, 300 + k), "RGB").save(src / cls / name, quality=95)
        made.append((str(src / cls / name), k % 3))
    made.sort()
    ds = str(tmp_path / "ds")
    r = subprocess.run([pack_tool(), "imagefolder", str(src), ds], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    manifest = open(os.path.join(ds, "MANIFEST")).read().splitlines()
    assert f"image_shape {SMALL}x{SMALL}" in manifest, manifest
    d = daemon_factory({"cifar": ds}, workers=1)
    loader = ringfeed.Loader("cifar", batch_size=len(made), transform="none", shuffle=False,
                             socket=d.sock)
    images, labels = next(iter(loader))
    images = images.numpy() if hasattr(images, "numpy") else np.asarray(images)
    labels = labels.numpy() if hasattr(labels, "numpy") else np.asarray(labels)
    assert images.shape == (len(made), 3, SMALL, SMALL), images.shape
    assert labels.tolist() == [label for _, label in made]
    for k, (path, _) in enumerate(made):
        with Image.open(path) as im:
            want = np.asarray(im.convert("RGB")).transpose(2, 0, 1)
        assert np.array_equal(images[k], want), path
    del images, labels
    loader.close()
    assert_clean(d)
    Image.fromarray(image(SMALL + 1, SMALL, 400), "RGB").save(src / "c0" / "zz.png")
    r = subprocess.run([pack_tool(), "imagefolder", str(src), ds + "2"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert not any(ln.startswith("image_shape")
                   for ln in open(os.path.join(ds + "2", "MANIFEST")).read().splitlines())
