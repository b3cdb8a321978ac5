"""test_aug_targets.py - boxes and masks follow the geometric augmentations
(daemon/worker/aug_run.h's trace): a fields dataset written with
ringfeed.Writer (an image, its mask, its boxes and a rows= field of each
box's own number), served by a real ringfeedd with transform none and
augment=, each sample checked against torchvision and numpy:

  1. RandomAffine, RandomRotation (degenerate ranges), the flips (p=1) and
     RandomCrop with padding (constant and reflect; the crop's corner found
     from the delivered image): the image is torchvision's op on the
     source, the mask is the same op on the mask tensor with NEAREST and
     fill 0 (F.affine, F.rotate, F.hflip / F.vflip, F.pad + F.crop), the
     boxes are the source boxes mapped through torchvision's forward affine
     matrix in numpy (corners enclosed, a box whose mapped centre leaves
     the image dropped, the rest clipped), the rows= numbers are those of
     the boxes kept, loader.last.dropped counts the others, and STATS
     boxes_dropped too;
  2. RandAugment (one op a sample, a fixed magnitude): the mask is either
     untouched (a photometric op) or exactly torchvision's _apply_op of one
     of the geometric ops the policy can draw on it, and the boxes are that
     op's mapped boxes;
  3. photometric ops and RandomErasing leave masks and boxes alone;
  4. the same batches from one worker and from three.
"""
import math

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import _apply_op
from torchvision.transforms.functional import _get_inverse_affine_matrix

import ringfeed
from ringfeed import transforms as RT

W, H = 48, 40
N = 32
NEAREST = InterpolationMode.NEAREST


def f32(v):
    """A parameter as the daemon's float32 draw holds it."""
    return float(np.float32(v))


def source_samples(seed=11):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(N):
        nb = int(rng.integers(0, 10))
        x0, y0 = rng.uniform(-2, W - 2, nb), rng.uniform(-2, H - 2, nb)
        boxes = np.stack([x0, y0, np.minimum(W + 1, x0 + rng.uniform(0.5, W / 2, nb)),
                          np.minimum(H + 1, y0 + rng.uniform(0.5, H / 2, nb))], 1)
        out.append({"image": rng.integers(0, 256, (H, W, 3), dtype=np.uint8),
                    # no zeros: the fill shows where the op uncovered the mask
                    "mask": rng.integers(1, 256, (H, W), dtype=np.uint8),
                    "boxes": boxes.astype(np.float32).reshape(-1, 4),
                    "which": np.arange(nb, dtype=np.int64)})
    return out


FIELDS = {"image": lambda: ringfeed.Image(mode="raw"),
          "mask": lambda: ringfeed.Image(mask="image"),
          "boxes": lambda: ringfeed.Ragged("float32", (4,), boxes="image"),
          "which": lambda: ringfeed.Ragged("int64", rows="boxes")}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("augtgt")
    samples = source_samples()
    path = str(root / "tgt")
    with ringfeed.Writer(path, {k: f() for k, f in FIELDS.items()}) as w:
        for s in samples:
            w.write(s)
    return path, samples


def read_all(d, augment, **kw):
    """{index: (image CHW, mask HxW, boxes, which)} over one epoch, and the
    boxes dropped as loader.last.dropped counted them."""
    loader = ringfeed.Loader("tgt", batch_size=8, transform="none", shuffle=False, seed=5,
                             socket=d.sock, augment=augment, **kw)
    got, dropped = {}, 0
    for b in loader:
        idx = [int(i) for i in loader.last.indices]
        boxes, which = b["boxes"].split(), b["which"].split()
        for j, i in enumerate(idx):
            got[i] = (np.asarray(b["image"][j]).copy(),
                      np.asarray(b["mask"][j]).reshape(H, W).copy(),
                      np.asarray(boxes[j]).reshape(-1, 4).copy(),
                      np.asarray(which[j]).copy())
        dropped += loader.last.dropped
        del b
    loader.close()
    assert sorted(got) == list(range(N))
    return got, dropped


def forward(center, angle, translate, scale, shear):
    """torchvision's forward affine matrix (x' = m0 x + m1 y + m2, ...) in
    the image's pixels, the image spanning [0, W] x [0, H]."""
    return np.array(_get_inverse_affine_matrix(center, angle, translate, scale, shear,
                                               inverted=False)).reshape(2, 3)


def map_boxes(m, boxes, out_w=W, out_h=H):
    """The boxes through the 2x3 map m: (kept boxes, keep mask)."""
    b = boxes.astype(np.float64)
    xs, ys = b[:, [0, 2, 0, 2]], b[:, [1, 1, 3, 3]]
    u = m[0, 0] * xs + m[0, 1] * ys + m[0, 2]
    v = m[1, 0] * xs + m[1, 1] * ys + m[1, 2]
    cx, cy = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
    ccx, ccy = m[0, 0] * cx + m[0, 1] * cy + m[0, 2], m[1, 0] * cx + m[1, 1] * cy + m[1, 2]
    keep = (ccx >= 0) & (ccx < out_w) & (ccy >= 0) & (ccy < out_h)
    out = np.stack([np.clip(u.min(1), 0, out_w), np.clip(v.min(1), 0, out_h),
                    np.clip(u.max(1), 0, out_w), np.clip(v.max(1), 0, out_h)], 1)
    return out[keep].reshape(-1, 4), keep


IDENT = np.array([[1.0, 0, 0], [0, 1.0, 0]])


def check_targets(s, got, m, want_mask, what):
    """The sample's mask and boxes against the reference: transform none's
    own pass (the boxes clipped to the image, those centred outside it
    dropped: targets.h), then the map m.  Returns the boxes dropped."""
    _, mask, boxes, which = got
    assert np.array_equal(mask, want_mask), (what, np.argwhere(mask != want_mask)[:5])
    placed, keep0 = map_boxes(IDENT, s["boxes"])
    want, keep = map_boxes(m, placed)
    assert boxes.shape == want.shape, (what, boxes, want)
    assert np.allclose(boxes, want, atol=1e-3), (what, boxes, want)
    assert which.tolist() == np.flatnonzero(keep0)[keep].tolist(), what
    return len(s["boxes"]) - len(want)


def chw(a):
    return torch.from_numpy(a).permute(2, 0, 1).contiguous()


def mask_t(a):
    return torch.from_numpy(a)[None]


def stats_dropped(d):
    return max([int(v) for k, v in d.stats().items() if k.endswith("boxes_dropped")] or [0])


# (augment, torchvision's image op, its mask op, its forward map)
AFFINE = dict(degrees=(25, 25), scale=(1.1, 1.1), shear=(8, 8, -5, -5))


def affine_case(img, interp):
    return F.affine(img, angle=25.0, translate=[0, 0], scale=f32(1.1),
                    shear=[8.0, -5.0], interpolation=interp, fill=[0.0] * img.shape[0])


CASES = {
    "affine": ([RT.RandomAffine(**AFFINE)],
               lambda im: affine_case(im, NEAREST),
               lambda mk: affine_case(mk, NEAREST),
               forward([W / 2, H / 2], 25.0, [0, 0], f32(1.1), [8.0, -5.0])),
    "rotation": ([RT.RandomRotation((30, 30))],
                 lambda im: F.rotate(im, 30.0, NEAREST, fill=[0.0] * im.shape[0]),
                 lambda mk: F.rotate(mk, 30.0, NEAREST, fill=[0.0]),
                 forward([W / 2, H / 2], -30.0, [0, 0], 1.0, [0.0, 0.0])),
    "flips": ([RT.RandomVerticalFlip(p=1), RT.RandomHorizontalFlip(p=1)],
              lambda im: F.hflip(F.vflip(im)), lambda mk: F.hflip(F.vflip(mk)),
              np.array([[-1.0, 0, W], [0, -1.0, H]])),
    "flip_then_affine": ([RT.RandomHorizontalFlip(p=1), RT.RandomAffine(**AFFINE)],
                         lambda im: affine_case(F.hflip(im), NEAREST),
                         lambda mk: affine_case(F.hflip(mk), NEAREST),
                         forward([W / 2, H / 2], 25.0, [0, 0], f32(1.1), [8.0, -5.0]) @
                         np.array([[-1.0, 0, W], [0, 1.0, 0], [0, 0, 1.0]])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_geometric_ops_move_masks_and_boxes(data, daemon_factory, case):
    path, samples = data
    augment, img_op, mask_op, m = CASES[case]
    d = daemon_factory({"tgt": path}, workers=2)
    got, dropped = read_all(d, augment)
    want_dropped = 0
    for i, s in enumerate(samples):
        img = got[i][0]
        assert np.array_equal(img, img_op(chw(s["image"])).numpy()), (case, i)
        want_dropped += check_targets(s, got[i], m, mask_op(mask_t(s["mask"]))[0].numpy(),
                                      (case, i))
    assert dropped == want_dropped
    if case != "flips":
        assert dropped > 0, "no box dropped: the test shows nothing"
        assert stats_dropped(d) >= dropped


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_random_crop_with_padding(data, daemon_factory, mode):
    path, samples = data
    d = daemon_factory({"tgt": path}, workers=2)
    got, dropped = read_all(d, [RT.RandomCrop((H, W), padding=(3, 5), padding_mode=mode)])
    want_dropped, offsets = 0, set()
    for i, s in enumerate(samples):
        padded = F.pad(chw(s["image"]), [3, 5], padding_mode=mode)
        pm = F.pad(mask_t(s["mask"]), [3, 5], padding_mode=mode)
        # the crop's corner: the one placement of the delivered image
        at = [(t, l) for t in range(2 * 5 + 1) for l in range(2 * 3 + 1)
              if np.array_equal(F.crop(padded, t, l, H, W).numpy(), got[i][0])]
        assert len(at) == 1, (i, at)
        t, l = at[0]
        offsets.add(at[0])
        m = np.array([[1.0, 0, 3 - l], [0, 1.0, 5 - t]])
        want_dropped += check_targets(s, got[i], m, F.crop(pm, t, l, H, W)[0].numpy(), i)
    assert len(offsets) > 3, offsets
    assert dropped == want_dropped


def policy_candidates(mask, magnitude, bins):
    """(mask, forward map) of each geometric op RandAugment can draw at
    this magnitude, both signs, as torchvision's _apply_op applies it."""
    space = T.RandAugment()._augmentation_space(bins, (H, W))
    out = []
    for name in ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"):
        mag = float(space[name][0][magnitude].item())
        for sign in (1, -1):
            v = sign * mag
            mk = _apply_op(mask, name, v, interpolation=NEAREST, fill=[0.0])[0].numpy()
            if name == "ShearX":
                m = forward([0, 0], 0.0, [0, 0], 1.0, [math.degrees(math.atan(v)), 0.0])
            elif name == "ShearY":
                m = forward([0, 0], 0.0, [0, 0], 1.0, [0.0, math.degrees(math.atan(v))])
            elif name == "TranslateX":
                m = forward([W / 2, H / 2], 0.0, [int(v), 0], 1.0, [0.0, 0.0])
            elif name == "TranslateY":
                m = forward([W / 2, H / 2], 0.0, [0, int(v)], 1.0, [0.0, 0.0])
            else:
                m = forward([W / 2, H / 2], -v, [0, 0], 1.0, [0.0, 0.0])
            out.append((f"{name}{v:+g}", mk, m))
    return out


def test_policy_geometric_ops_move_targets(data, daemon_factory):
    path, samples = data
    d = daemon_factory({"tgt": path}, workers=2)
    magnitude, bins = 15, 31
    got, dropped = read_all(d, [RT.RandAugment(num_ops=1, magnitude=magnitude,
                                              num_magnitude_bins=bins)])
    moved = still = want_dropped = 0
    for i, s in enumerate(samples):
        mask = got[i][1]
        hits = [c for c in policy_candidates(mask_t(s["mask"]), magnitude, bins)
                if np.array_equal(c[1], mask)]
        if np.array_equal(mask, s["mask"]):
            still += 1
            want_dropped += check_targets(s, got[i], IDENT, s["mask"], (i, "photometric"))
            continue
        assert hits, f"sample {i}: the mask is no geometric op's of the policy's"
        moved += 1
        want_dropped += check_targets(s, got[i], hits[0][2], hits[0][1], (i, hits[0][0]))
    assert moved >= 3 and still >= 3, (moved, still)
    assert dropped == want_dropped


def test_photometric_ops_leave_targets(data, daemon_factory):
    path, samples = data
    d = daemon_factory({"tgt": path}, workers=1)
    got, dropped = read_all(d, [RT.RandomInvert(p=1.0), RT.ColorJitter(0.4, 0.4),
                                RT.RandomErasing(p=1.0)])
    assert dropped == 0
    want_dropped = 0
    for i, s in enumerate(samples):
        want_dropped += check_targets(s, got[i], IDENT, s["mask"], i)
    assert dropped == want_dropped


def test_same_batches_for_any_worker_count(data, daemon_factory):
    path, _ = data
    ops = [RT.RandomHorizontalFlip(0.5), RT.RandomAffine(degrees=20, translate=(0.1, 0.1),
                                                       scale=(0.8, 1.2), shear=10),
           RT.RandomCrop((H, W), padding=4), RT.TrivialAugmentWide()]
    one, d1 = read_all(daemon_factory({"tgt": path}, workers=1), ops)
    three, d3 = read_all(daemon_factory({"tgt": path}, workers=3), ops)
    assert d1 == d3
    for i in range(N):
        for a, b in zip(one[i], three[i]):
            assert np.array_equal(a, b), i
