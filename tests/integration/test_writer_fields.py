"""test_writer_fields.py - kind-fields datasets written from Python
(ringfeed.Writer, ringfeed.pack with Image, Tensor, Ragged, Bytes, Scalar
fields), read back sample by sample with `ringfeed-pack show --json` and
checked against the values given:

  1. every kind and dtype (images RGB and one-plane u8/u16, masks, boxes,
     ragged with empty samples, bytes and str, tensors of every dtype incl.
     torch.bfloat16, scalars int64 and float64) round-trips exactly; verify
     passes and info lists the fields in the MANIFEST's words; max= is the
     most rows written;
  2. the two older layouts still write kind jpeg / tensor (and the same
     bytes as before: test_writer.py), anything else kind fields;
  3. max_side shrinks an image (box average), its mask follows nearest
     neighbour (as Pillow's NEAREST) and its boxes scale with it;
  4. a sample over a field's cap= or max= is refused with the figures,
     as are bad values (dtype, shape, NaN boxes, mask size, ...), naming
     the sample index and the field, leaving nothing at the path;
  5. a torchvision-style map dataset of dicts packs to the same bytes with
     jobs=1 and jobs=2; an interrupted pack leaves nothing that serves.
"""
import io
import json
import os
import subprocess

import numpy as np
import pytest
import torch
from PIL import Image as PILImage

import ringfeed
from conftest import pack_tool
from test_writer import files_of, leftovers, manifest, refused, verify

_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    """CRC-32C (Castagnoli), as proto/crc32c.c computes it."""
    c = 0xFFFFFFFF
    for b in bytes(data):
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return f"{c ^ 0xFFFFFFFF:08x}"


def show(ds, i):
    """Sample i's fields by name, from ringfeed-pack show --json."""
    r = subprocess.run([pack_tool(), "show", ds, str(i), "--json"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["index"] == i
    return {f["name"]: f for f in doc["fields"]}, doc


def pixels_of(img):
    return np.ascontiguousarray(np.asarray(img.convert("RGB") if hasattr(img, "convert")
                                           else img, dtype=np.uint8))


DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


def tensor_value(dtype, k):
    """A (2, 3) value of dtype for sample k, given in one of the accepted
    forms (numpy, torch, lists), and the float64 values it must read back as."""
    base = np.arange(6).reshape(2, 3) * (k + 1) - 5
    if dtype == "bfloat16":
        t = torch.tensor(base / 4, dtype=torch.bfloat16)
        return t, t.float().numpy().astype(np.float64)
    if dtype.startswith("float"):
        a = (base / 4).astype(dtype)
        if dtype == "float64":
            a[0, 0] = 1 / 3
    else:
        a = base.astype(dtype)
    form = k % 3
    value = a if form == 0 else torch.from_numpy(a.copy()) if form == 1 else a.tolist()
    if form == 2 and dtype == "float16":
        value = a                     # float lists are float64, and 1/4 steps are exact anyway
    return value, a.astype(np.float64)


def every_kind_fields():
    f = {"image": ringfeed.Image(),
         "mask": ringfeed.Image(mask="image"),
         "depth": ringfeed.Image(channels=1, dtype="uint16"),
         "boxes": ringfeed.Ragged("float32", (4,), boxes="image"),
         "pts": ringfeed.Ragged("int16", (2,), cap=64),
         "caption": ringfeed.Bytes(max=100)}
    for d in DTYPES:
        f["t_" + d] = ringfeed.Tensor(d, (2, 3))
    f["label"] = ringfeed.Scalar("int64")       # 16 fields: SCHEMA_MAX_FIELDS
    return f


def every_kind_sample(k):
    rng = np.random.default_rng(k)
    h, w = 10 + k, 12 + 2 * k
    px = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    image = [PILImage.fromarray(px), px, torch.from_numpy(px.transpose(2, 0, 1).copy())][k % 3]
    mask = rng.integers(0, 5, (h, w), dtype=np.uint8)
    depth = rng.integers(0, 65536, (h + 1, w), dtype=np.uint16)
    nbox = k % 3                               # 0 rows for k = 0, 3, 6
    boxes = [[1.5 * j, j, 2.5 * j + 3, j + 4] for j in range(nbox)]
    pts = rng.integers(-300, 300, (k % 4, 2), dtype=np.int16)
    caption = "" if k == 2 else ("café " * k if k % 2 else ("x" * k).encode())
    s = {"image": image, "mask": torch.from_numpy(mask) if k % 2 else mask,
         "depth": depth, "boxes": boxes, "pts": pts, "caption": caption}
    want = {"image": px, "mask": mask, "depth": depth, "boxes": np.array(boxes, np.float32),
            "pts": pts, "caption": caption.encode() if isinstance(caption, str) else caption}
    for d in DTYPES:
        s["t_" + d], want["t_" + d] = tensor_value(d, k)
    s["label"], want["label"] = k * 1000003 - 2**40, k * 1000003 - 2**40
    return s, want


def test_every_kind_round_trips(tmp_path):
    ds = str(tmp_path / "ds")
    fields = every_kind_fields()
    wants = []
    with ringfeed.Writer(ds, fields) as w:
        for k in range(7):
            s, want = every_kind_sample(k)
            w.write(s if k % 2 else tuple(s[n] for n in fields))
            wants.append(want)
    text = manifest(ds)
    assert "kind fields" in text and "fields 16" in text
    assert "field mask image channels=1 mask=image" in text
    assert "field depth image dtype=u16 channels=1" in text
    assert "field boxes ragged dtype=f32 shape=4 max=2 boxes=image" in text   # most written
    assert "field pts ragged dtype=i16 shape=2 max=3 cap=64" in text
    assert "field caption bytes max=30" in text                               # 6 x "café "
    assert "field t_bfloat16 tensor dtype=bf16 shape=2x3" in text
    assert "field label scalar" in text
    assert "field image image\n" in "\n".join(text) + "\n"              # sizes vary: no shape
    verify(ds)
    info = subprocess.run([pack_tool(), "info", ds], capture_output=True, text=True,
                          check=True).stdout
    assert "fields    16 (the MANIFEST's field lines" in info
    assert "  field   boxes ragged dtype=f32 shape=4 max=2 boxes=image" in info
    text = subprocess.run([pack_tool(), "show", ds, "4"], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert text[0].startswith(f"sample 4 of {ds} (fields dataset, ")
    assert text[1].startswith("image            image  u8    14x20 (HxW) x3 RFPX pixels")
    assert text[4] == "boxes            ragged f32   1 row of (4,), 16 bytes, crc32c " + \
        crc32c(wants[4]["boxes"].tobytes()) + "  [0 0 3 4]"
    assert text[6] == "caption          bytes  u8    4 bytes, crc32c " + \
        crc32c(b"xxxx") + '  "xxxx"'
    assert text[-1] == f"label            scalar i64   {wants[4]['label']}"
    for k, want in enumerate(wants):
        got, doc = show(ds, k)
        assert doc["kind"] == "fields" and list(got) == list(fields)
        im = got["image"]
        assert (im["format"], im["height"], im["width"], im["channels"]) == \
            ("rfpx", want["image"].shape[0], want["image"].shape[1], 3)
        assert im["pixels_crc32c"] == crc32c(want["image"].tobytes()), k
        assert got["mask"]["values"] == want["mask"].ravel().tolist()
        d = got["depth"]
        assert (d["height"], d["width"], d["channels"], d["dtype"]) == \
            (want["depth"].shape[0], want["depth"].shape[1], 1, "u16")
        assert d["pixels_crc32c"] == crc32c(want["depth"].astype("<u2").tobytes())
        assert d["values"] == want["depth"].ravel().tolist()
        b = got["boxes"]
        assert b["rows"] == len(want["boxes"]) and b["shape"] == [len(want["boxes"]), 4]
        assert b["values"] == want["boxes"].astype(np.float64).ravel().tolist()
        assert got["pts"]["rows"] == len(want["pts"])
        assert got["pts"]["values"] == want["pts"].ravel().tolist()
        assert bytes.fromhex(got["caption"]["hex"]) == want["caption"]
        assert got["caption"]["rows"] == len(want["caption"])
        for dt in DTYPES:
            t = got["t_" + dt]
            assert t["shape"] == [2, 3]
            assert t["values"] == want["t_" + dt].ravel().tolist(), dt
        assert got["label"]["value"] == want["label"]


def test_the_older_layouts_stay_and_others_are_fields(tmp_path):
    img = np.zeros((4, 5, 3), np.uint8)
    ds = str(tmp_path / "jpeg")
    ringfeed.pack([(img, 1)], ds, {"im": ringfeed.Image(), "y": ringfeed.Scalar("int64")},
                  classes=2)
    assert "kind jpeg" in manifest(ds)
    info = subprocess.run([pack_tool(), "info", ds], capture_output=True, text=True,
                          check=True).stdout
    assert "fields    2 (implicit: the label is the shard entry's" in info
    assert "  field   image image shape=4x5\n  field   label scalar\n" in info
    got, doc = show(ds, 0)
    assert doc["kind"] == "jpeg" and got["label"]["value"] == 1 and \
        got["label"]["from"] == "entry"
    assert got["image"]["pixels_crc32c"] == crc32c(img.tobytes())
    ds = str(tmp_path / "tensor")
    ringfeed.pack([(np.arange(3, dtype=np.int32), 0)], ds,
                  {"x": ringfeed.Tensor("int32", 3), "y": ringfeed.Scalar("int64")}, classes=1)
    assert "kind tensor" in manifest(ds)
    assert show(ds, 0)[0]["tensor"]["values"] == [0, 1, 2]
    # a dtype the older kinds lack, a float label, one field: kind fields
    for name, fields, sample in (
            ("i64", {"x": ringfeed.Tensor("int64", 3), "y": ringfeed.Scalar("int64")},
             (np.arange(3), 0)),
            ("f64label", {"x": ringfeed.Tensor("int32", 3), "y": ringfeed.Scalar("float64")},
             (np.arange(3, dtype=np.int32), 0.5)),
            ("one", {"image": ringfeed.Image()}, (img,))):
        ds = str(tmp_path / name)
        ringfeed.pack([sample, sample], ds, fields)
        assert "kind fields" in manifest(ds), name
        verify(ds)
    assert show(str(tmp_path / "f64label"), 1)[0]["y"]["value"] == 0.5
    assert "field y scalar dtype=f64" in manifest(str(tmp_path / "f64label"))
    # classes with kind fields: the names are recorded, a field named label checked
    ds = str(tmp_path / "classes")
    f = {"image": ringfeed.Image(), "label": ringfeed.Scalar("int64"),
         "text": ringfeed.Bytes()}
    ringfeed.pack([(img, 1, "a")], ds, f, classes=["cat", "dog"])
    assert "class 1 dog" in manifest(ds) and "kind fields" in manifest(ds)
    info = subprocess.run([pack_tool(), "info", ds], capture_output=True, text=True,
                          check=True).stdout
    assert "kind fields: samples per class are not counted" in info and "      1  dog" in info
    e = refused(tmp_path, ringfeed.SampleError, r"sample 1, field 'label': label 2 is outside",
                lambda p: ringfeed.pack([(img, 1, "a"), (img, 2, "b")], p, f, classes=2))
    assert e.index == 1


def test_max_side_shrinks_the_image_its_mask_and_boxes(tmp_path):
    rng = np.random.default_rng(7)
    h, w = 60, 100
    px = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    mask = rng.integers(0, 9, (h, w), dtype=np.uint8)
    boxes = np.array([[10, 20, 50, 40], [0, 0, 100, 60]], np.float32)
    buf = io.BytesIO()
    PILImage.fromarray(px).save(buf, "PNG")
    fields = {"image": ringfeed.Image(max_side=50), "mask": ringfeed.Image(mask="image"),
              "boxes": ringfeed.Ragged("float32", (4,), boxes="image")}
    ds = str(tmp_path / "ds")
    st = ringfeed.pack([(px, mask, boxes), (buf.getvalue(), mask, boxes)], ds, fields)
    verify(ds)
    # one size as stored: shape=HxW on the image fields (verify checks it)
    assert st["image_shapes"] == {"image": (30, 50), "mask": (30, 50)}
    assert "field image image shape=30x50" in manifest(ds)
    assert "field mask image channels=1 shape=30x50 mask=image" in manifest(ds)
    ref = PILImage.fromarray(mask).resize((50, 30), PILImage.NEAREST)
    box = np.asarray(PILImage.fromarray(px).resize((50, 30), PILImage.BOX))
    for i in range(2):
        got, _ = show(ds, i)
        assert (got["image"]["height"], got["image"]["width"]) == (30, 50)
        assert (got["mask"]["height"], got["mask"]["width"]) == (30, 50)
        assert got["mask"]["values"] == np.asarray(ref).ravel().tolist()
        assert got["boxes"]["values"] == (boxes * 0.5).ravel().tolist()
        # the box (area) average: Pillow's BOX within integer rounding
        shrunk = np.array(got["image"]["values"], np.int16).reshape(30, 50, 3)
        assert np.abs(shrunk - box).max() <= 1
        assert got["image"]["pixels_crc32c"] == crc32c(shrunk.astype(np.uint8).tobytes())
    # an odd ratio, where Pillow's NEAREST walk and floor((k + 0.5) * a)
    # part: the masks are Pillow's own (mode L for u8, I for u16)
    px2 = rng.integers(0, 256, (122, 220, 3), dtype=np.uint8)
    m8 = rng.integers(0, 255, (122, 220), dtype=np.uint8)
    m16 = rng.integers(0, 65535, (122, 220), dtype=np.uint16)
    ds4 = str(tmp_path / "odd")
    ringfeed.pack([(px2, m8, m16)], ds4, {"image": ringfeed.Image(max_side=170),
                                          "m8": ringfeed.Image(mask="image"),
                                          "m16": ringfeed.Image(mask="image", dtype="uint16")})
    got = show(ds4, 0)[0]
    assert (got["image"]["height"], got["image"]["width"]) == (94, 170)
    want8 = np.asarray(PILImage.fromarray(m8, "L").resize((170, 94), PILImage.NEAREST))
    want16 = np.asarray(PILImage.fromarray(m16.astype(np.int32), "I")
                        .resize((170, 94), PILImage.NEAREST))
    ys, xs = (np.arange(94) * 2 + 1) * 122 // 188, (np.arange(170) * 2 + 1) * 220 // 340
    assert (m8[ys[:, None], xs[None, :]] != want8).any()     # the case tells them apart
    assert got["m8"]["values"] == want8.ravel().tolist()
    assert got["m16"]["values"] == want16.ravel().tolist()
    verify(ds4)
    # the jpeg layout records max_side as ringfeed-pack imagefolder --max-side does
    ds3 = str(tmp_path / "legacy")
    ringfeed.pack([(px, 0)], ds3, {"image": ringfeed.Image(max_side=50, quality=80),
                                   "label": ringfeed.Scalar("int64")}, classes=1)
    lines = manifest(ds3)
    assert "kind jpeg" in lines and "max_side 50" in lines and "max_side_quality 80" in lines
    legacy = show(ds3, 0)[0]["image"]
    assert (legacy["height"], legacy["width"]) == (30, 50)
    assert legacy["values"] == shrunk.ravel().tolist()       # the same box average
    verify(ds3)
    # a mask of another size is refused naming the sample
    e = refused(tmp_path, ringfeed.SampleError,
                r"sample 1, field 'mask': a mask of 100x59 \(WxH\) for an image of 100x60",
                lambda p: ringfeed.pack([(px, mask, boxes), (px, mask[1:], boxes)], p, fields))
    assert (e.index, e.field) == (1, "mask")


def test_over_cap_and_max_refused_with_the_figures(tmp_path):
    fields = {"tok": ringfeed.Ragged("int32", cap=100), "label": ringfeed.Scalar("int64")}
    samples = [(np.arange(k), k) for k in range(5)] + [(np.arange(1000), 5)]
    for jobs in (1, 2):
        e = refused(tmp_path, ringfeed.SampleError,
                    r"sample 5, field 'tok': 1000 rows, more than the field's cap=100",
                    lambda p: ringfeed.pack(samples, p, fields, jobs=jobs, progress=False))
        assert (e.index, e.field) == (5, "tok")
    fields = {"text": ringfeed.Bytes(max=8)}
    refused(tmp_path, ringfeed.SampleError,
            r"sample 1, field 'text': 9 bytes, more than the field's max=8",
            lambda p: ringfeed.pack([("ok",), ("123456789",)], p, fields))
    # empty samples are fine; the MANIFEST's max is the most rows written (at least 1)
    ds = str(tmp_path / "empty")
    ringfeed.pack([([],), ([],)], ds, {"tok": ringfeed.Ragged("int64", max=5)})
    assert "field tok ragged dtype=i64 max=1" in manifest(ds)
    assert show(ds, 1)[0]["tok"]["rows"] == 0
    verify(ds)


def test_bad_values_name_the_sample_and_field(tmp_path):
    img = np.zeros((4, 4, 3), np.uint8)
    f = {"image": ringfeed.Image(), "boxes": ringfeed.Ragged("float32", (4,), boxes="image"),
         "emb": ringfeed.Tensor("bfloat16", (2,)), "x": ringfeed.Tensor("int16", (2,)),
         "text": ringfeed.Bytes(), "n": ringfeed.Scalar("int64")}
    good = {"image": img, "boxes": [[0, 0, 1, 1]], "emb": [1.0, 2.0], "x": [1, 2],
            "text": "t", "n": 3}
    cases = [
        ("boxes", [[0, 0, float("nan"), 1]], r"box 0 is \[0.0, 0.0, nan, 1.0\]: not finite"),
        ("boxes", [[5, 0, 1, 1]], r"box 0 is .*x1 < x0 or y1 < y0"),
        ("boxes", [[0, 0, 1, 1], [0, 0, 1e39, 1]], r"box 1 is .*: beyond float32"),
        ("boxes", [[0, 0, 1]], r"shape \(1, 3\): rows of the field's shape \(4,\)"),
        ("emb", [1.0, 1.0 / 3], r".*does not fit a bfloat16 field exactly"),
        ("emb", [1.0, 2.0, 3.0], r"shape \(3,\), the field's is \(2,\)"),
        ("x", np.array([1.5, 2.0]), r"float64 values into a int16 field"),
        ("x", [1, 70000], r"int64 value 70000 at \(1,\) does not fit a int16 field exactly"),
        ("text", 5, r"a int: a Bytes field takes bytes or a str"),
        ("n", 2.0, r"2.0: an int64 scalar is an integer, not a float"),
        ("image", np.zeros((4, 4), np.float32), r"a numpy float32 array: images are uint8"),
    ]
    for field, value, match in cases:
        bad = dict(good, **{field: value})
        e = refused(tmp_path, ringfeed.SampleError, rf"sample 2, field '{field}': {match}",
                    lambda p: ringfeed.pack([good, good, bad, good], p, f))
        assert (e.index, e.field) == (2, field)
    refused(tmp_path, ringfeed.SampleError, r"sample 0: a dict with fields",
            lambda p: ringfeed.pack([{"image": img}], p, f))
    # rows=: one row per box, else the sample is refused naming both counts
    fr = {"image": ringfeed.Image(), "boxes": ringfeed.Ragged("float32", (4,), boxes="image"),
          "cls": ringfeed.Ragged("int64", rows="boxes")}
    ok = {"image": img, "boxes": [[0, 0, 1, 1], [1, 1, 2, 2]], "cls": [3, 4]}
    e = refused(tmp_path, ringfeed.SampleError,
                r"sample 1, field 'cls': 1 rows, but its boxes field 'boxes' has 2",
                lambda p: ringfeed.pack([ok, dict(ok, cls=[3]), ok], p, fr))
    assert (e.index, e.field) == (1, "cls")
    # field sets the writer refuses, naming the field
    for fields, match in (
            ({"image": ringfeed.Image(), "m": ringfeed.Image(mask="nope")},
             "field m: mask=nope names no field before it"),
            ({"image": ringfeed.Image(), "m": ringfeed.Image(mask="image"),
              "n": ringfeed.Image(mask="m")},
             "field n: mask= is for an image field of channels=1 naming an earlier image "
             "field that is not a mask"),
            ({"9lives": ringfeed.Image()}, "field name '9lives'"),
            ({"t": ringfeed.Tensor("int8", 2), "b": ringfeed.Ragged("float32", 4, boxes="t")},
             "field b: boxes= is for"),
            ({"image": ringfeed.Image(), "c": ringfeed.Ragged("int64", rows="image")},
             "field c: rows= is for a ragged field naming an earlier boxes field")):
        refused(tmp_path, ValueError, match, lambda p: ringfeed.Writer(p, fields))
    refused(tmp_path, ValueError, r"image_mode='jpeg' is for an RGB Image field",
            lambda p: ringfeed.Writer(p, {"x": ringfeed.Tensor("int8", 2),
                                          "m": ringfeed.Image(channels=1)}, image_mode="jpeg"))
    with pytest.raises(ValueError, match="Scalar dtype float32: use int64 or float64"):
        ringfeed.Scalar("float32")
    with pytest.raises(ValueError, match=r"Image\(channels=1\) is stored as its exact values"):
        ringfeed.Image(channels=1, mode="jpeg")
    with pytest.raises(ValueError, match="cap=4 is less than max=5"):
        ringfeed.Ragged("int8", max=5, cap=4)


class MapOfDicts:
    """A torchvision-style map dataset (len, getitem) of dict samples."""

    def __init__(self, n, stop_at=None):
        self.n, self.stop_at = n, stop_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.stop_at:
            raise KeyboardInterrupt
        rng = np.random.default_rng(i)
        h, w = 20 + i % 7, 30 + i % 5
        return {"image": rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
                "boxes": rng.random((i % 4, 4)).cumsum(axis=1) * 10,
                "caption": f"sample {i}",
                "label": i % 10}


MAP_FIELDS = {"image": ringfeed.Image(mode="smart", smart_pixels=600),
              "boxes": ringfeed.Ragged("float32", (4,), boxes="image"),
              "caption": ringfeed.Bytes(), "label": ringfeed.Scalar("int64")}


def test_map_dataset_of_dicts_jobs_write_the_same_bytes(tmp_path):
    outs = []
    for jobs in (1, 2):
        ds = str(tmp_path / f"j{jobs}")
        st = ringfeed.pack(MapOfDicts(150), ds, MAP_FIELDS, jobs=jobs, progress=False)
        assert st["records"] == 150
        outs.append(files_of(ds))
    assert outs[0] == outs[1]
    verify(str(tmp_path / "j2"))
    got, _ = show(str(tmp_path / "j1"), 17)
    assert bytes.fromhex(got["caption"]["hex"]) == b"sample 17"
    assert got["label"]["value"] == 7
    assert got["image"]["format"] in ("rfpx", "jpeg")


@pytest.mark.parametrize("jobs", [1, 2])
def test_interrupted_pack_leaves_nothing(tmp_path, jobs):
    refused(tmp_path, KeyboardInterrupt, "",
            lambda p: ringfeed.pack(MapOfDicts(100, stop_at=40), p, MAP_FIELDS, jobs=jobs,
                                    progress=False))
    assert leftovers(str(tmp_path), "out") == [] and os.listdir(tmp_path) == []


def test_verify_and_show_name_bad_image_parts(tmp_path):
    """Records that split but whose image parts are wrong (written past the
    Python checks, straight through the extension's DatasetWriter, which
    only splits records): verify counts each, naming record and field."""
    import struct as st
    from ringfeed import _ringfeed

    def rec(*parts):
        return b"".join(st.pack("<I", len(p)) + p for p in parts)

    assert _ringfeed.DatasetWriter.record([b"ab", b"", bytearray(b"c")]) == rec(b"ab", b"", b"c")
    with pytest.raises(ValueError, match="1 to 16 parts, not 17"):
        _ringfeed.DatasetWriter.record([b""] * 17)
    enc = _ringfeed.ImageEncoder()
    rgb, _, _, _ = enc.pixels(np.zeros((4, 5, 3), np.uint8), 5, 4)
    plane = enc.plane(np.zeros((4, 5), np.uint8), 5, 4, 1)
    small = enc.plane(np.zeros((3, 5), np.uint8), 5, 3, 1)
    ds = str(tmp_path / "bad")
    w = _ringfeed.DatasetWriter(ds, "fields", 0, fields=["image image",
                                                         "mask image channels=1 mask=image"])
    w.add(rec(rgb, plane), None)                  # good
    w.add(rec(b"garbage", plane), None)           # neither RFPX nor JPEG
    w.add(rec(plane, plane), None)                # one channel in an RGB field
    w.add(rec(rgb, small), None)                  # mask of another size
    w.finish()
    r = subprocess.run([pack_tool(), "verify", ds], capture_output=True, text=True)
    assert r.returncode == 1
    out = r.stdout
    assert "record 1 at byte" in out and "field image: neither RFPX nor a JPEG" in out
    assert "record 2 at byte" in out and "field image: an RFPX record of 1 channel" in out
    assert "record 3 at byte" in out and \
        "field mask: a mask of 3x5 (HxW) for field image of 4x5" in out
    assert "1 good, 3 problems" in out
    assert show(ds, 0)[0]["mask"]["values"] == [0] * 20
    r = subprocess.run([pack_tool(), "show", ds, "1", "--json"], capture_output=True, text=True)
    assert r.returncode == 1 and "neither RFPX nor a JPEG" in json.loads(r.stdout)["fields"][0]["error"]
    # a shape=HxW the images do not have; set_field_shape on a non-image
    ds = str(tmp_path / "shape")
    w = _ringfeed.DatasetWriter(ds, "fields", 0, fields=["image image", "n scalar"])
    w.add(rec(rgb, b"\0" * 8), None)
    with pytest.raises(ringfeed.Error, match="field 1: shape=HxW is for an image field"):
        w.set_field_shape(1, 4, 5)
    with pytest.raises(ringfeed.Error, match="field image: shape=4x0"):
        w.set_field_shape(0, 4, 0)
    w.set_field_shape(0, 3, 5)
    w.finish()
    assert "field image image shape=3x5" in manifest(ds)
    r = subprocess.run([pack_tool(), "verify", ds], capture_output=True, text=True)
    assert r.returncode == 1 and \
        "field image: 4x5 (HxW), the MANIFEST's shape is 3x5" in r.stdout
