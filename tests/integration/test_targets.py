"""test_targets.py - masks and boxes that follow an image's crop
(daemon/worker/targets.c), against torchvision + Pillow and plain numpy.

tests/targets_run runs the workers' real train or eval transform on an RFPX
image, then a mask (an RFPX one-channel record, u8 or u16) and boxes through
the view it leaves, for many seeded samples, and reports each sample's crop
and flip (train) or resized size and crop corner (eval), the source box and
the kept boxes.  Here, for masks of several sizes (odd, square, wide, tall,
1 x 1, 2 x 7) and random crops, including ones that take torchvision's
central fallback:

  1. the mask equals, value for value, torchvision's
     resized_crop(mask, i, j, h, w, [S, S], NEAREST) (+ hflip when flipped)
     for train, and resize(mask, int(S / crop), NEAREST) + center_crop(S)
     for eval, on Pillow images of mode L (u8) and I (u16: what a 16-bit PNG
     opens as);
  2. the boxes equal (within 1e-4 px) a numpy reference: subtract the
     source box's left/top, scale by S / its width and height, mirror x
     when flipped, clip to [0, S], drop boxes whose centre is not in the
     half-open source box; eval's source box and resized size are
     torchvision's;
  3. the fallback cases' crops are torchvision's central fallback;
  4. the same over 40 random image sizes (train and eval, random output
     sizes and crop fractions), and with a JPEG image in place of the RFPX
     one (the same view: the mask follows the full-scale image);
  5. a mask of another size than its image is a bad sample, shape;
  6. Pillow itself still resamples NEAREST as targets.h says (the walk for
     modes L and I, the product for I;16), over 2000 size pairs: if a
     Pillow upgrade changes it, this says so before the masks drift.
"""
import os
import struct
import subprocess

import random

import numpy as np
import pytest
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode

from conftest import binary

NEAREST = InterpolationMode.NEAREST

# mask sizes, W x H
SIZES = [(37, 23), (64, 64), (300, 200), (97, 311), (5, 3), (1000, 17), (1, 1), (2, 7)]


def rfpx(arr, channels, value_bytes):
    h, w = arr.shape[:2]
    head = b"RFPX" + bytes([1, channels, 2 if value_bytes == 2 else 0, 0]) + \
        struct.pack("<II", w, h)
    body = arr.astype("<u2" if value_bytes == 2 else np.uint8).tobytes()
    return head + body


def make_case(tmp, w, h, u16, seed, nbox=40):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    hi = 65536 if u16 else 256
    mask = rng.integers(0, hi, (h, w), dtype=np.int64)
    # half integer boxes (their centres fall on crop edges), half fractional;
    # corners from a little outside the image, ordered xyxy; plus the whole
    # image and an empty box
    pts = rng.uniform(-0.1, 1.1, (nbox, 4)) * np.array([w, h, w, h])
    pts[: nbox // 2] = np.round(pts[: nbox // 2])
    boxes = np.stack([np.minimum(pts[:, 0], pts[:, 2]), np.minimum(pts[:, 1], pts[:, 3]),
                      np.maximum(pts[:, 0], pts[:, 2]), np.maximum(pts[:, 1], pts[:, 3])], 1)
    boxes = np.concatenate([boxes, [[0, 0, w, h], [w / 2, h / 2, w / 2, h / 2]]])
    boxes = boxes.astype(np.float32)
    paths = {k: os.path.join(tmp, f"{w}x{h}_{int(u16)}.{k}") for k in ("img", "mask", "boxes")}
    with open(paths["img"], "wb") as f:
        f.write(rfpx(img, 3, 1))
    with open(paths["mask"], "wb") as f:
        f.write(rfpx(mask, 1, 2 if u16 else 1))
    boxes.astype("<f4").tofile(paths["boxes"])
    return mask, boxes, paths


def run(mode, size, seed, count, paths, out, *opts):
    res = subprocess.run([binary("tests/targets_run"), mode, str(size), str(seed), "0",
                          str(count), paths["img"], paths["mask"], paths["boxes"], out,
                          *map(str, opts)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    samples, lines = [], res.stdout.splitlines()
    at = 0
    while at < len(lines):
        f = lines[at].split()
        assert f[0] == "ok", lines[at]
        view = [float(x) for x in lines[at + 1].split()[1:]]
        b = lines[at + 2].split()
        kept = np.array([float(x) for x in b[2:]], dtype=np.float64).reshape(int(b[1]), 4)
        samples.append(([int(x) for x in f[2:7]], view, kept, int(f[7])))
        at += 3
    assert len(samples) == count
    return samples


def pil_mask(mask, u16):
    return Image.fromarray(mask.astype(np.int32), "I") if u16 else \
        Image.fromarray(mask.astype(np.uint8), "L")


def ref_boxes(boxes, box, size, flip):
    x0, y0, x1, y1 = box
    b = boxes.astype(np.float64)
    cx, cy = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
    keep = (cx >= x0) & (cx < x1) & (cy >= y0) & (cy < y1)
    b = b[keep]
    sx, sy = size / (x1 - x0), size / (y1 - y0)
    X0, X1 = (b[:, 0] - x0) * sx, (b[:, 2] - x0) * sx
    Y0, Y1 = (b[:, 1] - y0) * sy, (b[:, 3] - y0) * sy
    if flip:
        X0, X1 = size - X1, size - X0
    return np.clip(np.stack([X0, Y0, X1, Y1], 1), 0, size)


def can_fit(w, h, scale, ratio):
    """Whether any of get_params' attempts could fit a crop in a w x h image
    (a fine grid over the scale and log-ratio ranges)."""
    sc = np.linspace(scale[0], scale[1], 64)[:, None]
    r = np.exp(np.linspace(np.log(ratio[0]), np.log(ratio[1]), 4001))[None, :]
    cw, ch = np.round(np.sqrt(w * h * sc * r)), np.round(np.sqrt(w * h * sc / r))
    return bool(((cw > 0) & (cw <= w) & (ch > 0) & (ch <= h)).any())


def fallback(w, h, ratio):
    in_ratio = w / h
    if in_ratio < min(ratio):
        cw, ch = w, int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        ch, cw = h, int(round(h * max(ratio)))
    else:
        cw, ch = w, h
    cw, ch = max(1, min(cw, w)), max(1, min(ch, h))
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def masks_from(out, count, size, u16):
    dt = np.dtype("<u2") if u16 else np.uint8
    return np.fromfile(out, dtype=dt).reshape(count, size, size)


def check_train(im, boxes, samples, got, size):
    """Each sample's mask is torchvision's resized_crop (+ hflip) of its
    crop, its boxes the reference's."""
    for k, ((i, j, ch, cw, flip), view, kept, _) in enumerate(samples):
        assert view == [j, i, j + cw, i + ch], (k, view)
        want = F.resized_crop(im, i, j, ch, cw, [size, size], NEAREST)
        if flip:
            want = F.hflip(want)
        want = np.asarray(want)
        assert np.array_equal(got[k].astype(np.int64), want.astype(np.int64)), \
            f"sample {k}: crop {i} {j} {ch} {cw} flip {flip}: " \
            f"{int((got[k] != want).sum())} values differ"
        ref = ref_boxes(boxes, view, size, flip)
        assert kept.shape == ref.shape and np.allclose(kept, ref, rtol=0, atol=1e-4), k


# (size, options, the scale and ratio ranges of runs made to fall back:
# where no attempt can fit a crop, the crop is the central fallback)
TRAIN_RUNS = [
    (32, (), None),
    (7, ("--scale", "0.01,0.3"), None),
    (224, ("--flip", "1"), None),
    (33, ("--scale", "1,1", "--flip", "0"), ((1, 1), (3 / 4, 4 / 3))),
    (16, ("--scale", "0.9,1", "--ratio", "2.5,3"), ((0.9, 1), (2.5, 3))),
    (16, ("--scale", "0.9,1", "--ratio", "0.2,0.25"), ((0.9, 1), (0.2, 0.25))),
]


@pytest.mark.parametrize("u16", [False, True], ids=["u8", "u16"])
@pytest.mark.parametrize("wh", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_train(tmp_path, wh, u16):
    w, h = wh
    mask, boxes, paths = make_case(str(tmp_path), w, h, u16, seed=w * 1000 + h)
    im = pil_mask(mask, u16)
    flips = kept_total = dropped_total = fell_back = 0
    for r, (size, opts, fb) in enumerate(TRAIN_RUNS):
        count = 40
        fb_ratio = fb[1] if fb and not can_fit(w, h, *fb) else None
        out = str(tmp_path / f"train{r}.out")
        samples = run("train", size, 1000 + r, count, paths, out, *opts)
        check_train(im, boxes, samples, masks_from(out, count, size, u16), size)
        for (i, j, ch, cw, flip), _, kept, _ in samples:
            if fb_ratio is not None:
                assert (i, j, ch, cw) == fallback(w, h, fb_ratio), (r, i, j, ch, cw)
                fell_back += 1
            flips += flip
            kept_total += len(kept)
            dropped_total += len(boxes) - len(kept)
    # the runs saw both flips, kept and dropped boxes, and the fallback
    assert 0 < flips < count * len(TRAIN_RUNS)
    assert kept_total > 0 and dropped_total > 0
    assert fell_back >= count


@pytest.mark.parametrize("u16", [False, True], ids=["u8", "u16"])
@pytest.mark.parametrize("wh", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_eval(tmp_path, wh, u16):
    w, h = wh
    mask, boxes, paths = make_case(str(tmp_path), w, h, u16, seed=w * 1000 + h + 1)
    im = pil_mask(mask, u16)
    for r, (size, crop) in enumerate([(224, 0.875), (32, 0.875), (17, 0.6), (8, 1.0)]):
        out = str(tmp_path / f"eval{r}.out")
        [((rw, rh, top, left, flip), view, kept, _)] = run("eval", size, 5, 1, paths, out,
                                                         "--crop", crop)
        resized = F.resize(im, [int(size / crop)], NEAREST)
        assert (rw, rh) == resized.size and flip == 0
        assert (top, left) == (int(round((rh - size) / 2.0)), int(round((rw - size) / 2.0)))
        want = np.asarray(F.center_crop(resized, [size, size]))
        got = masks_from(out, 1, size, u16)[0]
        assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), \
            f"size {size} crop {crop}: {int((got != want).sum())} values differ"
        box = (left * (w / rw), top * (h / rh), (left + size) * (w / rw),
               (top + size) * (h / rh))
        assert np.allclose(view, box, rtol=1e-12, atol=0), (view, box)
        ref = ref_boxes(boxes, box, size, False)
        assert kept.shape == ref.shape, (kept.shape, ref.shape)
        assert np.allclose(kept, ref, rtol=0, atol=1e-4), np.abs(kept - ref).max()


def test_mask_of_another_size_is_bad(tmp_path):
    _, _, paths = make_case(str(tmp_path), 30, 20, False, seed=3)
    mask = np.zeros((20, 31), np.uint8)
    with open(paths["mask"], "wb") as f:
        f.write(rfpx(mask, 1, 1))
    res = subprocess.run([binary("tests/targets_run"), "train", "16", "1", "0", "2",
                          paths["img"], paths["mask"], paths["boxes"],
                          str(tmp_path / "bad.out")], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and all(
        ln.startswith("bad ") and " shape " in ln and "20x31" in ln and "20x30" in ln
        for ln in lines), lines


def test_random_sizes(tmp_path):
    rnd = random.Random(23)
    for n in range(40):
        w, h = rnd.randint(1, 700), rnd.randint(1, 700)
        u16 = n % 2 == 1
        mask, boxes, paths = make_case(str(tmp_path), w, h, u16, seed=n)
        im = pil_mask(mask, u16)
        size = rnd.choice([1, 3, 16, 31, 64, 100, 224, 257])
        out = str(tmp_path / "train.out")
        count = 12
        samples = run("train", size, n, count, paths, out, "--scale",
                      f"{rnd.uniform(0.01, 0.5)},{rnd.uniform(0.5, 1)}")
        check_train(im, boxes, samples, masks_from(out, count, size, u16), size)
        crop = rnd.uniform(0.3, 1)
        out = str(tmp_path / "eval.out")
        [((rw, rh, top, left, _), view, kept, _)] = run("eval", size, 0, 1, paths, out,
                                                      "--crop", repr(crop))
        resized = F.resize(im, [int(size / crop)], NEAREST)
        assert (rw, rh) == resized.size, (w, h, size, crop)
        want = np.asarray(F.center_crop(resized, [size, size]))
        got = masks_from(out, 1, size, u16)[0]
        assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), \
            f"{w}x{h} eval size {size} crop {crop}: {int((got != want).sum())} values differ"
        box = (left * (w / rw), top * (h / rh), (left + size) * (w / rw),
               (top + size) * (h / rh))
        ref = ref_boxes(boxes, box, size, False)
        assert kept.shape == ref.shape and np.allclose(kept, ref, rtol=0, atol=1e-4)


def test_jpeg_image_same_view(tmp_path):
    """A JPEG image decodes at a reduced DCT scale for small crops; the
    view, and so the mask and the boxes, stay in its full-scale pixels: the
    same lines and mask bytes as for the RFPX record of that size."""
    w, h = 600, 410
    mask, boxes, paths = make_case(str(tmp_path), w, h, False, seed=9)
    jpg = str(tmp_path / "img.jpg")
    rgb = np.random.default_rng(2).integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(jpg, quality=90)
    for mode, opts in (("train", ("--scale", "0.5,1")), ("eval", ("--crop", "0.875"))):
        outs = []
        for image in (paths["img"], jpg):
            out = str(tmp_path / f"{mode}{len(outs)}.out")
            samples = run(mode, 32, 4, 20 if mode == "train" else 1,
                          dict(paths, img=image), out, *opts)
            outs.append((samples, open(out, "rb").read()))
        assert len(outs[0][0]) == len(outs[1][0])
        for a, b in zip(outs[0][0], outs[1][0]):
            assert a[0] == b[0] and a[1] == b[1] and np.array_equal(a[2], b[2])
            assert a[3] == 8
        assert outs[0][1] == outs[1][1]
        # the JPEG was decoded at a reduced scale: the view did not follow it
        assert min(b[3] for b in outs[1][0]) < 8


def walk(c, r):
    a, t, cols = c / r, (c / r) * 0.5, []
    for _ in range(r):
        cols.append(int(t))
        t += a
    return cols


def product(c, r):
    a = c / r
    return [int(a * (k + 0.5)) for k in range(r)]


def test_pillow_nearest_rule():
    rnd = random.Random(4)
    differ = 0
    for _ in range(2000):
        c, r = rnd.randint(1, 2000), rnd.randint(1, 600)
        cols = np.arange(c)
        for mode, arr, rule in (("L", (cols % 251).astype(np.uint8), walk),
                                ("I", cols.astype(np.int32), walk),
                                ("I;16", cols.astype(np.uint16), product)):
            im = Image.fromarray(arr[None, :], mode)
            got = np.asarray(im.resize((r, 1), Image.NEAREST))[0].astype(np.int64)
            want = np.array(rule(c, r), dtype=np.int64)
            if mode == "L":
                want = want % 251
            assert np.array_equal(got, want), (mode, c, r)
        differ += walk(c, r) != product(c, r)
    # the two rules do differ, often enough that a mismatch would show
    assert differ > 200, differ
