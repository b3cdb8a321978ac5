"""test_pack_webdataset.py - `ringfeed-pack webdataset`: WebDataset tar
shards written by Python's tarfile in WebDataset's layout, packed and read
back sample by sample with `ringfeed-pack show --json`:

  1. jpg, seg.png, cls, txt, json and npy members over two shards pack to
     the same samples: labels, bytes and tensors exactly (a big-endian
     .npy too), PNG pixels exactly, each JPEG the record ringfeed.Writer
     makes of the same file (the imagefolder packer's re-encoding);
  2. --fields picks a subset of extensions, in its order;
  3. a missing member, an extension twice, a key that comes back, a .cls
     that is no integer and a non-tar input fail naming the tar, the
     member or key, leaving nothing; --skip-bad skips and counts them;
  4. npy shapes: a tensor of the first sample's shape, another shape is
     a bad sample naming --ragged; --ragged makes rows of the first
     dimension;
  5. --shard-size rolls shards over; usage errors exit 2.
"""
import io
import json
import os
import subprocess
import tarfile

import numpy as np
from PIL import Image as PILImage

import ringfeed
from conftest import pack_tool
from test_writer import leftovers, verify


def show(ds, i):
    r = subprocess.run([pack_tool(), "show", ds, str(i), "--json"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return {f["name"]: f for f in json.loads(r.stdout)["fields"]}


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def jpeg_bytes(k):
    y, x = np.mgrid[0:20 + k, 0:24 + 2 * k]
    px = np.stack([(x * 9 + k) % 256, (y * 7) % 256, ((x + y) * 5) % 256], -1).astype(np.uint8)
    buf = io.BytesIO()
    PILImage.fromarray(px).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def png_bytes(k):
    px = np.random.default_rng(k).integers(0, 256, (6 + k, 5, 3), dtype=np.uint8)
    buf = io.BytesIO()
    PILImage.fromarray(px).save(buf, "PNG")
    return buf.getvalue(), px


def sample(k):
    """Members of sample k (extension -> bytes) and what each must read back as."""
    png, px = png_bytes(k)
    arr = (np.arange(6, dtype=np.float32).reshape(2, 3) * (k + 1) - 2.5)
    npy = arr.astype(">f4") if k == 4 else arr          # one big-endian array
    text = f"café {k}"
    meta = json.dumps({"k": k, "name": f"s{k}"})
    members = {"jpg": jpeg_bytes(k), "seg.png": png, "cls": f" {k * 1000 - 7}\n".encode(),
               "txt": text.encode(), "json": meta.encode(), "npy": npy_bytes(npy)}
    want = {"cls": k * 1000 - 7, "txt": text.encode(), "json": meta.encode(), "npy": arr,
            "seg_png": px}
    return members, want


def write_tar(path, samples):
    """samples: [(key, [(ext, bytes), ...])], members in that order."""
    with tarfile.open(path, "w") as t:
        for key, members in samples:
            for ext, data in members:
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))


def pack(*args):
    return subprocess.run([pack_tool(), "webdataset", *map(str, args)], capture_output=True,
                          text=True)


def two_shards(tmp_path, n=6):
    tars, wants = [], []
    for s in range(2):
        rows = []
        for k in range(s * n // 2, (s + 1) * n // 2):
            members, want = sample(k)
            rows.append((f"part/{k:06d}", list(members.items())))
            wants.append((members, want))
        tars.append(tmp_path / f"shard-{s:04d}.tar")
        write_tar(tars[-1], rows)
    return tars, wants


def test_round_trip(tmp_path):
    tars, wants = two_shards(tmp_path)
    out = tmp_path / "ds"
    r = pack(*tars, out)
    assert r.returncode == 0, r.stderr
    assert "samples  6 from 36 members of 2 tars; 0 bad samples skipped" in r.stdout
    verify(str(out))
    manifest = open(out / "MANIFEST").read()
    for line in ("field jpg image", "field seg_png image", "field cls scalar\n",
                 "field txt bytes", "field json bytes", "field npy tensor dtype=f32 shape=2x3"):
        assert line in manifest, manifest

    # the JPEGs as ringfeed.Writer stores the same files
    ref = tmp_path / "ref"
    with ringfeed.Writer(str(ref), {"jpg": ringfeed.Image(), "txt": ringfeed.Bytes()}) as w:
        for members, _ in wants:
            w.write({"jpg": members["jpg"], "txt": b""})

    for i, (members, want) in enumerate(wants):
        got = show(str(out), i)
        assert list(got) == ["jpg", "seg_png", "cls", "txt", "json", "npy"]
        assert got["cls"]["value"] == want["cls"]
        assert bytes.fromhex(got["txt"]["hex"]) == want["txt"]
        assert bytes.fromhex(got["json"]["hex"]) == want["json"]
        assert got["npy"]["shape"] == [2, 3]
        assert got["npy"]["values"] == want["npy"].ravel().tolist()
        seg = got["seg_png"]
        assert seg["format"] == "rfpx"
        assert (seg["height"], seg["width"]) == want["seg_png"].shape[:2]
        assert seg["values"] == want["seg_png"].ravel().tolist()
        jpg, jref = got["jpg"], show(str(ref), i)["jpg"]
        assert jpg["format"] == "jpeg"
        with PILImage.open(io.BytesIO(members["jpg"])) as im:
            assert (jpg["width"], jpg["height"]) == im.size
        assert (jpg["bytes"], jpg["crc32c"]) == (jref["bytes"], jref["crc32c"])


def test_fields_subset(tmp_path):
    tars, wants = two_shards(tmp_path, n=4)
    out = tmp_path / "ds"
    r = pack("--fields", "cls,.JPG,npy", *tars, out)
    assert r.returncode == 0, r.stderr
    assert "left out 12 members not in --fields" in r.stdout
    for i, (_, want) in enumerate(wants):
        got = show(str(out), i)
        assert list(got) == ["cls", "jpg", "npy"]
        assert got["cls"]["value"] == want["cls"]


def bad_case(tmp_path, name, rows):
    good = [(f"k{k}", [("cls", b"%d" % k), ("txt", b"t%d" % k)]) for k in range(3)]
    tar = tmp_path / f"{name}.tar"
    write_tar(tar, good[:1] + rows + good[1:])
    return tar


BAD = {
    "missing": ([("x1", [("cls", b"1")])], "key x1: the sample has no .txt member"),
    "twice": ([("x2", [("cls", b"1"), ("txt", b"a"), ("cls", b"2")])],
              "member x2.cls (key x2): its extension comes twice"),
    "extra": ([("x3", [("cls", b"1"), ("txt", b"a"), ("wav", b"..")])],
              "member x3.wav (key x3): its extension is not one of the first sample's"),
    "again": ([("x4", [("cls", b"1"), ("txt", b"a")]), ("x5", [("cls", b"1"), ("txt", b"a")]),
               ("x4", [("txt", b"b"), ("cls", b"1")])],
              "member x4.txt (key x4): its key came earlier in this tar"),
    "notint": ([("x6", [("cls", b"12a"), ("txt", b"a")])],
               "member x6.cls (key x6): byte 2 (0x61) is not a decimal digit"),
}


def test_bad_samples_fail_or_are_skipped(tmp_path):
    for name, (rows, msg) in BAD.items():
        tar = bad_case(tmp_path, name, rows)
        out = tmp_path / f"out-{name}"
        r = pack(tar, out)
        assert r.returncode == 1, (name, r.stdout, r.stderr)
        assert f"{tar}: " in r.stderr and msg in r.stderr, (name, r.stderr)
        assert "--skip-bad" in r.stderr
        assert leftovers(str(tmp_path), f"out-{name}") == []
        r = pack("--skip-bad", tar, out)
        assert r.returncode == 0, (name, r.stderr)
        assert "1 bad sample skipped" in r.stdout, r.stdout
        good = 5 if name == "again" else 3      # the first x4 and x5 are sound
        assert f"samples  {good} from" in r.stdout, r.stdout
        keys = [show(str(out), i)["cls"]["value"] for i in range(good)]
        assert keys[0] == 0 and keys[-1] == 2


def test_not_a_tar(tmp_path):
    bogus = tmp_path / "notes.tar"
    bogus.write_text("this is no tar file, just some words in a file\n" * 20)
    r = pack(bogus, tmp_path / "ds")
    assert r.returncode == 1
    assert f"{bogus}: not a readable tar: " in r.stderr, r.stderr
    assert "Unrecognized archive format" in r.stderr, r.stderr
    assert leftovers(str(tmp_path), "ds") == []
    r = pack(tmp_path / "missing.tar", tmp_path / "ds")
    assert r.returncode == 1 and "missing.tar" in r.stderr


def test_npy_shapes(tmp_path):
    rows = [(f"k{k}", [("npy", npy_bytes(np.arange(3 * (k + 1), dtype="<i2").reshape(k + 1, 3))),
                       ("cls", b"%d" % k)]) for k in range(3)]
    tar = tmp_path / "ragged.tar"
    write_tar(tar, rows)
    r = pack(tar, tmp_path / "t")
    assert r.returncode == 1
    assert ("member k1.npy (key k1): an array of i2 of shape (2, 3), but the field holds i16 "
            "of shape (1, 3) (--ragged") in r.stderr, r.stderr
    r = pack("--ragged", "npy", tar, tmp_path / "r")
    assert r.returncode == 0, r.stderr
    assert "field npy ragged dtype=i16 shape=3 max=3" in open(tmp_path / "r/MANIFEST").read()
    for k in range(3):
        got = show(str(tmp_path / "r"), k)["npy"]
        assert got["rows"] == k + 1 and got["values"] == list(range(3 * (k + 1)))
    r = pack("--ragged", "cls", tar, tmp_path / "x")
    assert r.returncode == 1 and "--ragged cls: not an npy field" in r.stderr


def test_shard_size_and_help(tmp_path):
    rng = np.random.default_rng(7)
    blobs = [rng.integers(0, 256, 300, dtype=np.uint8).tobytes() for _ in range(40)]
    tar = tmp_path / "many.tar"
    write_tar(tar, [(f"k{k:03d}", [("bin", b), ("cls", b"%d" % k)]) for k, b in enumerate(blobs)])
    r = pack("--shard-size", "4K", tar, tmp_path / "ds")
    assert r.returncode == 0, r.stderr
    shards = [l for l in open(tmp_path / "ds/MANIFEST") if l.startswith("shard ")]
    assert len(shards) >= 3, shards
    for k in (0, 17, 39):
        got = show(str(tmp_path / "ds"), k)
        assert bytes.fromhex(got["bin"]["hex"]) == blobs[k] and got["cls"]["value"] == k
    r = pack("--help")
    assert r.returncode == 0 and "--skip-bad" in r.stdout
    r = pack("--shard-size", "1", tar, tmp_path / "x")
    assert r.returncode == 2 and "--shard-size" in r.stderr
    r = pack(tar)
    assert r.returncode == 2 and "OUT_DIR is required" in r.stderr
