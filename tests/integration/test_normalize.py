"""test_normalize.py - Loader(dtype=, normalize=): uint8 images become
float32, float16 or bfloat16 scaled to [0, 1] and normalized per channel,
checked against torchvision's ToTensor-style scaling and Normalize on the
same batch (CHW and HWC, 1 and 3 channels, torch and numpy output), and
every way to ask for it wrongly refused (ringfeed.Error, EINVAL) with a
message that says why.
"""
import numpy as np
import pytest
import torch
from torchvision.transforms import functional as F

import ringfeed

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def served(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("norm")
    rng = np.random.default_rng(4)
    rgb = [rng.integers(0, 256, (12, 10, 3), dtype=np.uint8) for _ in range(24)]
    with ringfeed.Writer(str(root / "rgb"), {"image": ringfeed.Image(),
                                             "label": ringfeed.Scalar("int64")},
                         classes=3) as w:
        for i, im in enumerate(rgb):
            w.write({"image": im, "label": i % 3})
    gray = rng.integers(0, 256, (24, 1, 5, 7), dtype=np.uint8)
    with ringfeed.Writer(str(root / "gray"), {"x": ringfeed.Tensor("uint8", (1, 5, 7)),
                                              "label": ringfeed.Scalar("int64")},
                         classes=2) as w:
        for i, x in enumerate(gray):
            w.write((x, i % 2))
    shorts = rng.integers(0, 99, (8, 4), dtype=np.int16)
    with ringfeed.Writer(str(root / "i16"), {"x": ringfeed.Tensor("int16", (4,)),
                                             "label": ringfeed.Scalar("int64")},
                         classes=2) as w:
        for i, x in enumerate(shorts):
            w.write((x, i % 2))
    from conftest import Daemon
    d = Daemon({"rgb": str(root / "rgb"), "gray": str(root / "gray"),
                "i16": str(root / "i16")}, workers=1).start()
    request.addfinalizer(d.cleanup)
    return d, rgb, gray


def reference(x_uint8, mean, std, dtype):
    x = F.convert_image_dtype(x_uint8, torch.float32)  # x / 255, as ToTensor
    if mean is not None:
        x = F.normalize(x, mean, std)
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_rgb_batches_match_torchvision(served, dtype, layout):
    d, rgb, _ = served
    plain = ringfeed.Loader("rgb", batch_size=8, transform="none", shuffle=False,
                            layout=layout, socket=d.sock)
    conv = ringfeed.Loader("rgb", batch_size=8, transform="none", shuffle=False,
                           layout=layout, socket=d.sock, dtype=dtype, normalize=(MEAN, STD))
    for (x8, y8), (xf, yf) in zip(plain, conv):
        assert xf.dtype == dtype and xf.shape == x8.shape and torch.equal(y8, yf)
        chw = x8 if layout == "chw" else x8.permute(0, 3, 1, 2)
        want = reference(chw.clone(), MEAN, STD, torch.float32)
        got = (xf if layout == "chw" else xf.permute(0, 3, 1, 2)).float()
        if dtype == torch.float32:
            # one multiply-add against torchvision's divide, subtract, divide
            assert torch.allclose(got, want, rtol=0, atol=4e-6), (got - want).abs().max()
        else:
            # rounded once to the narrow type: at most one of its ulps apart
            ulp = 2.0 ** -10 if dtype == torch.float16 else 2.0 ** -7
            assert ((got - want).abs() <= want.abs().clamp(min=1) * ulp).all()
        del x8, y8, xf, yf
    plain.close()
    conv.close()


def test_scaling_alone_is_totensor_exactly_and_gray_and_numpy(served):
    d, _, gray = served
    ld = ringfeed.Loader("gray", batch_size=6, shuffle=False, socket=d.sock, dtype="float32")
    x, _ = next(iter(ld))
    assert x.dtype == torch.float32 and x.shape == (6, 1, 5, 7)
    assert torch.equal(x, torch.from_numpy(gray[:6]).float() / 255)
    ld.close()
    ld = ringfeed.Loader("gray", batch_size=6, shuffle=False, socket=d.sock, output="numpy",
                         dtype=np.float16, normalize=([0.5], [0.25]))
    x, _ = next(iter(ld))
    want = ((gray[:6].astype(np.float32) / 255 - 0.5) / 0.25).astype(np.float16)
    assert x.dtype == np.float16 and np.array_equal(x, want)
    ld.close()


def test_wrong_asks_are_refused(served):
    d, _, _ = served
    cases = [
        (dict(dataset="rgb", transform="none", dtype="int8"), "dtype='int8': use None"),
        (dict(dataset="rgb", transform="none", dtype="bfloat16", output="numpy"),
         "numpy has no bfloat16"),
        (dict(dataset="rgb", transform="none", normalize=((0.5,), (0.5,))),
         "normalize has 1 values per channel, the images have 3 channels"),
        (dict(dataset="rgb", transform="none", normalize=(MEAN, (0.2, 0, 0.2))),
         "std > 0"),
        (dict(dataset="rgb", transform="none", normalize=0.5), "use \\(mean, std\\)"),
        (dict(dataset="i16", normalize=((0.5,) * 4, (0.5,) * 4)),
         "convert uint8 images .* this stream gives int16"),
    ]
    for kw, match in cases:
        with pytest.raises(ringfeed.Error, match=match):  # EINVAL, as every bad argument
            ringfeed.Loader(batch_size=4, socket=d.sock, **kw)
