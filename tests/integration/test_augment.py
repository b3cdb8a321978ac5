"""test_augment.py - augmentation pipelines end to end through the daemon
(ATTACH augment=, Loader(augment=), ringfeed.transforms, recipe.NAME).

A pipeline's batches are torchvision's functional ops on the plain batch
(eval crops, a uint8 image-tensor dataset, train crops unchanged by an
augment), the same for any worker count and after a resume; every
refusal names what it refuses; STATS reports each op's time.
"""
import numpy as np
import pytest
import torch
from torchvision.transforms import functional as F

import ringfeed
from ringfeed import transforms as T

RECIPE = "RandomVerticalFlip:p=1,RandomInvert:p=1"


def _write(root):
    rng = np.random.default_rng(25)
    with ringfeed.Writer(str(root / "rgb"), {"image": ringfeed.Image(),
                                             "label": ringfeed.Scalar("int64")},
                         classes=4) as w:
        for i in range(32):
            h, wd = rng.integers(20, 48, 2)
            w.write({"image": rng.integers(0, 256, (h, wd, 3), dtype=np.uint8), "label": i % 4})
    with ringfeed.Writer(str(root / "cifar"), {"x": ringfeed.Tensor("uint8", (3, 9, 7)),
                                               "label": ringfeed.Scalar("int64")},
                         classes=2) as w:
        for i, x in enumerate(rng.integers(0, 256, (40, 3, 9, 7), dtype=np.uint8)):
            w.write((x, i % 2))
    with ringfeed.Writer(str(root / "i16"), {"x": ringfeed.Tensor("int16", (3, 4, 4)),
                                             "label": ringfeed.Scalar("int64")},
                         classes=2) as w:
        for i, x in enumerate(rng.integers(0, 99, (8, 3, 4, 4), dtype=np.int16)):
            w.write((x, i % 2))
    with ringfeed.Writer(str(root / "vec"), {"x": ringfeed.Tensor("uint8", (5, 4, 4)),
                                             "label": ringfeed.Scalar("int64")},
                         classes=2) as w:
        for i, x in enumerate(rng.integers(0, 255, (8, 5, 4, 4), dtype=np.uint8)):
            w.write((x, i % 2))


@pytest.fixture(scope="module")
def served(tmp_path_factory, request):
    from conftest import Daemon

    root = tmp_path_factory.mktemp("aug")
    _write(root)
    conf = root / "ringfeedd.conf"
    conf.write_text(f"recipe.flipinv = {RECIPE}\nrecipe.cifar-flip = RandomHorizontalFlip\n")
    sets = {n: str(root / n) for n in ("rgb", "cifar", "i16", "vec")}
    daemons = []
    for workers in (1, 3):
        d = Daemon(sets, workers=workers, extra=["--config", str(conf)]).start()
        request.addfinalizer(d.cleanup)
        daemons.append(d)
    return daemons


def batches(sock, dataset, n=None, **kw):
    kw.setdefault("shuffle", False)
    loader = ringfeed.Loader(dataset, batch_size=8, socket=sock, **kw)
    out = []
    for i, (x, y) in enumerate(loader):
        if n is not None and i == n:
            break
        out.append((x.clone(), y.clone()))
    loader.close()
    return out


def test_eval_crops_are_torchvisions_vflip_of_invert(served):
    d = served[0]
    plain = batches(d.sock, "rgb", transform="eval", size=16)
    objs = batches(d.sock, "rgb", transform="eval", size=16,
                   augment=[T.RandomVerticalFlip(p=1), T.RandomInvert(p=1.0)])
    text = batches(d.sock, "rgb", transform="eval", size=16, augment=RECIPE)
    recipe = batches(d.sock, "rgb", transform="eval", size=16, augment="@flipinv")
    assert len(plain) == 4
    for (x, y), (a, ya), (b, _), (c, _) in zip(plain, objs, text, recipe):
        want = F.vflip(F.invert(x))
        assert torch.equal(a, want) and torch.equal(b, want) and torch.equal(c, want)
        assert torch.equal(y, ya)


def test_every_family_through_the_daemon(served):
    """The run glue (aug_run.c) hands each family's op its keys: ops whose
    draws are fixed by their arguments (p=1, degenerate ranges) through
    the daemon equal torchvision's functional ops on the plain eval crops
    (bit-exact ops only: the families' own tests bound the others)."""
    d = served[0]
    plain = batches(d.sock, "rgb", transform="eval", size=16)
    ops = [T.RandomGrayscale(p=1), T.RandomEqualize(p=1), T.RandomAutocontrast(p=1),
           T.ColorJitter(brightness=(1.5, 1.5)), T.RandomAdjustSharpness(2.0, p=1),
           T.RandomRotation((30, 30)), T.RandomAffine(0, translate=None, shear=(10, 10)),
           T.RandomCrop(16, padding=3, padding_mode="reflect")]
    aug = batches(d.sock, "rgb", transform="eval", size=16, augment=ops[:7])
    for (x, _), (a, _) in zip(plain, aug):
        want = F.adjust_sharpness(F.adjust_brightness(F.autocontrast(F.equalize(
            F.rgb_to_grayscale(x, 3))), 1.5), 2.0)
        want = F.affine(F.rotate(want, 30), angle=0, translate=[0, 0], scale=1, shear=[10, 0])
        assert torch.equal(a, want)
    # RandomCrop draws where to crop: every output is one of the padded
    # image's 16 x 16 windows
    for (x, _), (a, _) in zip(plain, batches(d.sock, "rgb", transform="eval", size=16,
                                             augment=ops[7:])):
        padded = F.pad(x, [3, 3, 3, 3], padding_mode="reflect")
        for xi, ai in zip(padded, a):
            assert any(torch.equal(ai, xi[:, i:i + 16, j:j + 16])
                       for i in range(7) for j in range(7))


def test_uint8_tensor_dataset_and_hwc(served):
    d = served[0]
    ops = [T.RandomHorizontalFlip(p=1), T.RandomPosterize(bits=3, p=1),
           T.RandomSolarize(threshold=100.5, p=1)]
    for (x, _), (a, _) in zip(batches(d.sock, "cifar"), batches(d.sock, "cifar", augment=ops)):
        assert torch.equal(a, F.solarize(F.posterize(F.hflip(x), 3), 100.5))
    plain = batches(d.sock, "rgb", transform="eval", size=12, layout="hwc")
    aug = batches(d.sock, "rgb", transform="eval", size=12, layout="hwc",
                  augment=[T.RandomHorizontalFlip(1.0), T.RandomInvert(1.0)])
    for (x, _), (a, _) in zip(plain, aug):
        want = F.invert(F.hflip(x.permute(0, 3, 1, 2))).permute(0, 2, 3, 1)
        assert torch.equal(a, want)


def test_train_crop_unchanged_and_random_ops_per_sample(served):
    d = served[0]
    kw = dict(transform="train", size=16, seed=7, shuffle=True)
    plain = batches(d.sock, "rgb", **kw)
    inv = batches(d.sock, "rgb", augment=[T.RandomInvert(p=1)], **kw)
    for (x, _), (a, _) in zip(plain, inv):
        assert torch.equal(a, F.invert(x))  # the transform's draws come first
    half = batches(d.sock, "rgb", augment=[T.RandomVerticalFlip(p=0.5)], **kw)
    flipped = kept = 0
    for (x, _), (a, _) in zip(plain, half):
        for xi, ai in zip(x, a):
            if torch.equal(ai, xi):
                kept += 1
            else:
                assert torch.equal(ai, F.vflip(xi))
                flipped += 1
    assert flipped > 4 and kept > 4, (flipped, kept)


def test_same_for_any_worker_count_and_after_resume(served):
    ops = [T.RandomHorizontalFlip(), T.RandomVerticalFlip(0.3), T.RandomInvert(0.5),
           T.RandomPosterize(4), T.RandomSolarize(128, 0.4)]
    kw = dict(transform="train", size=16, seed=3, shuffle=True, augment=ops)
    one = batches(served[0].sock, "rgb", **kw)
    three = batches(served[1].sock, "rgb", **kw)
    assert len(one) == len(three) == 4
    for (a, ya), (b, yb) in zip(one, three):
        assert torch.equal(a, b) and torch.equal(ya, yb)
    loader = ringfeed.Loader("rgb", batch_size=8, socket=served[1].sock, **kw)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    assert state["augment"] == ",".join(str(o) for o in ops)
    loader.close()
    again = ringfeed.Loader("rgb", batch_size=8, socket=served[0].sock, **kw)
    again.load_state_dict(state)
    x, _ = next(iter(again))
    assert torch.equal(x, one[1][0])
    again.close()
    other = ringfeed.Loader("rgb", batch_size=8, socket=served[0].sock,
                            **dict(kw, augment=ops[:1]))
    with pytest.raises(ValueError, match="augment="):
        other.load_state_dict(state)
    other.close()


def refused(d, dataset, augment, *words, **kw):
    with pytest.raises(ringfeed.Error) as e:
        ringfeed.Loader(dataset, batch_size=4, socket=d.sock, augment=augment, **kw)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_refusals_name_what_they_refuse(served):
    d = served[0]
    ev = dict(transform="eval", size=16)
    refused(d, "rgb", "Blur:p=1", 'unknown op "Blur"', "RandomInvert", **ev)
    refused(d, "rgb", "RandomInvert:prob=1", 'RandomInvert has no parameter "prob"', **ev)
    refused(d, "rgb", [T.RandomInvert(p=1.5)], "RandomInvert", "p", "0..1", **ev)
    refused(d, "rgb", [T.RandomPosterize(bits=9)], "bits", "0..8", **ev)
    refused(d, "rgb", [T.RandomErasing(), T.RandomInvert()],
            "RandomErasing must be the last op", **ev)
    refused(d, "i16", [T.RandomInvert()], "uint8 images")
    refused(d, "vec", [T.RandomInvert()], "1 or 3 channels", "5x4x4")
    refused(d, "rgb", "@nope", "no such recipe", "flipinv", "cifar-flip", **ev)
    # every op of the table is in this build (an op without a worker row
    # would be refused at ATTACH as "not available in this build", never
    # skipped: augment.c's augment_check)
    have = {k.split(".")[1].rsplit("_ns", 1)[0] for k in d.stats()
            if k.startswith("augment.") and k.endswith("_ns")}
    assert have == {"colorjitter", "grayscale", "gaussianblur", "posterize", "solarize",
                    "sharpness", "autocontrast", "equalize", "invert", "affine", "rotation",
                    "hflip", "vflip", "crop", "trivialaugmentwide", "randaugment",
                    "autoaugment", "erasing", "plugin"}, sorted(have)
    # what the ops cannot honour is refused at ATTACH, not on every sample
    refused(d, "rgb", [T.RandomRotation(10, center=(1, 2))], "center= is not supported", **ev)
    refused(d, "rgb", [T.RandAugment(num_ops=17)], "RandAugment", **ev)


def test_python_refuses_arguments_torchvision_does_not_take():
    with pytest.raises(TypeError, match="'prob'"):
        T.RandomInvert(prob=1)
    with pytest.raises(TypeError, match="expand"):
        T.RandomRotation(10, expand=True)
    with pytest.raises(TypeError, match="bits"):
        T.RandomPosterize()
    with pytest.raises(TypeError, match="not a ringfeed.transforms op"):
        T.render([T.RandomInvert(), lambda x: x])
    assert str(T.ColorJitter(0.4, contrast=(0.5, 1.5))) == \
        "ColorJitter:brightness=0.4:contrast=0.5/1.5"
    assert str(T.RandomCrop(32, padding=4, pad_if_needed=True, padding_mode="reflect")) == \
        "RandomCrop:size=32:padding=4:pad_if_needed=1:padding_mode=reflect"
    assert str(T.RandomErasing(value="random", scale=[0.1, 0.2])) == \
        "RandomErasing:scale=0.1/0.2:value=random"


def test_stats_per_op(served):
    d = served[0]
    batches(d.sock, "cifar", augment=[T.RandomVerticalFlip(p=1), T.RandomInvert(p=0.5)])
    st = d.stats()
    for op in ("vflip", "invert"):
        assert int(st[f"augment.{op}_images"]) >= 40, st
        assert int(st[f"augment.{op}_ns"]) > 0
        assert float(st[f"augment.{op}_ns_per_image"]) > 0
