"""The augmentation policies and RandomErasing (daemon/worker/aug_policy.h)
against torchvision 0.14's own decisions.

tests/aug_policy_run draws outside the daemon.  The policies' magnitude
tables must equal torchvision's _augmentation_space bit for bit; 10,000
draws per policy must be distributed as 10,000 of torchvision's forward
decisions (recorded by replacing autoaugment._apply_op: the op and its
signed magnitude, per call), by a chi-square test of homogeneity at fixed
seeds on both sides (so it cannot flake), and every op, bin and sign must
appear.  RandomErasing: the box draws against RandomErasing.get_params, the
value="random" bytes against their documented law (clamp(round(127.5 +
63.75 z)), z ~ N(0, 1)), and the erase's pixels against F.erase, exactly.
Needs torch and torchvision (Debian's /usr/bin/python3).
"""
import collections
import math
import os
import subprocess
import tempfile

import pytest

from conftest import binary

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
np = pytest.importorskip("numpy")
import torchvision.transforms.autoaugment as taa  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402
from torchvision import transforms as T  # noqa: E402

N = 10_000
W, H = 224, 160          # not square: TranslateX and TranslateY differ
ALPHA = 1e-3             # the seeds are fixed: a pass stays a pass


def run(*args):
    r = subprocess.run([binary("tests/aug_policy_run")] + [str(a) for a in args],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def chi2_sf(stat, dof):
    """P(chi2(dof) >= stat)."""
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0, dtype=torch.float64),
                                         torch.tensor(stat / 2.0, dtype=torch.float64)))


def homogeneity(a, b, pool=10):
    """Chi-square test that the counters a and b come from one law: cells
    with fewer than `pool` draws together are pooled.  Returns (p, cells)."""
    na, nb = sum(a.values()), sum(b.values())
    cells, small_a, small_b = [], 0, 0
    for k in set(a) | set(b):
        if a[k] + b[k] < pool:
            small_a += a[k]
            small_b += b[k]
        else:
            cells.append((a[k], b[k]))
    if small_a + small_b:
        cells.append((small_a, small_b))
    if len(cells) < 2:  # one outcome on both sides: nothing to tell apart
        return 1.0, len(cells)
    stat = 0.0
    for ca, cb in cells:
        t = ca + cb
        ea, eb = t * na / (na + nb), t * nb / (na + nb)
        stat += (ca - ea) ** 2 / ea + (cb - eb) ** 2 / eb
    return chi2_sf(stat, len(cells) - 1), len(cells)


def f32(x):
    return float(np.float32(x))


# ---- the magnitude tables ----

def torch_space(policy, bins, w, h):
    if policy == "trivialaugment":
        return T.TrivialAugmentWide(num_magnitude_bins=bins)._augmentation_space(bins)
    if policy == "randaugment":
        return T.RandAugment(num_magnitude_bins=bins)._augmentation_space(bins, (h, w))
    return T.AutoAugment()._augmentation_space(bins, (h, w))


def c_space(policy, bins, w, h):
    out = {}
    for line in run("table", policy, bins, w, h):
        f = line.split()
        out[f[0]] = (bool(int(f[1])), [f32(float(x)) for x in f[2:]])
    return out


# torch 1.13's CPU linspace differs in the last bit between its kernels;
# aug_policy.c reproduces the AVX2 one, the one Debian's build runs here
EXACT = "CPU capability usage: AVX2" in torch.__config__.show()


@pytest.mark.parametrize("policy,bins_list", [
    ("trivialaugment", [2, 3, 5, 7, 10, 15, 16, 17, 31, 32, 33, 47, 64, 100, 255]),
    ("randaugment", [2, 3, 5, 7, 10, 15, 16, 17, 31, 32, 33, 47, 64, 100, 255]),
    ("autoaugment", [10]),
])
@pytest.mark.parametrize("w,h", [(W, H), (37, 53), (1, 1), (1023, 331)])
def test_tables_equal_torchvision(policy, bins_list, w, h):
    for bins in bins_list:
        want, got = torch_space(policy, bins, w, h), c_space(policy, bins, w, h)
        assert list(got) == list(want), f"{policy}: the op order differs"
        for name, (mags, signed) in want.items():
            gsigned, gm = got[name]
            assert gsigned == signed, f"{policy} {name}: signed"
            wm = [f32(x) for x in mags.reshape(-1).tolist()] if mags.ndim > 0 else []
            if EXACT:
                assert gm == wm, f"{policy} {name} bins={bins} {w}x{h}: {gm} != {wm}"
            else:
                assert np.allclose(gm, wm, rtol=3e-7, atol=0), f"{policy} {name} bins={bins}"


# ---- the draws against torchvision's forward ----

def record_torch(module, seed, n=N, w=W, h=H):
    """n calls of module's forward on a (3, h, w) uint8 image, each the
    tuple of (op name, signed magnitude) it applied."""
    calls, cur = [], []

    def fake_apply(img, op_name, magnitude, interpolation, fill):
        cur.append((op_name, f32(magnitude)))
        return img

    real = taa._apply_op
    taa._apply_op = fake_apply
    try:
        torch.manual_seed(seed)
        img = torch.zeros((3, h, w), dtype=torch.uint8)
        for _ in range(n):
            cur = []
            module(img)
            calls.append(tuple(cur))
    finally:
        taa._apply_op = real
    return calls


def record_c(*args):
    """The runner's draws: (calls as record_torch gives them, steps as
    (name, bin, magnitude))."""
    calls, steps = [], []
    for line in run("draw", *args):
        f = line.split()
        st = [(f[1 + 3 * k], int(f[2 + 3 * k]), f32(float(f[3 + 3 * k]))) for k in range(int(f[0]))]
        steps += st
        calls.append(tuple((name, m) for name, _, m in st))
    return calls, steps


def assert_same_law(c_calls, t_calls, what):
    # -0.0 == 0.0: an unsigned zero magnitude is one category
    p, cells = homogeneity(collections.Counter(c_calls), collections.Counter(t_calls))
    assert p > ALPHA, f"{what}: chi-square p = {p:.2e} over {cells} cells"
    return cells


def assert_all_appear(steps, policy, bins, fixed_bin=None):
    space = torch_space(policy, bins, W, H)
    seen = collections.defaultdict(set)
    for name, b, m in steps:
        seen[name].add((b, math.copysign(1.0, m) if m != 0 else 0.0))
    for name, (mags, signed) in space.items():
        assert name in seen, f"{policy}: {name} never drawn"
        if mags.ndim == 0:
            assert seen[name] == {(-1, 0.0)}, f"{policy} {name}: {seen[name]}"
            continue
        bins_seen = {b for b, _ in seen[name]}
        want = {fixed_bin} if fixed_bin is not None else set(range(bins))
        assert bins_seen == want, f"{policy} {name}: bins {sorted(want - bins_seen)} missing"
        if signed and any(float(mags[b]) != 0.0 for b in want):
            assert {s for _, s in seen[name] if s != 0.0} == {1.0, -1.0}, f"{policy} {name}: a sign missing"


def test_trivialaugment_draws_match_torchvision():
    c_calls, steps = record_c("trivialaugment", 11, N, W, H)
    t_calls = record_torch(T.TrivialAugmentWide(), 11)
    assert all(len(c) == 1 for c in c_calls)
    assert_same_law(c_calls, t_calls, "TrivialAugmentWide")
    assert_all_appear(steps, "trivialaugment", 31)


def test_trivialaugment_other_bins():
    c_calls, steps = record_c("trivialaugment", 12, N, W, H, 5)
    t_calls = record_torch(T.TrivialAugmentWide(num_magnitude_bins=5), 12)
    assert_same_law(c_calls, t_calls, "TrivialAugmentWide(num_magnitude_bins=5)")
    assert_all_appear(steps, "trivialaugment", 5)


@pytest.mark.parametrize("num_ops,magnitude,bins", [(2, 9, 31), (3, 30, 31), (1, 0, 10)])
def test_randaugment_draws_match_torchvision(num_ops, magnitude, bins):
    c_calls, steps = record_c("randaugment", 13, N, W, H, num_ops, magnitude, bins)
    t_calls = record_torch(T.RandAugment(num_ops=num_ops, magnitude=magnitude,
                                         num_magnitude_bins=bins), 13)
    assert all(len(c) == num_ops for c in c_calls)
    assert_same_law(c_calls, t_calls, f"RandAugment({num_ops}, {magnitude}, {bins})")
    # the ops in order are independent: the first's law alone, too
    assert_same_law([c[:1] for c in c_calls], [t[:1] for t in t_calls], "RandAugment's first op")
    assert_all_appear(steps, "randaugment", bins, fixed_bin=magnitude)


def test_autoaugment_draws_match_torchvision():
    c_calls, steps = record_c("autoaugment", 14, N, W, H)
    t_calls = record_torch(T.AutoAugment(T.AutoAugmentPolicy.IMAGENET), 14)
    cells = assert_same_law(c_calls, t_calls, "AutoAugment(IMAGENET)")
    assert cells > 40
    # every (op, bin) of the policy's table, and both signs of the signed ones
    space = torch_space("autoaugment", 10, W, H)
    seen = collections.defaultdict(set)
    for name, b, m in steps:
        seen[(name, b)].add(m)
    pol = T.AutoAugment()._get_policies(T.AutoAugmentPolicy.IMAGENET)
    for sub in pol:
        for name, p, mid in sub:
            if p == 0.0:
                continue
            b = -1 if mid is None else mid
            assert (name, b) in seen, f"AutoAugment: {name} bin {b} never applied"
            if space[name][1] and f32(space[name][0][mid]) != 0.0:
                assert len({math.copysign(1, m) for m in seen[(name, b)]}) == 2, name
    # how often each sub-policy's ops fire: the probabilities compared with <=
    n_ops = collections.Counter(len(c) for c in c_calls)
    t_ops = collections.Counter(len(t) for t in t_calls)
    p, _ = homogeneity(n_ops, t_ops)
    assert p > ALPHA, f"AutoAugment: ops per call {n_ops} vs {t_ops}"


def p_rand_le(p):
    """P(torch.rand's float32 <= p): its values are k / 2^24."""
    p = f32(p)
    return min(1.0, (math.floor(p * 2 ** 24) + 1) / 2 ** 24)


def exact_law(policy, bins=31, num_ops=1, magnitude=None):
    """The probability of each call outcome, from torchvision's own tables
    (_augmentation_space, _get_policies) and forward's decisions."""
    law = collections.Counter()
    if policy == "autoaugment":
        bins = 10
    space = torch_space(policy, bins, W, H)

    def outcomes(name, mid):
        mags, signed = space[name]
        if mags.ndim == 0:
            return [((name, 0.0), 1.0)]
        m = f32(mags[mid])
        return [((name, m), 0.5), ((name, -m), 0.5)] if signed else [((name, m), 1.0)]

    if policy == "autoaugment":
        for sub in T.AutoAugment()._get_policies(T.AutoAugmentPolicy.IMAGENET):
            (n0, p0, m0), (n1, p1, m1) = sub
            a0 = outcomes(n0, m0 if m0 is not None else 0)
            a1 = outcomes(n1, m1 if m1 is not None else 0)
            q0, q1 = p_rand_le(p0), p_rand_le(p1)
            law[()] += (1 - q0) * (1 - q1) / 25
            for k0, w0 in a0:
                law[(k0,)] += q0 * (1 - q1) * w0 / 25
                for k1, w1 in a1:
                    law[(k0, k1)] += q0 * q1 * w0 * w1 / 25
            for k1, w1 in a1:
                law[(k1,)] += (1 - q0) * q1 * w1 / 25
        return law
    for name in space:
        mids = range(bins) if magnitude is None else [magnitude]
        for mid in mids:
            for k, w in outcomes(name, mid):
                law[(k,)] += w / len(space) / len(mids)
    return law


def goodness_of_fit(calls, law, pool=5):
    """Chi-square test of the counted calls against law; returns p."""
    counts, n = collections.Counter(calls), len(calls)
    assert set(counts) <= set(law), f"outcomes torchvision never gives: {set(counts) - set(law)}"
    cells, so, se = [], 0, 0.0
    for k, q in law.items():
        if q * n < pool:
            so, se = so + counts[k], se + q * n
        else:
            cells.append((counts[k], q * n))
    if se:
        cells.append((so, se))
    stat = sum((o - e) ** 2 / e for o, e in cells)
    return chi2_sf(stat, len(cells) - 1)


@pytest.mark.parametrize("policy,args,law_args", [
    ("trivialaugment", (), {}),
    ("randaugment", (1, 9, 31), {"magnitude": 9}),
    ("autoaugment", (), {}),
])
def test_draws_follow_torchvisions_law(policy, args, law_args):
    """100,000 draws against the exact law torchvision's forward implies:
    four times the power of the two-sample test above."""
    calls, _ = record_c(policy, 15, 100_000, W, H, *args)
    law = exact_law(policy, **law_args)
    assert abs(sum(law.values()) - 1) < 1e-9
    p = goodness_of_fit(calls, law)
    assert p > ALPHA, f"{policy}: p = {p:.2e}"


def test_draws_are_pure():
    a = run("draw", "randaugment", 5, 50, W, H, 4, 9, 31)
    assert a == run("draw", "randaugment", 5, 50, W, H, 4, 9, 31)
    assert a != run("draw", "randaugment", 6, 50, W, H, 4, 9, 31)


@pytest.mark.parametrize("args,refusal", [
    (("trivialaugment", 1), "num_magnitude_bins"),
    (("trivialaugment", 1025), "num_magnitude_bins"),
    (("randaugment", 2, 31, 31), "magnitude"),
    (("randaugment", 17, 9, 31), "num_ops"),
    (("randaugment", 2, 9, 0), "num_magnitude_bins"),
    (("erasing", 1.5, 0.02, 0.33, 0.3, 3.3), "p "),
    (("erasing", 0.5, 0.4, 0.33, 0.3, 3.3), "scale"),
    (("erasing", 0.5, 0.02, 1.5, 0.3, 3.3), "scale"),
    (("erasing", 0.5, 0.02, 0.33, 0, 3.3), "ratio"),
    (("erasing", 0.5, 0.02, 0.33, 3.3, 0.3), "ratio"),
    (("erasing", 0.5, 0.02, 0.33, 0.3, "inf"), "ratio"),
    (("erasing", "nan", 0.02, 0.33, 0.3, 3.3), "p "),
])
def test_checks_refuse(args, refusal):
    out = run("check", *args)
    assert out[0].startswith("refused ") and refusal in out[0], out


@pytest.mark.parametrize("args", [("trivialaugment", 31), ("randaugment", 16, 30, 31),
                                  ("randaugment", 0, 0, 2), ("erasing", 0, 0, 1, 1, 1),
                                  ("erasing", 1, 0.02, 0.33, 0.3, 3.3)])
def test_checks_accept(args):
    assert run("check", *args) == ["ok"]


# ---- aug_policy_apply: the op calls against _apply_op's ----

def c_calls(w, h, c, interp, fill, steps):
    """aug_policy_apply's calls for steps [(name, magnitude)], as lines."""
    fill_arg = "none" if fill is None else ",".join(str(v) for v in fill)
    args = [w, h, c, interp, fill_arg] + [x for st in steps for x in st]
    r = subprocess.run([binary("tests/aug_policy_calls")] + [str(a) for a in args],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "rc 0", lines
    return [ln.split() for ln in lines[:-1]]


def c_calls_all(w, h, c, interp, fill, steps):
    """c_calls over any number of steps, 16 (a draw's most) per run."""
    out = []
    for k in range(0, len(steps), 16):
        out += c_calls(w, h, c, interp, fill, steps[k:k + 16])
    return out


def torch_calls(img, steps, interp, fill, monkeypatch):
    """The functional calls torchvision's _apply_op makes for steps."""
    calls = []

    def recorder(name):
        def rec(im, *args, **kw):
            calls.append((name, args, kw))
            return im
        return rec

    for name in ["affine", "rotate", "adjust_brightness", "adjust_saturation", "adjust_contrast",
                 "adjust_sharpness", "posterize", "solarize", "autocontrast", "equalize", "invert"]:
        monkeypatch.setattr(taa.F, name, recorder(name))
    mode = {"nearest": F.InterpolationMode.NEAREST, "bilinear": F.InterpolationMode.BILINEAR}[interp]
    for name, m in steps:
        taa._apply_op(img, name, float(m), interpolation=mode,
                      fill=None if fill is None else [float(v) for v in fill])
    monkeypatch.undo()
    return calls


def torch_matrix(w, h, name, args, kw):
    """The inverse affine matrix torchvision's F.affine or F.rotate builds."""
    if name == "rotate":
        return F._get_inverse_affine_matrix([0.0, 0.0], -args[0], [0.0, 0.0], 1.0, [0.0, 0.0])
    center = kw.get("center")
    cf = [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [w, h])]
    return F._get_inverse_affine_matrix(cf, kw["angle"], [float(t) for t in kw["translate"]],
                                        kw["scale"], kw["shear"])


def all_steps(w, h):
    """Every op of every space at every bin of the default bin counts, both signs."""
    steps = []
    for policy, bins in [("trivialaugment", 31), ("randaugment", 31), ("autoaugment", 10)]:
        for name, (mags, signed) in torch_space(policy, bins, w, h).items():
            values = mags.reshape(-1).tolist() if mags.ndim > 0 else [0.0]
            for v in values:
                steps.append((name, f32(v)))
                if signed and v != 0:
                    steps.append((name, -f32(v)))
    return steps


@pytest.mark.parametrize("w,h,c,interp,fill", [
    (W, H, 3, "nearest", None), (37, 53, 1, "bilinear", (7,)), (64, 33, 3, "bilinear", (1, 2, 255)),
])
def test_apply_calls_match_apply_op(w, h, c, interp, fill, monkeypatch):
    """aug_policy_apply asks the ops for what _apply_op asks torchvision's
    functional ops: the same factors, bits and thresholds, and affine maps
    whose inverse matrices (F._get_inverse_affine_matrix) agree, shears
    about the corner included."""
    img = torch.zeros((c, h, w), dtype=torch.uint8)
    steps = all_steps(w, h)
    got = c_calls_all(w, h, c, interp, fill, steps)
    want = torch_calls(img, steps, interp, fill, monkeypatch)
    want_iter = iter(want)
    names = {"adjust_brightness": "brightness", "adjust_saturation": "saturation",
             "adjust_contrast": "contrast", "adjust_sharpness": "sharpness"}
    for (name, m), g in zip([s for s in steps if s[0] != "Identity"], got):
        tname, args, kw = next(want_iter)
        what = f"{name} {m}: C {g}, torchvision {tname} {args} {kw}"
        if tname in ("affine", "rotate"):
            assert g[0] == "affine", what
            mine = F._get_inverse_affine_matrix([0.0, 0.0], float(g[1]), [float(g[2]), float(g[3])],
                                                float(g[4]), [float(g[5]), float(g[6])])
            assert np.allclose(mine, torch_matrix(w, h, tname, args, kw), rtol=1e-6, atol=2e-5), what
            if name.startswith("Translate"):
                assert [float(g[2]), float(g[3])] == [float(t) for t in kw["translate"]], what
            assert g[7] == interp, what
            assert g[8:] == (["none"] if fill is None else [str(v) for v in fill]), what
        elif tname in names:
            assert g[0] == names[tname] and f32(float(g[1])) == f32(args[0]), what
        elif tname == "posterize":
            assert g == ["posterize", str(args[0])], what
        elif tname == "solarize":
            assert g[0] == "solarize" and f32(float(g[1])) == args[0], what
        else:
            assert g == [tname], what
    assert next(want_iter, None) is None and len(got) == len(want)


@pytest.mark.parametrize("interp,overall,per_image,max_diff", [
    ("nearest", 5e-5, 0.01, 255), ("bilinear", 5e-4, 0.01, 1)])
def test_shear_about_the_corner_pixels(interp, overall, per_image, max_diff):
    """The shears as aug_policy_apply asks aug_affine for them (about the
    centre plus a translation, in float32 arguments), given to F.affine,
    against _apply_op's pixels (about the corner, in doubles).  With double
    arguments they are identical; the float32 rounding moves torchvision's
    float32 sampling grid by an ulp, so a pixel exactly on a boundary can
    fall the other way: measured 7e-6 of the pixels nearest (a neighbour's
    value), 1.2e-4 bilinear (off by 1), at most 0.75% of one image."""
    g = torch.Generator().manual_seed(3)
    mode = {"nearest": F.InterpolationMode.NEAREST, "bilinear": F.InterpolationMode.BILINEAR}[interp]
    total = differ = 0
    for w, h in [(W, H), (37, 53), (31, 20)]:
        img = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)
        steps = [s for s in all_steps(w, h) if s[0] in ("ShearX", "ShearY")]
        for (name, m), call in zip(steps, c_calls_all(w, h, 3, interp, None, steps)):
            want = taa._apply_op(img, name, float(m), interpolation=mode, fill=None)
            got = F.affine(img, angle=float(call[1]), translate=[float(call[2]), float(call[3])],
                           scale=float(call[4]), shear=[float(call[5]), float(call[6])],
                           interpolation=mode)
            d = (got.int() - want.int()).abs()
            n = int((d > 0).sum())
            assert n <= per_image * d.numel() and int(d.max()) <= max_diff, f"{name} {m} on {w}x{h}"
            total, differ = total + d.numel(), differ + n
    assert differ <= overall * total, f"{differ} of {total} pixels differ"


# ---- RandomErasing ----

def torch_erasing(seed, n, h, w, scale, ratio):
    torch.manual_seed(seed)
    img = torch.zeros((3, h, w), dtype=torch.uint8)
    out = []
    for _ in range(n):
        i, j, bh, bw, v = T.RandomErasing.get_params(img, scale=scale, ratio=ratio, value=[0])
        out.append((v is not img, i, j, bh, bw) if v is not img else (False, 0, 0, h, w))
    return out


def c_erasing(seed, n, h, w, p, scale, ratio):
    return [tuple(int(x) for x in line.split()) for line in
            run("erasing", seed, n, h, w, p, scale[0], scale[1], ratio[0], ratio[1])]


def binned(values, lo, hi, nbins=12):
    return collections.Counter(min(nbins - 1, int((v - lo) * nbins / max(hi - lo, 1)))
                               for v in values)


@pytest.mark.parametrize("h,w,scale,ratio", [
    (224, 224, (0.02, 0.33), (0.3, 3.3)),   # torchvision's defaults
    (40, 30, (0.4, 0.9), (0.3, 3.3)),       # most attempts too big: the 10-attempt rule
    (61, 97, (0.1, 0.1), (1.0, 1.0)),       # degenerate ranges
])
def test_erasing_boxes_match_get_params(h, w, scale, ratio):
    c = c_erasing(21, N, h, w, 1.0, scale, ratio)
    t = torch_erasing(21, N, h, w, scale, ratio)
    ce, te = [x for x in c if x[0]], [x for x in t if x[0]]
    p, _ = homogeneity(collections.Counter(x[0] for x in c), collections.Counter(x[0] for x in t))
    assert p > ALPHA, f"boxes found: {len(ce)} vs {len(te)}"
    for k, (name, lo, hi) in enumerate([("i", 0, h), ("j", 0, w), ("h", 0, h), ("w", 0, w)], 1):
        if scale[0] == scale[1] and ratio[0] == ratio[1] and name in "hw":
            assert {x[k] for x in ce} == {x[k] for x in te}
            continue
        p, cells = homogeneity(binned([x[k] for x in ce], lo, hi),
                               binned([x[k] for x in te], lo, hi))
        assert p > ALPHA, f"{h}x{w} {name}: p = {p:.2e} over {cells} cells"
    # the box's area and its position inside the image
    p, _ = homogeneity(binned([x[3] * x[4] for x in ce], 0, h * w),
                       binned([x[3] * x[4] for x in te], 0, h * w))
    assert p > ALPHA
    for e, i, j, bh, bw in ce:
        assert i + bh <= h and j + bw <= w and bh < h and bw < w


def test_erasing_coin():
    c = c_erasing(22, N, 50, 50, 0.25, (0.02, 0.33), (0.3, 3.3))
    k = sum(x[0] for x in c)
    # 0.25 of 10,000 with a few failed attempts: 4.5 sigma either side
    assert abs(k - 2500) < 4.5 * math.sqrt(N * 0.25 * 0.75), k
    assert all(x == (0, 0, 0, 50, 50) for x in c if not x[0])
    assert not any(x[0] for x in c_erasing(22, 1000, 50, 50, 0.0, (0.02, 0.33), (0.3, 3.3)))


def test_erasing_noise_law():
    v = np.array(run("noise", 31, 200_000)[0].split(), dtype=np.int64)
    counts = np.bincount(v, minlength=256)
    phi = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))  # noqa: E731
    edges = [-math.inf] + [(k + 0.5 - 127.5) / 63.75 for k in range(255)] + [math.inf]
    probs = np.array([phi(edges[k + 1]) - phi(edges[k]) for k in range(256)])
    exp = probs * len(v)
    keep = exp >= 5
    obs, e = counts[keep], exp[keep]
    if (~keep).any():
        obs, e = np.append(obs, counts[~keep].sum()), np.append(e, exp[~keep].sum())
    stat = float(((obs - e) ** 2 / e).sum())
    p = chi2_sf(stat, len(obs) - 1)
    assert p > ALPHA, f"noise bytes: p = {p:.2e}"
    k = np.arange(256)
    sd = math.sqrt(float((probs * k * k).sum()) - 127.5 ** 2)  # the clamp narrows 63.75
    assert abs(v.mean() - 127.5) < 0.5 and abs(v.std() - sd) < 0.5, (v.mean(), v.std(), sd)
    # the first bytes come from the first draws whatever n is
    assert run("noise", 31, 7)[0].split() == run("noise", 31, 200_000)[0].split()[:7]


@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("layout", ["chw", "hwc"])
@pytest.mark.parametrize("mode", ["const", "random"])
def test_erase_pixels_equal_F_erase(c, layout, mode):
    g = torch.Generator().manual_seed(c * 7 + len(layout) + len(mode))
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in"), os.path.join(d, "out")
        for h, w in [(1, 1), (5, 7), (31, 17), (64, 48)]:
            for _ in range(6):
                img = torch.randint(0, 256, (c, h, w), dtype=torch.uint8, generator=g)
                bh = int(torch.randint(0, h + 1, (1,), generator=g))
                bw = int(torch.randint(0, w + 1, (1,), generator=g))
                i = int(torch.randint(0, h - bh + 1, (1,), generator=g))
                j = int(torch.randint(0, w - bw + 1, (1,), generator=g))
                raw = img if layout == "chw" else img.permute(1, 2, 0)
                with open(src, "wb") as f:
                    f.write(raw.contiguous().numpy().tobytes())
                if mode == "const":
                    vals = torch.randint(0, 256, (c,), generator=g).tolist()
                    tail = ["const"] + vals
                    v = torch.tensor(vals)[:, None, None]
                else:
                    tail = ["random", 41]
                    noise = run("noise", 41, c * bh * bw)[0].split() if c * bh * bw else []
                    v = torch.tensor([int(x) for x in noise], dtype=torch.uint8).reshape(c, bh, bw)
                run("erase", src, dst, c, h, w, layout, i, j, bh, bw, *tail)
                with open(dst, "rb") as f:
                    got = np.frombuffer(f.read(), dtype=np.uint8)
                shape = (c, h, w) if layout == "chw" else (h, w, c)
                got = torch.from_numpy(got.copy()).reshape(shape)
                if layout == "hwc":
                    got = got.permute(2, 0, 1)
                want = F.erase(img, i, j, bh, bw, v) if bh and bw else img
                assert torch.equal(got, want), f"{c}x{h}x{w} {layout} {mode} box {i},{j},{bh},{bw}"
