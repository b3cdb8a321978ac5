"""ringfeed.mixup and ringfeed.cutmix (python/ringfeed/mix.py) on CPU
tensors: the same batch identity (seed, rank, epoch, seq) mixes the same,
soft targets sum to 1, images are mixed as the formula says, CutMix's
lambda is the box's real share, the draws follow torchvision's reference
recipe on the documented generator, and bad arguments are refused naming
them.  The CUDA path is the same torch ops on another device.
"""
import math
import types

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ringfeed  # noqa: E402
from ringfeed import mix  # noqa: E402

K = 10


def batch(n=16, c=3, h=20, w=28, seed=0, dtype=torch.float32, layout="chw"):
    g = torch.Generator().manual_seed(seed)
    shape = (n, c, h, w) if layout == "chw" else (n, h, w, c)
    x = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
    if dtype != torch.uint8:
        x = x.to(dtype).div_(255)
    y = torch.randint(0, K, (n,), generator=g)
    return x, y


def test_exported():
    assert ringfeed.mixup is mix.mixup and ringfeed.cutmix is mix.cutmix
    assert "mixup" in ringfeed.__all__ and "cutmix" in ringfeed.__all__


@pytest.mark.parametrize("fn", [ringfeed.mixup, ringfeed.cutmix])
def test_same_batch_identity_mixes_identically(fn):
    x, y = batch()
    a = fn(x, y, K, epoch=3, seq=17, seed=5)
    b = fn(x.clone(), y.clone(), K, epoch=3, seq=17, seed=5)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # another batch, epoch, seed or rank: other draws
    for kw in [dict(epoch=3, seq=18, seed=5), dict(epoch=4, seq=17, seed=5),
               dict(epoch=3, seq=17, seed=6), dict(epoch=3, seq=17, seed=5, rank=1)]:
        c = fn(x, y, K, **kw)
        assert not torch.equal(a[1], c[1]), kw
    # the inputs are left alone
    x2, y2 = batch()
    assert torch.equal(x, x2) and torch.equal(y, y2)


def test_mix_seed_is_fixed():
    # a resumed run on another machine or version of ringfeed must get the
    # same generator seeds: these are SplitMix64 values, written down
    assert mix.mix_seed("mixup", 0, 0, 0) == mix.mix_seed("mixup", 0, 0, 0, rank=0)
    seeds = {mix.mix_seed(op, s, e, q, r) for op in ("mixup", "cutmix") for s in (0, 1)
             for e in (0, 1) for q in (0, 1) for r in (0, 1)}
    assert len(seeds) == 32
    assert mix._splitmix64(0) == 0xE220A8397B1DCDAF  # SplitMix64's first output from state 0


def test_mixup_formula_and_targets():
    x, y = batch(n=32)
    xm, ym = ringfeed.mixup(x, y, K, alpha=0.4, epoch=1, seq=2, seed=3)
    lam, perm = mix.mixup_params(32, 0.4, epoch=1, seq=2, seed=3)
    assert 0.0 < lam < 1.0 and sorted(perm.tolist()) == list(range(32))
    want = lam * x.double() + (1 - lam) * x.double()[perm]
    assert torch.allclose(xm.double(), want, atol=1e-6)
    onehot = torch.nn.functional.one_hot(y, K).double()
    assert torch.allclose(ym.double(), lam * onehot + (1 - lam) * onehot[perm], atol=1e-6)
    assert torch.allclose(ym.sum(1), torch.ones(32), atol=1e-6)
    assert ym.dtype == torch.float32 and xm.dtype == torch.float32


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("fn", [ringfeed.mixup, ringfeed.cutmix])
def test_soft_targets_sum_to_one(fn, smoothing):
    x, y = batch(n=64)
    for seq in range(20):
        _, t = fn(x, y, K, epoch=0, seq=seq, label_smoothing=smoothing)
        assert t.shape == (64, K)
        assert torch.allclose(t.sum(1), torch.ones(64), atol=1e-5)
        assert float(t.min()) >= smoothing / K - 1e-7


def test_label_smoothing_is_timms():
    x, y = batch(n=8)
    _, t = ringfeed.mixup(x, y, K, epoch=0, seq=0, label_smoothing=0.1)
    lam, perm = mix.mixup_params(8, epoch=0, seq=0)
    off, on = 0.1 / K, 1 - 0.1 + 0.1 / K
    s = torch.full((8, K), off, dtype=torch.float64)
    s[torch.arange(8), y] = on
    assert torch.allclose(t.double(), lam * s + (1 - lam) * s[perm], atol=1e-6)


def test_soft_labels_in():
    x, y = batch(n=8)
    _, t1 = ringfeed.mixup(x, y, K, epoch=0, seq=4)
    soft = torch.nn.functional.one_hot(y, K).float()
    _, t2 = ringfeed.mixup(x, soft, K, epoch=0, seq=4)
    assert torch.equal(t1, t2)


@pytest.mark.parametrize("layout", ["chw", "hwc"])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_cutmix_box_and_area_correction(layout, dtype):
    n, h, w = 24, 21, 34
    x, y = batch(n=n, h=h, w=w, dtype=dtype, layout=layout)
    boxes = 0
    for seq in range(40):
        xm, t = ringfeed.cutmix(x, y, K, epoch=2, seq=seq, seed=9, layout=layout)
        lam, perm, (y1, y2, x1, x2) = mix.cutmix_params(n, h, w, epoch=2, seq=seq, seed=9)
        assert xm.dtype == dtype
        area = (y2 - y1) * (x2 - x1)
        assert lam == pytest.approx(1 - area / (h * w), abs=1e-12)
        boxes += area > 0
        inside = torch.zeros((h, w), dtype=torch.bool)
        inside[y1:y2, x1:x2] = True
        xc = xm if layout == "chw" else xm.permute(0, 3, 1, 2)
        src = x if layout == "chw" else x.permute(0, 3, 1, 2)
        assert torch.equal(xc[:, :, inside], src[perm][:, :, inside])
        assert torch.equal(xc[:, :, ~inside], src[:, :, ~inside])
        onehot = torch.nn.functional.one_hot(y, K).double()
        assert torch.allclose(t.double(), lam * onehot + (1 - lam) * onehot[perm], atol=1e-6)
    assert boxes > 30


def test_cutmix_follows_torchvisions_reference_on_the_generator():
    """The documented draws: Beta by _sample_dirichlet, the permutation,
    then cx = randint(W), cy = randint(H) on the (seed, rank, epoch, seq)
    generator, boxed as torchvision's references/classification RandomCutmix
    does."""
    n, h, w, alpha = 10, 33, 47, 0.7
    for seq in range(50):
        g = torch.Generator().manual_seed(mix.mix_seed("cutmix", 4, 1, seq, 2))
        lam = float(torch._sample_dirichlet(torch.tensor([alpha, alpha], dtype=torch.float64),
                                            generator=g)[0])
        perm = torch.randperm(n, generator=g)
        r_x = torch.randint(w, (1,), generator=g)
        r_y = torch.randint(h, (1,), generator=g)
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half, r_h_half = int(r * w), int(r * h)
        x1 = int(torch.clamp(r_x - r_w_half, min=0))
        y1 = int(torch.clamp(r_y - r_h_half, min=0))
        x2 = int(torch.clamp(r_x + r_w_half, max=w))
        y2 = int(torch.clamp(r_y + r_h_half, max=h))
        want_lam = float(1.0 - (x2 - x1) * (y2 - y1) / (w * h))
        got = mix.cutmix_params(n, h, w, alpha, seed=4, epoch=1, seq=seq, rank=2)
        assert got[0] == want_lam and torch.equal(got[1], perm) and got[2] == (y1, y2, x1, x2)


@pytest.mark.parametrize("alpha", [0.2, 1.0])
def test_lambda_is_beta(alpha):
    """2,000 batches' lambdas against numpy's Beta(alpha, alpha): a
    two-sample Kolmogorov-Smirnov test at fixed seeds."""
    lams = np.array([mix.mixup_params(4, alpha, epoch=0, seq=q)[0] for q in range(2000)])
    ref = np.random.default_rng(0).beta(alpha, alpha, 20000)
    grid = np.sort(np.concatenate([lams, ref]))
    d = np.abs(np.searchsorted(np.sort(lams), grid, side="right") / len(lams) -
               np.searchsorted(np.sort(ref), grid, side="right") / len(ref)).max()
    crit = 1.95 * math.sqrt((len(lams) + len(ref)) / (len(lams) * len(ref)))  # 0.001
    assert d < crit, (d, crit)


def test_loader_and_batch_conveniences():
    x, y = batch()
    info = ringfeed.BatchInfo(b"", 7, 11, 11, 0, torch)
    loader = types.SimpleNamespace(seed=3, rank=1, last=info, _info={"layout": "chw"})
    want = ringfeed.mixup(x, y, K, seed=3, rank=1, epoch=7, seq=11)
    got = ringfeed.mixup(x, y, K, loader=loader)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])
    got = ringfeed.mixup(x, y, K, batch=info, seed=3, rank=1)
    assert torch.equal(want[1], got[1])
    want = ringfeed.cutmix(x, y, K, seed=3, rank=1, epoch=7, seq=11)
    got = ringfeed.cutmix(x, y, K, loader=loader)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])
    # an hwc stream's batch cut by its loader's layout
    xh = x.permute(0, 2, 3, 1).contiguous()
    loader._info = {"layout": "hwc"}
    got = ringfeed.cutmix(xh, y, K, loader=loader)
    assert torch.equal(got[0].permute(0, 3, 1, 2), want[0])
    with pytest.raises(TypeError, match="loader= or batch="):
        ringfeed.mixup(x, y, K, loader=loader, batch=info)
    with pytest.raises(TypeError, match="epoch= and seq="):
        ringfeed.mixup(x, y, K, loader=loader, epoch=1)
    with pytest.raises(TypeError, match="seed= and rank="):
        ringfeed.mixup(x, y, K, loader=loader, seed=1)
    with pytest.raises(ValueError, match="no batch yet"):
        ringfeed.mixup(x, y, K, loader=types.SimpleNamespace(seed=0, rank=0, last=None))


@pytest.mark.parametrize("call,exc,match", [
    (lambda x, y: ringfeed.mixup((x * 255).to(torch.uint8), y, K, epoch=0, seq=0), TypeError, "floating"),
    (lambda x, y: ringfeed.mixup(x, y, K), TypeError, "epoch= and seq="),
    (lambda x, y: ringfeed.mixup(x, y, K, alpha=0, epoch=0, seq=0), ValueError, "alpha"),
    (lambda x, y: ringfeed.mixup(x, y, K, alpha=float("nan"), epoch=0, seq=0), ValueError, "alpha"),
    (lambda x, y: ringfeed.mixup(x, y + K, K, epoch=0, seq=0), ValueError, r"labels\[0\]"),
    (lambda x, y: ringfeed.mixup(x, y - 100, K, epoch=0, seq=0), ValueError, r"labels\[0\]"),
    (lambda x, y: ringfeed.mixup(x, y[:3], K, epoch=0, seq=0), ValueError, "labels"),
    (lambda x, y: ringfeed.mixup(x, y.float(), K, epoch=0, seq=0), TypeError, "labels"),
    (lambda x, y: ringfeed.mixup(x, torch.zeros(16, K + 1), K, epoch=0, seq=0), ValueError, "soft"),
    (lambda x, y: ringfeed.mixup(x[0], y, K, epoch=0, seq=0), ValueError, "images"),
    (lambda x, y: ringfeed.mixup(x, y, K, epoch=-1, seq=0), ValueError, "epoch"),
    (lambda x, y: ringfeed.mixup(x, y, K, epoch=0, seq=1.5), TypeError, "seq"),
    (lambda x, y: ringfeed.mixup(x, y, K, epoch=0, seq=0, label_smoothing=1.0), ValueError,
     "label_smoothing"),
    (lambda x, y: ringfeed.cutmix(x, y, K, epoch=0, seq=0, layout="nchw"), ValueError, "layout"),
])
def test_refusals(call, exc, match):
    x, y = batch()
    with pytest.raises(exc, match=match):
        call(x, y)
