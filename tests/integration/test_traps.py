"""What a newcomer falls into, each turned into an answer (issue 24's "No
traps"), against a real daemon through ringfeed.Loader:

- the default transform (raw) on a JPEG dataset is refused naming train
  and eval, and none where the images have one size;
- a transform parameter the transform does not use (flip= with raw, crop=
  with train, scale= with eval, size= with none) is refused naming the
  parameter and the transform, whatever its value, default included;
- reset() and set_epoch(e, restart=True) start an epoch again from its
  first batch even when the loader stands inside it;
- a loader dropped without close() frees its ring at once (300 in a row
  against a daemon of max-clients 8, the cycle collector off), and the
  daemon's max-clients refusal says how many loaders this process holds;
- the rank split of an eval loader under torchrun is documented, with
  rank=0, world_size=1 for validation on rank 0 alone, which reads the
  whole set.
"""
import errno
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

import ringfeed
from conftest import pack_tool, wait_for


def tree(root, sizes):
    """An ImageFolder of JPEGs of the given (w, h) sizes, two classes."""
    for k, (w, h) in enumerate(sizes):
        d = os.path.join(root, f"c{k % 2}")
        os.makedirs(d, exist_ok=True)
        px = (np.arange(w * h * 3, dtype=np.uint32).reshape(h, w, 3) * (k + 7) % 251)
        Image.fromarray(px.astype(np.uint8), "RGB").save(os.path.join(d, f"{k}.jpg"), quality=90)


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """Two JPEG datasets: "same" (every image 40x32: image_shape) and
    "mixed" (sizes differ)."""
    root = tmp_path_factory.mktemp("jpegs")
    out = {}
    for name, sizes in (("same", [(40, 32)] * 6), ("mixed", [(40, 32), (50, 60), (33, 71),
                                                            (64, 48), (45, 45), (80, 30)])):
        tree(str(root / name), sizes)
        out[name] = str(root / (name + ".ds"))
        subprocess.run([pack_tool(), "imagefolder", str(root / name), out[name]], check=True,
                       capture_output=True)
    return out


@pytest.fixture
def daemon(daemon_factory, packed_fmnist, jpegs):
    return daemon_factory({"test": packed_fmnist["test"], "same": jpegs["same"],
                           "mixed": jpegs["mixed"]}, workers=2)


def refusal(daemon, dataset, **kw):
    with pytest.raises(ringfeed.Error) as e:
        ringfeed.Loader(dataset, batch_size=2, socket=daemon.sock, output="numpy", **kw)
    assert e.value.errno == errno.EINVAL, e.value
    return str(e.value)


def test_raw_on_jpegs_names_the_transforms_to_use(daemon):
    msg = refusal(daemon, "mixed")   # transform="raw", the default
    assert "raw" in msg and "train" in msg and "eval" in msg, msg
    assert "none" not in msg, msg    # its images differ in size
    msg = refusal(daemon, "same")
    assert "train" in msg and "eval" in msg and "none" in msg and "3x32x40" in msg, msg
    # and what it names works
    for t in ("train", "eval", "none"):
        with ringfeed.Loader("same", batch_size=2, transform=t, socket=daemon.sock,
                             output="numpy", size=None if t == "none" else 16) as ld:
            images, _ = next(iter(ld))
            assert images.shape == ((2, 3, 32, 40) if t == "none" else (2, 3, 16, 16))


def test_parameters_a_transform_does_not_use_are_refused(daemon):
    # raw on a tensor dataset uses none of them, at any value
    for kw in (dict(params={"flip": 0.5}), dict(params={"flip": 0}),
               dict(params="scale=0.08,1"), dict(params={"ratio": "1,2"}),
               dict(params={"crop": 0.875}), dict(size=224), dict(size=32),
               dict(layout="hwc")):
        key = next(iter(kw["params"])) if isinstance(kw.get("params"), dict) else \
            kw["params"].split("=")[0] if "params" in kw else next(iter(kw))
        msg = refusal(daemon, "test", **kw)
        assert f"{key}=" in msg and "transform raw" in msg, (kw, msg)
    # crop with train; scale, ratio and flip with eval; size and flip with none
    for t, key, v in (("train", "crop", 0.5), ("eval", "scale", "0.5,1"),
                      ("eval", "ratio", "0.75,1.3333333"), ("eval", "flip", 0.5),
                      ("none", "size", 224), ("none", "flip", 0)):
        kw = dict(size=v) if key == "size" else dict(params={key: v})
        if key != "size" and t != "none":
            kw["size"] = 16
        msg = refusal(daemon, "same", transform=t, **kw)
        assert f"{key}=" in msg and f"transform {t}" in msg, (t, key, msg)
    # what each uses is accepted
    for t, params in (("train", {"scale": "0.5,1", "ratio": "1,1", "flip": 0}),
                      ("eval", {"crop": 0.5}), ("none", {})):
        with ringfeed.Loader("same", batch_size=2, transform=t, params=params, layout="hwc",
                             size=None if t == "none" else 16, socket=daemon.sock,
                             output="numpy") as ld:
            assert next(iter(ld))[0].shape[-1] == 3
    with ringfeed.Loader("test", batch_size=2, socket=daemon.sock, output="numpy",
                         params={"share": 0, "weight": 2}) as ld:   # not transform parameters
        assert len(ld) == 5000
    assert int(daemon.stats()["workers.alive"]) == 2


def test_reset_and_restart_start_the_epoch_again(daemon):
    loader = ringfeed.Loader("test", batch_size=1000, socket=daemon.sock, output="numpy")
    seen = []
    for i, _ in enumerate(loader):   # a notebook cell, interrupted at batch 4
        seen.append((loader.last.epoch, loader.last.seq))
        if i == 4:
            break
    loader.reset()                   # the cell again: from the first batch
    first = next(iter(loader))
    assert (loader.last.epoch, loader.last.seq) == (0, 0)
    del first
    it = iter(loader)
    next(it), next(it)
    assert (loader.last.epoch, loader.last.seq) == (0, 2)
    loader.set_epoch(0)              # inside epoch 0: goes on
    next(iter(loader))
    assert (loader.last.epoch, loader.last.seq) == (0, 3)
    loader.set_epoch(0, restart=True)
    next(iter(loader))
    assert (loader.last.epoch, loader.last.seq) == (0, 0)
    for _ in loader:                 # the rest of epoch 0, whole
        pass
    assert (loader.last.epoch, loader.last.seq) == (0, 9)
    loader.reset()                   # the epoch just finished, again
    assert [loader.last.seq for _ in loader] == list(range(10))
    assert loader.last.epoch == 0
    state = loader.state_dict()      # (1, 0)
    loader.set_epoch(3)
    loader.reset()                   # the epoch chosen for the next loop
    next(iter(loader))
    assert (loader.last.epoch, loader.last.seq) == (3, 0)
    assert state["epoch"] == 1 and state["seq"] == 0
    loader.close()


def test_dropped_loaders_free_their_rings(daemon_factory, packed_fmnist, tmp_path):
    conf = tmp_path / "ringfeedd.conf"
    conf.write_text("max-clients = 8\n")
    d = daemon_factory({"test": packed_fmnist["test"]}, workers=1,
                       extra=["--config", str(conf)])
    gc.disable()   # dropped means freed by reference count, not by a later collection
    try:
        for i in range(300):
            ld = ringfeed.Loader("test", batch_size=100, socket=d.sock, output="numpy",
                                 depth=2)
            if i % 50 == 0:
                next(iter(ld))
            del ld
    finally:
        gc.enable()
    wait_for(lambda: int(d.stats()["clients.attached"]) == 0, "every ring let go")
    # the refusal of one ring too many counts this process's open loaders
    held = [ringfeed.Loader("test", batch_size=100, socket=d.sock, output="numpy", depth=2)
            for _ in range(8)]
    with pytest.raises(ringfeed.Error) as e:
        ringfeed.Loader("test", batch_size=100, socket=d.sock, output="numpy", depth=2)
    assert e.value.errno == errno.EUSERS, e.value
    assert "max-clients" in str(e.value) and "this process holds 8 ringfeed.Loaders open" \
        in str(e.value), e.value
    held[0].close()
    del held[1]
    wait_for(lambda: int(d.stats()["clients.attached"]) == 6, "two rings let go")
    with ringfeed.Loader("test", batch_size=100, socket=d.sock, output="numpy", depth=2) as ld:
        assert len(ld) == 100
    del held
    wait_for(lambda: int(d.stats()["clients.attached"]) == 0, "every ring let go")


def test_the_eval_split_under_torchrun_is_documented_and_rank0_validation_works(daemon):
    guide = open(os.path.join(os.path.dirname(__file__), "../../docs/pytorch.md")).read()
    torchrun = guide.split("## torchrun and DistributedDataParallel", 1)[1].split("\n## ", 1)[0]
    for text in (torchrun, ringfeed.Loader.__doc__):
        assert "rank=0, world_size=1" in text and "eval" in text, text
    # what it shows: under torchrun's environment an eval loader is split,
    # and rank=0, world_size=1 reads the whole set
    code = textwrap.dedent(f"""
        import ringfeed
        split = ringfeed.Loader("test", batch_size=1000, shuffle=False, socket={daemon.sock!r})
        whole = ringfeed.Loader("test", batch_size=1000, shuffle=False, socket={daemon.sock!r},
                                rank=0, world_size=1)
        print(len(split), len(whole), sum(len(whole.last) for _ in whole))
    """)
    env = dict(os.environ, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["5", "10", "10000"]
