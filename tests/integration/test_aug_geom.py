"""The geometric augmentation ops (daemon/worker/aug_geom.h) against
torchvision 0.14 on uint8 tensors, through tests/aug_geom_run.c.

Pixels: F.affine / F.rotate (the fill list RandomAffine and RandomRotation
pass), F.hflip / F.vflip and F.pad + F.crop, over random parameters and
sizes (odd ones too), 1 and 3 channels, CHW and HWC.  Bounds:
  - flips, pad + crop: exact;
  - nearest affine / rotation: at most NEAREST_MAX_FRAC of the pixels may
    differ (a sampling position within float rounding of a pixel
    boundary); the float32 grid is reproduced operation for operation, so
    none differ in practice;
  - bilinear: mean absolute difference at most BILINEAR_MAD, every pixel
    within 1 (a float32 sum within rounding of a .5).
Draws: 10,000 per op from fixed seeds against torchvision's own draws
(two-sample KS for continuous values, chi-square for counts), so the
verdict is fixed: it cannot flake.
Boxes: the forward maps against torchvision's own non-inverted matrix,
the keep / clip rule, and the pixels: a box's mask goes through the same
op and stays inside the mapped box.
"""
import math
import os
import subprocess
import tempfile

import numpy as np
import pytest
import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F
from torchvision import transforms as T

RUNNER = os.path.join(os.environ.get('RINGFEED_BUILD_DIR', 'build'), 'tests', 'aug_geom_run')
NEAREST_MAX_FRAC = 1e-4
BILINEAR_MAD = 0.01
DRAWS = 10000
P_MIN = 1e-3   # the draws' tests: fixed seeds, so a fixed verdict


def f32(v):
    return float(np.float32(v))


def run_jobs(jobs, repeat=None):
    """jobs: (line, input bytes); returns the output bytes and stdout."""
    with tempfile.TemporaryDirectory() as d:
        jp, ip, op = (os.path.join(d, n) for n in ('jobs', 'in', 'out'))
        with open(jp, 'w') as f:
            f.write(''.join(line + '\n' for line, _ in jobs))
        with open(ip, 'wb') as f:
            for _, data in jobs:
                f.write(data)
        cmd = [RUNNER, 'apply', jp, ip, op] + (['--repeat', str(repeat)] if repeat else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        with open(op, 'rb') as f:
            return f.read(), r.stdout


def to_bytes(chw, layout):
    return (chw if layout == 'chw' else chw.transpose(1, 2, 0)).tobytes()


def from_bytes(buf, c, h, w, layout):
    a = np.frombuffer(buf, np.uint8)
    return a.reshape(c, h, w) if layout == 'chw' else a.reshape(h, w, c).transpose(2, 0, 1)


def fill_arg(fill):
    return '-' if fill is None else ','.join(str(v) for v in fill)


def random_cases(seed, n, interp):
    rng = np.random.default_rng(seed)
    for k in range(n):
        w, h = (int(v) for v in rng.integers(1, 90, 2))
        c = int(rng.choice([1, 3]))
        layout = ['chw', 'hwc'][k % 2]
        img = rng.integers(0, 256, (c, h, w), dtype=np.uint8)
        a = dict(angle=f32(rng.uniform(-180, 180)), tx=int(rng.integers(-w // 3 - 1, w // 3 + 2)),
                 ty=int(rng.integers(-h // 3 - 1, h // 3 + 2)), scale=f32(rng.uniform(0.6, 1.6)),
                 shx=f32(rng.uniform(-40, 40)), shy=f32(rng.uniform(-40, 40)))
        if k % 5 == 0:   # exact right angles and plain rotations land on pixel boundaries
            a.update(angle=float(rng.choice([0, 90, -90, 180, 45])), shx=0.0, shy=0.0, scale=1.0)
        fill = None if k % 3 == 0 else [int(v) for v in rng.integers(0, 256, c)]
        yield w, h, c, layout, img, a, fill


def translation_cases(seed, n):
    """Whole-pixel translations alone (aug_affine's shift), some past the
    image."""
    for w, h, c, layout, img, a, fill in random_cases(seed, n, None):
        a.update(angle=0.0, scale=1.0, shx=0.0, shy=0.0)
        if len(img) and w % 7 == 0:
            a.update(tx=int(w + 3) * (1 if h % 2 else -1))
        yield w, h, c, layout, img, a, fill


def compare_affine(interp, rotate, cases=None):
    mode = InterpolationMode.NEAREST if interp == 'nearest' else InterpolationMode.BILINEAR
    cases = list(cases or random_cases(7 if rotate else 3, 160, interp))
    jobs = []
    for w, h, c, layout, img, a, fill in cases:
        if rotate:
            line = f"rotate {w} {h} {c} {layout} {interp} {fill_arg(fill)} {a['angle']!r}"
        else:
            line = (f"affine {w} {h} {c} {layout} {interp} {fill_arg(fill)} {a['angle']!r} "
                    f"{a['tx']} {a['ty']} {a['scale']!r} {a['shx']!r} {a['shy']!r}")
        jobs.append((line, to_bytes(img, layout)))
    out, _ = run_jobs(jobs)
    at = 0
    diff_px = total_px = 0
    abs_sum = 0.0
    worst = 0
    for w, h, c, layout, img, a, fill in cases:
        got = from_bytes(out[at:at + w * h * c], c, h, w, layout)
        at += w * h * c
        tfill = [float(v) for v in (fill or [0] * c)]   # as the transforms pass it
        t = torch.from_numpy(img)
        if rotate:
            ref = F.rotate(t, a['angle'], mode, expand=False, fill=tfill).numpy()
        else:
            ref = F.affine(t, a['angle'], [a['tx'], a['ty']], a['scale'], [a['shx'], a['shy']],
                           mode, fill=tfill).numpy()
        d = np.abs(got.astype(int) - ref.astype(int))
        diff_px += int((d.max(axis=0) > 0).sum())
        total_px += w * h
        abs_sum += float(d.sum())
        worst = max(worst, int(d.max()))
    assert at == len(out)
    return diff_px, total_px, abs_sum / (total_px * 1.0), worst


@pytest.mark.parametrize('interp', ['nearest', 'bilinear'])
def test_translations_are_exact_shifts(interp):
    diff_px, total_px, _, worst = compare_affine(interp, False, translation_cases(11, 120))
    assert diff_px == 0, (diff_px, total_px, worst)


@pytest.mark.parametrize('rotate', [False, True], ids=['affine', 'rotate'])
def test_nearest_matches_torchvision(rotate):
    diff_px, total_px, _, _ = compare_affine('nearest', rotate)
    print(f'nearest {"rotate" if rotate else "affine"}: {diff_px} of {total_px} pixels differ')
    assert diff_px <= NEAREST_MAX_FRAC * total_px


@pytest.mark.parametrize('rotate', [False, True], ids=['affine', 'rotate'])
def test_bilinear_matches_torchvision(rotate):
    diff_px, total_px, mad, worst = compare_affine('bilinear', rotate)
    print(f'bilinear {"rotate" if rotate else "affine"}: {diff_px} of {total_px} pixels differ, '
          f'mad {mad:.6f}, worst {worst}')
    assert mad <= BILINEAR_MAD
    assert worst <= 1


def test_flips_exact():
    rng = np.random.default_rng(11)
    cases, jobs = [], []
    for k in range(60):
        w, h = (int(v) for v in rng.integers(1, 70, 2))
        c = int(rng.choice([1, 2, 3, 4]))
        layout = ['chw', 'hwc'][k % 2]
        op = ['hflip', 'vflip'][(k // 2) % 2]
        img = rng.integers(0, 256, (c, h, w), dtype=np.uint8)
        cases.append((op, w, h, c, layout, img))
        jobs.append((f'{op} {w} {h} {c} {layout}', to_bytes(img, layout)))
    out, _ = run_jobs(jobs)
    at = 0
    for op, w, h, c, layout, img in cases:
        got = from_bytes(out[at:at + w * h * c], c, h, w, layout)
        at += w * h * c
        ref = (F.hflip if op == 'hflip' else F.vflip)(torch.from_numpy(img)).numpy()
        assert np.array_equal(got, ref), (op, w, h, c, layout)


def torch_pad_crop(img, p, mode, fill, crop_w, crop_h):
    """RandomCrop.forward with drawn parameters: F.pad, pad_if_needed's two
    pads, F.crop; numpy.pad where torchvision refuses a wide reflection."""
    t = torch.from_numpy(img)

    def pad(t, ltrb):
        if mode in ('reflect', 'symmetric') and not _tv_can(t, ltrb, mode):
            a = np.pad(t.numpy(), ((0, 0), (ltrb[1], ltrb[3]), (ltrb[0], ltrb[2])),
                       mode=mode)
            return torch.from_numpy(np.ascontiguousarray(a))
        return F.pad(t, list(ltrb), fill=fill, padding_mode=mode)

    t = pad(t, (p[0], p[1], p[2], p[3]))
    if p[4]:
        t = pad(t, (p[4], 0, p[4], 0))
    if p[5]:
        t = pad(t, (0, p[5], 0, p[5]))
    return F.crop(t, p[6], p[7], crop_h, crop_w).numpy()


def _tv_can(t, ltrb, mode):
    h, w = t.shape[-2:]
    lim_w, lim_h = (w - 1, h - 1) if mode == 'reflect' else (w, h)
    return max(ltrb[0], ltrb[2]) <= lim_w and max(ltrb[1], ltrb[3]) <= lim_h


@pytest.mark.parametrize('mode', ['constant', 'edge', 'reflect', 'symmetric'])
def test_pad_crop_exact(mode):
    rng = np.random.default_rng(['constant', 'edge', 'reflect', 'symmetric'].index(mode))
    cases, jobs = [], []
    for k in range(80):
        w, h = (int(v) for v in rng.integers(1, 50, 2))
        c = int(rng.choice([1, 3]))
        layout = ['chw', 'hwc'][k % 2]
        img = rng.integers(0, 256, (c, h, w), dtype=np.uint8)
        pad = [int(v) for v in rng.integers(0, 2 * max(w, h) if k % 4 == 0 else 6, 4)]
        cw, ch = (int(v) for v in rng.integers(1, 60, 2))
        if k % 3 == 0:   # CIFAR's recipe: a crop of the image's own size
            cw, ch = w, h
        seed = int(rng.integers(0, 2**31))
        r = subprocess.run([RUNNER, 'draw', str(seed), '1', 'padcrop', str(w), str(h), str(cw),
                            str(ch), ','.join(map(str, pad)), '1'],
                           capture_output=True, text=True, check=True)
        p = [int(v) for v in r.stdout.split()]
        fill = int(rng.integers(0, 256))
        cases.append((w, h, c, layout, img, p, cw, ch, fill))
        jobs.append((f"padcrop {w} {h} {c} {layout} {mode} {','.join([str(fill)] * c)} "
                     + ' '.join(map(str, p)) + f' {cw} {ch}', to_bytes(img, layout)))
    out, _ = run_jobs(jobs)
    at = 0
    for w, h, c, layout, img, p, cw, ch, fill in cases:
        got = from_bytes(out[at:at + cw * ch * c], c, ch, cw, layout)
        at += cw * ch * c
        ref = torch_pad_crop(img, p, mode, fill, cw, ch)
        assert np.array_equal(got, ref), (w, h, c, layout, p, cw, ch)
    assert at == len(out)


def test_pad_crop_refuses_a_crop_past_the_padding():
    r = subprocess.run([RUNNER, 'draw', '1', '1', 'padcrop', '10', '10', '20', '5', '2,2,2,2',
                        '0'], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == 'refused'
    with pytest.raises(ValueError, match='larger than input image size'):
        T.RandomCrop((5, 20), padding=2)(torch.zeros(1, 10, 10, dtype=torch.uint8))


# ---- masks: the same ops on one channel (u8) or two bytes (u16) ----

def test_masks_follow_nearest_affine_and_pad_crop():
    rng = np.random.default_rng(5)
    cases, jobs = [], []
    for k in range(40):
        w, h = (int(v) for v in rng.integers(2, 60, 2))
        u16 = k % 2 == 1
        m = rng.integers(0, 65536 if u16 else 256, (h, w)).astype(np.uint16 if u16 else np.uint8)
        raw = m.astype('<u2').tobytes() if u16 else m.tobytes()
        c = 2 if u16 else 1
        a = dict(angle=f32(rng.uniform(-90, 90)), tx=int(rng.integers(-5, 6)),
                 ty=int(rng.integers(-5, 6)), scale=f32(rng.uniform(0.7, 1.4)),
                 shx=f32(rng.uniform(-20, 20)), shy=0.0)
        cases.append((w, h, u16, m, a))
        jobs.append((f"affine {w} {h} {c} hwc nearest - {a['angle']!r} {a['tx']} {a['ty']} "
                     f"{a['scale']!r} {a['shx']!r} {a['shy']!r}", raw))
    out, _ = run_jobs(jobs)
    at = 0
    for w, h, u16, m, a in cases:
        n = w * h * (2 if u16 else 1)
        got = np.frombuffer(out[at:at + n], '<u2' if u16 else np.uint8).reshape(h, w)
        at += n
        t = torch.from_numpy(m.astype(np.float32))[None]   # exact for u16 values
        ref = F.affine(t, a['angle'], [a['tx'], a['ty']], a['scale'], [a['shx'], a['shy']],
                       InterpolationMode.NEAREST, fill=[0.0])[0].numpy()
        assert (got.astype(np.float32) != ref).sum() <= NEAREST_MAX_FRAC * w * h + 0.5


# ---- draws ----

def draws(*args):
    r = subprocess.run([RUNNER, 'draw', str(args[0]), str(DRAWS)] + [str(a) for a in args[1:]],
                       capture_output=True, text=True, check=True)
    return np.array([[float(v) for v in line.split()] for line in r.stdout.splitlines()])


def ks_pvalue(d, n_eff):
    """Kolmogorov's asymptotic p-value of a KS distance d (n_eff samples)."""
    lam = (math.sqrt(n_eff) + 0.12 + 0.11 / math.sqrt(n_eff)) * d
    return min(1.0, max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam)
                                     for k in range(1, 101))))


def ks_ok(a, b):
    """Two-sample KS test."""
    a, b = np.sort(a), np.sort(b)
    x = np.concatenate([a, b])
    d = np.abs(np.searchsorted(a, x, 'right') / len(a) - np.searchsorted(b, x, 'right') / len(b))
    return ks_pvalue(d.max(), len(a) * len(b) / (len(a) + len(b))) > P_MIN


def ks_uniform_ok(a, lo, hi):
    a = np.sort(a)
    cdf = (a - lo) / (hi - lo)
    n = len(a)
    d = max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max())
    return ks_pvalue(d, n) > P_MIN


def chi2_ok(a, b):
    """Chi-square test that two samples of integers share their distribution."""
    vals = np.union1d(np.unique(a), np.unique(b))
    table = np.array([[(a == v).sum() for v in vals], [(b == v).sum() for v in vals]], float)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    stat = ((table - expected) ** 2 / expected).sum()
    dof = len(vals) - 1
    if dof == 0:
        return True
    p = torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                torch.tensor(stat / 2, dtype=torch.float64)).item()
    return p > P_MIN


def test_affine_draws_follow_get_params():
    torch.manual_seed(1234)
    w, h = 57, 31
    deg, tr, sc, sh = (-25.0, 40.0), (0.2, 0.3), (0.75, 1.25), (-10.0, 15.0, 3.0, 8.0)
    ref = np.array([[p[0], p[1][0], p[1][1], p[2], p[3][0], p[3][1]] for p in
                    (T.RandomAffine.get_params(list(deg), list(tr), list(sc), list(sh), [w, h])
                     for _ in range(DRAWS))])
    got = draws(99, 'affine', w, h, deg[0], deg[1], '0.2,0.3', '0.75,1.25', '-10,15,3,8')
    for col in (0, 3, 4, 5):
        assert ks_ok(got[:, col], ref[:, col]), col
    for col in (1, 2):   # rounded translations: counts of each integer
        assert chi2_ok(got[:, col], ref[:, col]), col
        assert np.all(got[:, col] == np.round(got[:, col]))
    assert got[:, 1].min() >= -round(0.2 * w) and got[:, 1].max() <= round(0.2 * w)
    assert got[:, 0].min() >= -25 and got[:, 0].max() <= 40
    # no translate / scale / shear: nothing drawn for them
    plain = draws(99, 'affine', w, h, -5, 5, '-', '-', '-')
    assert np.all(plain[:, 1:3] == 0) and np.all(plain[:, 3] == 1) and np.all(plain[:, 4:] == 0)
    assert ks_uniform_ok(plain[:, 0], -5, 5)


def test_rotation_and_flip_draws():
    torch.manual_seed(4321)
    ref = np.array([T.RandomRotation.get_params([-30.0, 30.0]) for _ in range(DRAWS)])
    got = draws(5, 'rotate', -30, 30)[:, 0]
    assert ks_ok(got, ref)
    flips = draws(6, 'flip', 0.3)[:, 0]
    tref = np.array([float(torch.rand(1) < 0.3) for _ in range(DRAWS)])
    assert chi2_ok(flips, tref)
    assert np.all(draws(6, 'flip', 0)[:, 0] == 0) and np.all(draws(6, 'flip', 1)[:, 0] == 1)


def test_crop_draws_follow_get_params():
    torch.manual_seed(77)
    img = torch.zeros(3, 32, 32, dtype=torch.uint8)
    padded = F.pad(img, [4, 4, 4, 4])
    ref = np.array([T.RandomCrop.get_params(padded, (32, 32))[:2] for _ in range(DRAWS)])
    got = draws(8, 'padcrop', 32, 32, 32, 32, '4,4,4,4', 0)
    assert np.all(got[:, :6] == [4, 4, 4, 4, 0, 0])
    assert chi2_ok(got[:, 6], ref[:, 0]) and chi2_ok(got[:, 7], ref[:, 1])
    # pad_if_needed: a 20x25 image to a 28x30 crop pads 3 on top and bottom,
    # 8 left and right (the deficits on both sides, as torchvision does)
    g = draws(8, 'padcrop', 20, 25, 28, 30, '1,1,1,1', 1)
    assert np.all(g[:, :6] == [1, 1, 1, 1, 6, 3])
    assert g[:, 6].max() == 27 + 6 - 30 and g[:, 7].max() == 22 + 12 - 28
    # exactly the crop's size: nothing drawn, the crop at 0, 0
    assert np.all(draws(8, 'padcrop', 32, 32, 32, 32, '-', 0)[:, 6:] == 0)


# ---- boxes ----

def box_jobs(specs):
    jobs = []
    for n, spec, boxes in specs:
        jobs.append((f'boxes {n} {spec}', np.asarray(boxes, '<f4').tobytes()))
    out, _ = run_jobs(jobs)
    res, at = [], 0
    for n, _, _ in specs:
        kept = int(np.frombuffer(out[at:at + 4], '<i4')[0])
        keep = np.frombuffer(out[at + 4:at + 4 + n], np.uint8).copy()
        b = np.frombuffer(out[at + 4 + n:at + 4 + n + 16 * kept], '<f4').reshape(kept, 4)
        at += 4 + n + 16 * kept
        res.append((keep, b))
    return res


def ref_boxes(m, boxes, ow, oh):
    keep, out = [], []
    for b in np.asarray(boxes, np.float64):
        xs = np.array([b[0], b[2], b[0], b[2]])
        ys = np.array([b[1], b[1], b[3], b[3]])
        u = m[0] * xs + m[1] * ys + m[2]
        v = m[3] * xs + m[4] * ys + m[5]
        cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
        ccx, ccy = m[0] * cx + m[1] * cy + m[2], m[3] * cx + m[4] * cy + m[5]
        k = 0 <= ccx < ow and 0 <= ccy < oh
        keep.append(int(k))
        if k:
            out.append([np.clip(u.min(), 0, ow), np.clip(v.min(), 0, oh),
                        np.clip(u.max(), 0, ow), np.clip(v.max(), 0, oh)])
    return np.array(keep, np.uint8), np.array(out, np.float32).reshape(-1, 4)


def test_boxes_follow_the_ops():
    rng = np.random.default_rng(21)
    specs, refs = [], []
    for k in range(60):
        w, h = (int(v) for v in rng.integers(8, 120, 2))
        n = int(rng.integers(0, 12))
        x0 = rng.uniform(-10, w, n)
        y0 = rng.uniform(-10, h, n)
        boxes = np.stack([x0, y0, x0 + rng.uniform(0, w / 2, n), y0 + rng.uniform(0, h / 2, n)],
                         1).astype(np.float32)
        kind = ['affine', 'rotate', 'hflip', 'vflip', 'padcrop'][k % 5]
        if kind in ('affine', 'rotate'):
            a = [f32(rng.uniform(-180, 180)), int(rng.integers(-9, 10)), int(rng.integers(-9, 10)),
                 f32(rng.uniform(0.6, 1.5)), f32(rng.uniform(-30, 30)), f32(rng.uniform(-30, 30))]
            if kind == 'rotate':
                spec = f'rotate {w} {h} {a[0]!r}'
                m = F._get_inverse_affine_matrix([w * 0.5, h * 0.5], -a[0], [0, 0], 1.0, [0, 0],
                                                 inverted=False)
            else:
                spec = f'affine {w} {h} ' + ' '.join(repr(v) for v in a)
                m = F._get_inverse_affine_matrix([w * 0.5, h * 0.5], a[0], a[1:3], a[3], a[4:6],
                                                 inverted=False)
            ow, oh = w, h
        elif kind == 'hflip':
            spec, m, ow, oh = f'hflip {w} {h}', [-1, 0, w, 0, 1, 0], w, h
        elif kind == 'vflip':
            spec, m, ow, oh = f'vflip {w} {h}', [1, 0, 0, 0, -1, h], w, h
        else:
            p = [int(v) for v in rng.integers(0, 8, 8)]
            ow, oh = int(rng.integers(4, w)), int(rng.integers(4, h))
            spec = 'padcrop ' + ' '.join(map(str, p)) + f' {ow} {oh}'
            m = [1, 0, p[0] + p[4] - p[7], 0, 1, p[1] + p[5] - p[6]]
        specs.append((n, spec, boxes))
        refs.append(ref_boxes(m, boxes, ow, oh))
    for (keep, b), (rkeep, rb) in zip(box_jobs(specs), refs):
        assert np.array_equal(keep, rkeep)
        np.testing.assert_allclose(b, rb, rtol=0, atol=1e-3)


def test_boxes_stay_on_their_pixels():
    """A box's filled rectangle, through the nearest op, stays inside the
    mapped box (one pixel of slack for the sampling)."""
    rng = np.random.default_rng(8)
    for k in range(30):
        w, h = (int(v) for v in rng.integers(20, 80, 2))
        x0, y0 = int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2))
        x1, y1 = int(rng.integers(x0 + 2, w)), int(rng.integers(y0 + 2, h))
        mask = np.zeros((h, w), np.uint8)
        mask[y0:y1, x0:x1] = 1
        a = [f32(rng.uniform(-60, 60)), int(rng.integers(-4, 5)), int(rng.integers(-4, 5)),
             f32(rng.uniform(0.8, 1.2)), f32(rng.uniform(-15, 15)), f32(rng.uniform(-15, 15))]
        args = ' '.join(repr(v) for v in a)
        out, _ = run_jobs([(f'affine {w} {h} 1 chw nearest - {args}', mask.tobytes())])
        got = np.frombuffer(out, np.uint8).reshape(h, w)
        ys, xs = np.nonzero(got)
        ((keep, b),) = box_jobs([(1, f'affine {w} {h} {args}', [[x0, y0, x1, y1]])])
        if not keep[0] or not len(xs):
            continue
        bx0, by0, bx1, by1 = b[0]
        assert xs.min() >= bx0 - 1 and xs.max() + 1 <= bx1 + 1
        assert ys.min() >= by0 - 1 and ys.max() + 1 <= by1 + 1


def test_bad_boxes_are_refused():
    for bad in ([[5, 5, 1, 9]], [[0, float('nan'), 3, 3]]):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, 'j'), 'w').write('boxes 1 hflip 10 10\n')
            open(os.path.join(d, 'i'), 'wb').write(np.asarray(bad, '<f4').tobytes())
            r = subprocess.run([RUNNER, 'apply'] + [os.path.join(d, n) for n in 'jio'],
                               capture_output=True, text=True)
            assert r.returncode == 1 and 'box 0' in r.stderr


# ---- time per 224x224x3 image (printed; not asserted) ----

def test_time_per_image():
    img = np.random.default_rng(0).integers(0, 256, (3, 224, 224), dtype=np.uint8)
    jobs = []
    for layout in ('chw', 'hwc'):
        b = to_bytes(img, layout)
        jobs += [(f'affine 224 224 3 {layout} nearest - 12.5 5 -3 1.1 7 -4', b),
                 (f'affine 224 224 3 {layout} bilinear - 12.5 5 -3 1.1 7 -4', b),
                 (f'rotate 224 224 3 {layout} bilinear - 30', b),
                 (f'hflip 224 224 3 {layout}', b), (f'vflip 224 224 3 {layout}', b),
                 (f'padcrop 224 224 3 {layout} constant - 4 4 4 4 0 0 3 5 224 224', b),
                 (f'padcrop 224 224 3 {layout} reflect - 4 4 4 4 0 0 3 5 224 224', b)]
    _, text = run_jobs(jobs, repeat=20)
    print('\n' + text)
    assert text.count('time ') == len(jobs)


def test_bad_affine_parameters_are_refused():
    """scale <= 0 or a parameter that is not finite: -EINVAL, the image
    untouched (the runner writes nothing and fails)."""
    img = bytes(range(12))
    for args in ('0 0 0 0 0 0', '0 0 0 -1 0 0', 'nan 0 0 1 0 0', '0 inf 0 1 0 0'):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, 'j'), 'w').write(f'affine 4 3 1 chw nearest - {args}\n')
            open(os.path.join(d, 'i'), 'wb').write(img)
            r = subprocess.run([RUNNER, 'apply'] + [os.path.join(d, n) for n in 'jio'],
                               capture_output=True, text=True)
            assert r.returncode == 1 and 'Invalid argument' in r.stderr, args
