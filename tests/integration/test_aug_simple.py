"""test_aug_simple.py - the exact augmentation ops (daemon/worker/aug_simple.c)
against torchvision's functional ops on the same uint8 image, byte for
byte: flips, invert, posterize (every bits 0..8), solarize (thresholds
below, inside and above the byte range, fractional ones), over odd sizes,
1 and 3 channels, CHW and HWC; and the coin every one of them draws
(torch.rand(1) < p) against its binomial distribution over 10,000 draws.
"""
import math
import os
import subprocess

import numpy as np
import pytest
import torch
from torchvision.transforms import functional as F

RUN = os.path.join(os.environ.get("RINGFEED_BUILD_DIR", "build"), "tests", "aug_simple_run")
SIZES = [(1, 1), (1, 7), (5, 1), (2, 2), (3, 5), (17, 31), (32, 32), (64, 45)]


def run(op, img, layout, param=0):
    """img: C x H x W uint8 tensor; the runner's result in CHW."""
    c, h, w = img.shape
    data = (img if layout == "chw" else img.permute(1, 2, 0)).contiguous().numpy().tobytes()
    out = subprocess.run([RUN, "apply", op, str(c), str(h), str(w), layout, str(param)],
                         input=data, stdout=subprocess.PIPE, check=True).stdout
    arr = torch.from_numpy(np.frombuffer(out, dtype=np.uint8).copy())
    return arr.view(c, h, w) if layout == "chw" else arr.view(h, w, c).permute(2, 0, 1)


def cases():
    rng = np.random.default_rng(2025)
    for c in (1, 3):
        for layout in ("chw", "hwc"):
            for h, w in SIZES:
                yield c, layout, torch.from_numpy(rng.integers(0, 256, (c, h, w), dtype=np.uint8))


@pytest.mark.parametrize("op,ref", [("hflip", F.hflip), ("vflip", F.vflip),
                                    ("invert", F.invert)])
def test_flips_and_invert(op, ref):
    for c, layout, img in cases():
        assert torch.equal(run(op, img, layout), ref(img)), (op, c, layout, img.shape)


def test_posterize_every_bits():
    for i, (c, layout, img) in enumerate(cases()):
        for bits in range(9):
            if (i + bits) % 3 and bits not in (0, 8):
                continue  # every bits for every shape would be slow; all bits seen often
            assert torch.equal(run("posterize", img, layout, bits), F.posterize(img, bits)), \
                (bits, c, layout, img.shape)


def test_solarize_thresholds():
    thresholds = [0, 0.5, 1, 63.25, 127, 128, 128.5, 200, 254.99, 255]
    for i, (c, layout, img) in enumerate(cases()):
        for t in thresholds[i % 3::3]:
            assert torch.equal(run("solarize", img, layout, t), F.solarize(img, t)), \
                (t, c, layout, img.shape)
    # above every byte: nothing inverted (torchvision refuses > 255)
    img = torch.arange(256, dtype=torch.uint8).view(1, 16, 16)
    assert torch.equal(run("solarize", img, "chw", 300), img)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.93, 1.0])
def test_coin_is_bernoulli_p(p):
    n = 10000
    hits = int(subprocess.run([RUN, "draws", str(p), str(n), "25"], stdout=subprocess.PIPE,
                              check=True).stdout)
    if p in (0.0, 1.0):
        assert hits == n * p
        return
    # seeded: the count is fixed; 5 sigma of the binomial (never flakes,
    # catches any bias in the threshold or a shifted stream)
    assert abs(hits - n * p) < 5 * math.sqrt(n * p * (1 - p)), (hits, n * p)
