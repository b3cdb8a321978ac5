"""test_writer.py - datasets written from Python (ringfeed.Writer, ringfeed.pack)
through ringfeed-pack's own C code, then read back by verify, dump_dataset
and a real daemon:

  1. a torchvision-style dataset (len + getitem giving (image, label)) of
     40 images of mixed sizes and every accepted kind of image (PIL RGB and
     L, numpy HxWx3 and HxW, torch CHW and HWC, PNG and JPEG bytes) packed
     raw passes verify, and the daemon's eval crop of sample i through the
     Python Loader is within test_pixels.py's bound (MAD <= 3 of 255) of
     Pillow's Resize + CenterCrop of the same image;
  2. 32x32 images get image_shape, and transform none gives them exactly;
  3. image_mode raw, jpeg and smart write the very dataset (every file,
     byte for byte) that ringfeed-pack imagefolder writes for the same
     images as PNG files, whether they are given as PIL images or as the
     PNG files' bytes;
  4. a tensor dataset of each dtype holds exactly the values given (numpy,
     torch, nested lists); uint8 also through the Loader;
  5. jobs=1 and jobs=2 write the same bytes;
  6. bad values and labels are refused naming the sample and the field,
     and leave nothing at the path, nor a temporary folder (the older
     layouts need classes; other field sets: test_writer_fields.py);
     so do a KeyboardInterrupt mid-pack and a worker that dies.
"""
import io
import os
import subprocess

import numpy as np
import pytest
import torch
from PIL import Image

import ringfeed
from conftest import dump_records as dump, pack_tool
from test_pixels import assert_clean, image, mad, pil_eval

FIELDS = {"image": ringfeed.Image(), "label": ringfeed.Scalar("int64")}
EVAL = 64


class Folder:
    """What a torchvision dataset looks like to pack(): len, getitem giving
    (image, label), and .classes."""

    def __init__(self, items, classes):
        self.items, self.classes = items, classes

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        make, label = self.items[i]
        return make(), label


def as_kind(px, k):
    """The pixels px (HxWx3 uint8) as the k-th kind of image a dataset may
    give, and the PIL image Pillow would see for it."""
    kind = k % 8
    if kind == 0:
        return Image.fromarray(px, "RGB"), Image.fromarray(px, "RGB")
    if kind == 1:
        return px.copy(), Image.fromarray(px, "RGB")
    if kind == 2:
        return torch.from_numpy(px.transpose(2, 0, 1).copy()), Image.fromarray(px, "RGB")
    if kind == 3:
        return torch.from_numpy(px.copy()), Image.fromarray(px, "RGB")
    if kind == 4:
        gray = Image.fromarray(px, "RGB").convert("L")
        return gray, gray.convert("RGB")
    if kind == 5:
        gray = np.asarray(Image.fromarray(px, "RGB").convert("L"))
        return gray.copy(), Image.fromarray(gray, "L").convert("RGB")
    buf = io.BytesIO()
    if kind == 6:
        Image.fromarray(px, "RGB").save(buf, "PNG")
    else:
        Image.fromarray(px, "RGB").save(buf, "JPEG", quality=92)
    data = buf.getvalue()
    return data, Image.open(io.BytesIO(data)).convert("RGB")


def mixed(n=40):
    """n images of mixed sizes and kinds: (dataset items, Pillow's views)."""
    items, refs = [], []
    for k in range(n):
        w, h = 40 + (k * 37) % 200, 30 + (k * 53) % 170
        if k % 8 in (2, 3) and (w == 3 or h == 3):
            w += 1
        value, ref = as_kind(image(w, h, k), k)
        items.append(((lambda v=value: v), k % 4))
        refs.append(ref)
    return items, refs


def leftovers(parent, name):
    """What a pack left in parent: the path itself or a hidden temporary."""
    return [f for f in os.listdir(parent) if f == name or f.startswith(f".{name}.tmp")]


def files_of(ds):
    return {f: open(os.path.join(ds, f), "rb").read() for f in sorted(os.listdir(ds))}


def verify(ds):
    r = subprocess.run([pack_tool(), "verify", ds], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def manifest(ds):
    return open(os.path.join(ds, "MANIFEST")).read().splitlines()


def numpy_of(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


# ---- images -----------------------------------------------------------------

def test_pack_raw_served_as_pillow_sees_it(tmp_path, daemon_factory):
    items, refs = mixed(40)
    ds = str(tmp_path / "ds")
    st = ringfeed.pack(Folder(items, ["a", "b", "c", "d"]), ds, FIELDS, image_mode="raw",
                       progress=False)
    assert st["records"] == 40 and st["image_shape"] is None
    raw = sum(1 for k in range(40) if k % 8 != 7)          # all but the JPEG bytes
    assert st["raw_images"] == raw
    assert "40 good, 0 problems" in verify(ds)
    lines = manifest(ds)
    assert f"raw_images {raw}" in lines and "classes 4" in lines and "class 2 c" in lines
    assert not any(ln.startswith("image_shape") for ln in lines)
    d = daemon_factory({"mixed": ds}, workers=2)
    loader = ringfeed.Loader("mixed", batch_size=40, transform="eval", size=EVAL,
                             shuffle=False, socket=d.sock, output="numpy")
    images, labels = next(iter(loader))
    images, labels = numpy_of(images), numpy_of(labels)
    assert images.shape == (40, 3, EVAL, EVAL), images.shape
    assert labels.tolist() == [k % 4 for k in range(40)]
    worst = 0.0
    for k in range(40):
        m = mad(images[k].transpose(1, 2, 0), pil_eval(refs[k], size=EVAL))
        worst = max(worst, m)
        assert m <= 3.0, f"sample {k} ({refs[k].size}, kind {k % 8}): MAD {m:.3f} > 3"
    print(f"\nworst eval MAD vs Pillow: {worst:.3f}")
    del images, labels
    loader.close()
    assert_clean(d)


def test_one_size_gets_image_shape_and_none_is_exact(tmp_path, daemon_factory):
    pxs = [image(32, 32, 200 + k) for k in range(12)]
    ds = str(tmp_path / "small")
    with ringfeed.Writer(ds, FIELDS, classes=3) as w:
        for k, px in enumerate(pxs):
            w.write({"image": Image.fromarray(px, "RGB"), "label": k % 3})
    assert "image_shape 32x32" in manifest(ds)
    verify(ds)
    d = daemon_factory({"small": ds}, workers=1)
    loader = ringfeed.Loader("small", batch_size=12, transform="none", shuffle=False,
                             socket=d.sock, output="numpy")
    images, labels = next(iter(loader))
    images = numpy_of(images)
    assert images.shape == (12, 3, 32, 32)
    assert np.array_equal(images, np.stack(pxs).transpose(0, 3, 1, 2))
    assert numpy_of(labels).tolist() == [k % 3 for k in range(12)]
    del images, labels
    loader.close()
    assert_clean(d)


@pytest.fixture(scope="module")
def png_folder(tmp_path_factory):
    """An ImageFolder tree of PNGs of sizes around smart's threshold."""
    root = tmp_path_factory.mktemp("folder")
    made = []
    for k in range(14):
        cls = ["cats", "dogs"][k % 2]
        os.makedirs(root / "src" / cls, exist_ok=True)
        side = 20 + 4 * k                 # 400 to 5476 pixels
        path = root / "src" / cls / f"{k:02d}.png"
        Image.fromarray(image(side, side + k % 3, 500 + k), "RGB").save(path)
        made.append((str(path), k % 2))
    made.sort()                           # ImageFolder's order
    return root, made


@pytest.mark.parametrize("mode", ["raw", "jpeg", "smart", "raw-uncompressed"])
def test_image_modes_write_what_the_cli_writes(png_folder, mode, tmp_path):
    root, made = png_folder
    opts = {"raw": [], "jpeg": ["--quality", "85"],
            "smart": ["--quality", "85", "--smart-pixels", "2000"],
            "raw-uncompressed": ["--raw-codec", "none"]}[mode]
    cli = str(tmp_path / "cli")
    # ringfeed.pack records no source list (its items need not be files):
    # the CLI's pack without one is the same folder
    subprocess.run([pack_tool(), "imagefolder", "--no-sources", "--image-mode",
                    mode.split("-")[0], *opts, str(root / "src"), cli], check=True,
                   capture_output=True)
    kw = {"image_mode": mode.split("-")[0], "quality": 85, "progress": False}
    if mode == "smart":
        kw["smart_pixels"] = 2000
    if mode == "raw-uncompressed":
        kw["raw_codec"] = "none"
        assert "codec none" in open(os.path.join(cli, "MANIFEST")).read().splitlines()
        mode = "raw"
    pil = [(lambda p=p: Image.open(p), label) for p, label in made]
    raw = [(lambda p=p: open(p, "rb").read(), label) for p, label in made]
    for name, items in (("pil", pil), ("bytes", raw)):
        out = str(tmp_path / name)
        st = ringfeed.pack(Folder(items, ["cats", "dogs"]), out, FIELDS, **kw)
        want = {"raw": 14, "jpeg": 0,
                "smart": sum(1 for p, _ in made if np.prod(Image.open(p).size) <= 2000)}[mode]
        assert st["raw_images"] == want
        assert 0 < want < 14 or mode != "smart"
        assert files_of(out) == files_of(cli), f"{mode}, {name}: differs from ringfeed-pack"
    recs = dump(cli)
    assert sum(r.startswith(b"RFPX") for _, r in recs) == want
    assert sum(r.startswith(b"\xff\xd8") for _, r in recs) == 14 - want


# ---- tensors ----------------------------------------------------------------

DTYPES = ["uint8", "int8", "int16", "int32", "float32", "float64"]


def tensor_values(dtype, k):
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    a = np.arange(20, dtype=np.float64).reshape(4, 5) * (k + 1)
    a = np.clip(a, 0, 100).astype(dtype)
    a[0, 0], a[3, 4] = info.min, info.max
    if np.dtype(dtype).kind == "f":
        a[1, 1], a[2, 2] = np.nan, -np.inf
        a[1, 2] = info.tiny
    return a


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_dtypes_exact(dtype, tmp_path):
    fields = {"x": ringfeed.Tensor(dtype, (4, 5)), "y": ringfeed.Scalar("int64")}
    values = [tensor_values(dtype, k) for k in range(9)]
    kinds = [lambda a: a, lambda a: torch.from_numpy(a.copy()), lambda a: a.tolist()]
    ds = str(tmp_path / dtype)
    with ringfeed.Writer(ds, fields, classes=5) as w:
        for k, a in enumerate(values):
            w.write((kinds[k % 3](a), k % 5))
    verify(ds)
    lines = manifest(ds)
    assert "kind tensor" in lines and "codec zstd" in lines, lines
    rows = dump(ds)
    assert [label for label, _ in rows] == [k % 5 for k in range(9)]
    for k, (_, rec) in enumerate(rows):
        assert rec == values[k].astype(np.dtype(dtype).newbyteorder("<")).tobytes(), k
    # exact conversions from other types are taken; a lossy one is not
    if dtype != "uint8":
        fine = np.arange(20, dtype=np.uint8).reshape(4, 5)
        with ringfeed.Writer(str(tmp_path / "fine"), fields, classes=5) as w:
            w.write((fine, 0))
        assert dump(str(tmp_path / "fine"))[0][1] == fine.astype(
            np.dtype(dtype).newbyteorder("<")).tobytes()


@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_tensor_u8_through_the_loader(tmp_path, daemon_factory, codec):
    """raw_codec is the records' codec for a Tensor and a label too (it was
    silently ignored there: every such pack was zstd)."""
    fields = {"x": ringfeed.Tensor(np.uint8, (6, 7)), "y": ringfeed.Scalar("int64")}
    rng = np.random.default_rng(3)
    values = [rng.integers(0, 256, (6, 7), dtype=np.uint8) for _ in range(10)]
    ds = str(tmp_path / "u8")
    ringfeed.pack([(v, k % 2) for k, v in enumerate(values)], ds, fields, classes=2,
                  progress=False, raw_codec=codec)
    assert f"codec {codec}" in manifest(ds)
    assert [rec for _, rec in dump(ds)] == [v.tobytes() for v in values]
    d = daemon_factory({"u8": ds}, workers=1)
    loader = ringfeed.Loader("u8", batch_size=10, shuffle=False, socket=d.sock,
                             output="numpy")
    x, y = next(iter(loader))
    x, y = numpy_of(x), numpy_of(y)
    assert x.shape == (10, 1, 6, 7), x.shape          # a channel axis, as for IDX
    assert np.array_equal(x[:, 0], np.stack(values))
    assert y.tolist() == [k % 2 for k in range(10)]
    del x, y
    loader.close()
    assert_clean(d)


# ---- jobs -------------------------------------------------------------------

def test_jobs_write_the_same_bytes(tmp_path):
    items, _ = mixed(40)
    outs = []
    for jobs in (1, 2, 3):
        out = str(tmp_path / f"j{jobs}")
        ringfeed.pack(Folder(items, ["a", "b", "c", "d"]), out, FIELDS, jobs=jobs,
                      image_mode="smart", smart_pixels=9000, shard_size=65536,
                      progress=False)
        outs.append(files_of(out))
    assert len(outs[0]) > 3, list(outs[0])            # several shards
    assert outs[0] == outs[1] == outs[2]
    # an iterable without len/getitem: the same again
    out = str(tmp_path / "iter")
    ringfeed.pack((s for s in Folder(items, None)), out, FIELDS, jobs=2,
                  classes=["a", "b", "c", "d"], image_mode="smart", smart_pixels=9000,
                  shard_size=65536, progress=False)
    assert files_of(out) == outs[0]


def test_progress_line(tmp_path, capfd):
    items, _ = mixed(5)
    ringfeed.pack(Folder(items, ["a", "b", "c", "d"]), str(tmp_path / "p"), FIELDS,
                  progress=True)
    err = capfd.readouterr().err
    assert "ringfeed.pack: 5/5 (100%) samples" in err, err


# ---- refusals ---------------------------------------------------------------

def refused(tmp_path, exc, match, fn):
    with pytest.raises(exc, match=match) as e:
        fn(str(tmp_path / "out"))
    assert leftovers(str(tmp_path), "out") == [], os.listdir(tmp_path)
    return e.value


def test_bad_values_name_the_sample_and_field(tmp_path):
    tfields = {"x": ringfeed.Tensor("int32", (2, 3)), "y": ringfeed.Scalar("int64")}
    good = np.zeros((2, 3), np.int32)
    for jobs in (1, 2):
        samples = [(good, 0)] * 5 + [(np.zeros((3, 2), np.int32), 0)] + [(good, 0)] * 3
        e = refused(tmp_path, ringfeed.SampleError,
                    r"sample 5, field 'x': shape \(3, 2\), the field's is \(2, 3\)",
                    lambda p: ringfeed.pack(samples, p, tfields, classes=2, jobs=jobs))
        assert (e.index, e.field) == (5, "x")
    samples = [(good, 0)] * 3 + [(good, 2)]
    e = refused(tmp_path, ringfeed.SampleError, r"sample 3, field 'y': label 2 is outside",
                lambda p: ringfeed.pack(samples, p, tfields, classes=2))
    assert (e.index, e.field) == (3, "y")
    samples = [(good, 0), (np.zeros((2, 3), np.float64), 1)]
    refused(tmp_path, ringfeed.SampleError,
            r"sample 1, field 'x': float64 values into a int32 field",
            lambda p: ringfeed.pack(samples, p, tfields, classes=2))
    samples = [(good, 0), (np.full((2, 3), 2**40), 1)]
    refused(tmp_path, ringfeed.SampleError, r"sample 1, field 'x': int64 value 1099511627776",
            lambda p: ringfeed.pack(samples, p, tfields, classes=2))
    samples = [(good, 0), (good, 1.0)]
    refused(tmp_path, ringfeed.SampleError, r"sample 1, field 'y': .*not a float",
            lambda p: ringfeed.pack(samples, p, tfields, classes=2))
    samples = [(good, 0), (good, 1, 2)]
    refused(tmp_path, ringfeed.SampleError, r"sample 1: a tuple of 3 values",
            lambda p: ringfeed.pack(samples, p, tfields, classes=2))
    # images
    ambiguous = torch.zeros((3, 10, 3), dtype=torch.uint8)
    samples = [(np.zeros((4, 4, 3), np.uint8), 0), (ambiguous, 0)]
    refused(tmp_path, ringfeed.SampleError, r"sample 1, field 'image': .*reads as CHW and as HWC",
            lambda p: ringfeed.pack(samples, p, FIELDS, classes=1))
    samples = [(torch.zeros((3, 4, 4)), 0)]
    refused(tmp_path, ringfeed.SampleError, r"sample 0, field 'image': a torch torch.float32",
            lambda p: ringfeed.pack(samples, p, FIELDS, classes=1))
    samples = [(np.zeros((4, 4, 3), np.uint8), 0), (b"not an image", 0)]
    refused(tmp_path, ringfeed.SampleError, r"sample 1, field 'image': ",
            lambda p: ringfeed.pack(samples, p, FIELDS, classes=1, jobs=2))
    samples = [{"image": np.zeros((4, 4, 3), np.uint8), "labels": 0}]
    refused(tmp_path, ringfeed.SampleError, r"sample 0: a dict with fields",
            lambda p: ringfeed.pack(samples, p, FIELDS, classes=1))


def test_older_layouts_need_classes(tmp_path):
    """The jpeg and tensor layouts need classes (their label is the shard
    entry's); any other field set writes kind fields
    (test_writer_fields.py)."""
    refused(tmp_path, ValueError, "classes= is required",
            lambda p: ringfeed.pack([(np.zeros((2, 2), np.uint8), 0)], p, FIELDS))
    refused(tmp_path, ValueError, "classes= is required",
            lambda p: ringfeed.Writer(p, {"x": ringfeed.Tensor("uint8", 2),
                                          "y": ringfeed.Scalar("int64")}))
    with pytest.raises(ValueError, match="Scalar dtype float32"):
        ringfeed.Scalar("float32")
    with pytest.raises(ValueError, match="Tensor dtype complex64"):
        ringfeed.Tensor("complex64", (3,))


def test_writer_aborts_on_exception_and_survives_a_refusal(tmp_path):
    out = str(tmp_path / "w")
    with pytest.raises(ZeroDivisionError):
        with ringfeed.Writer(out, FIELDS, classes=2) as w:
            w.write((np.zeros((4, 4, 3), np.uint8), 1))
            assert os.path.isdir(w._w.tmpdir)
            1 / 0
    assert leftovers(str(tmp_path), "w") == []
    with ringfeed.Writer(out, FIELDS, classes=2) as w:
        with pytest.raises(ringfeed.SampleError, match="sample 0, field 'label'"):
            w.write((np.zeros((4, 4, 3), np.uint8), 7))
        w.write((np.zeros((4, 4, 3), np.uint8), 1))
    assert [label for label, _ in dump(out)] == [1]
    with pytest.raises(ringfeed.Error, match="exists"):
        ringfeed.Writer(out, FIELDS, classes=2)


class Interrupted(Folder):
    def __getitem__(self, i):
        if i == 10:
            raise KeyboardInterrupt
        return super().__getitem__(i)


class Dies(Folder):
    def __getitem__(self, i):
        if i == 10:
            os._exit(3)
        return super().__getitem__(i)


def pool_threads():
    """The process pools' manager threads still alive: a pack must leave
    none, or the interpreter's exit waits on them (a CI run hung so)."""
    import concurrent.futures.process as cfp
    import threading
    return [t for t in threading.enumerate() if isinstance(t, cfp._ExecutorManagerThread)]


def test_pool_broken_at_submit(tmp_path, monkeypatch):
    """A worker's death can be seen first by submit() rather than by a
    result() (a CI run saw the pool's own message so): the same refusal,
    nothing left behind."""
    import concurrent.futures as cf
    from concurrent.futures.process import BrokenProcessPool

    class Breaks(cf.ProcessPoolExecutor):
        calls = 0

        def submit(self, *a, **k):
            Breaks.calls += 1
            if Breaks.calls == 10:
                raise BrokenProcessPool("A child process terminated abruptly")
            return super().submit(*a, **k)

    monkeypatch.setattr(cf, "ProcessPoolExecutor", Breaks)
    items, _ = mixed(200)
    refused(tmp_path, RuntimeError, "an encoding worker died",
            lambda p: ringfeed.pack(Folder(items, ["a", "b", "c", "d"]), p, FIELDS, jobs=2,
                                    progress=False))
    assert Breaks.calls == 10
    assert pool_threads() == []


@pytest.mark.parametrize("jobs", [1, 2])
def test_interrupted_pack_leaves_nothing(tmp_path, jobs):
    items, _ = mixed(30)
    refused(tmp_path, KeyboardInterrupt, "",
            lambda p: ringfeed.pack(Interrupted(items, ["a", "b", "c", "d"]), p, FIELDS,
                                    jobs=jobs, progress=False))
    assert pool_threads() == []


def test_dead_worker_leaves_nothing(tmp_path):
    items, _ = mixed(30)
    refused(tmp_path, RuntimeError, "an encoding worker died",
            lambda p: ringfeed.pack(Dies(items, ["a", "b", "c", "d"]), p, FIELDS, jobs=2,
                                    progress=False))
    assert pool_threads() == []
