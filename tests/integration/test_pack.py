"""test_pack.py - ringfeed-pack end to end.

Packs Fashion-MNIST (train 60k and test 10k) with every codec and reads every
record back, bit-exact and with its label, through tests/dump_dataset (the
reader library, not the packer); damages packed datasets for `verify` to
find; packs ImageFolder trees holding things that are not JPEGs, empty
classes and unreadable files, checks that the JPEGs are stored re-encoded
losslessly with restart markers (Pillow decodes the same pixels; the
markers read from the bytes) or, with --as-is, byte for byte; packs the
same tree with --jobs 1 to 5 and compares the packs byte for byte, the
warnings and the counts, and where --strict stops; kills a pack midway,
with and without threads; checks argument errors.

The binaries come from the environment (meson sets them): RINGFEED_PACK,
RINGFEED_DUMP; else from RINGFEED_BUILD_DIR.
"""
import gzip
import io
import os
import re
import pty
import shutil
import signal
import struct
import subprocess
import threading
import time

import pytest

BUILD = os.environ.get("RINGFEED_BUILD_DIR",
                       os.path.join(os.path.dirname(__file__), "../../build"))
from conftest import DUMP, PACK, dump_records as dump, pack_run as pack  # noqa: E402
FMNIST = "/usr/share/datasets/fashion-mnist"
NATURE = "/usr/share/backgrounds/mate/nature"
PNG = "/usr/share/backgrounds/mate/desktop/Float-into-MATE.png"
# a file imagefolder skips: not a JPEG, nor a format it decodes (a PNG would
# be packed as its pixels: test_pack_formats.py)
GIF = b"GIF89a" + bytes(20)
FASHION = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
           "Shirt", "Sneaker", "Bag", "Ankle boot"]
SPLITS = {"train": ("train", 60000), "test": ("t10k", 10000)}

# the dataset is a facility (a Debian package scripts/install-deps installs);
# a missing binary is a mis-wired test, which fails (see test_binaries_are_built)
pytestmark = pytest.mark.skipif(not os.path.isdir(FMNIST),
                                reason=f"Fashion-MNIST is not installed ({FMNIST})")


def test_binaries_are_built():
    for path in (PACK, DUMP):
        assert os.access(path, os.X_OK), f"{path} is not built (RINGFEED_BUILD_DIR={BUILD})"


def idx_src(split):
    prefix, _ = SPLITS[split]
    images = gzip.open(f"{FMNIST}/{prefix}-images-idx3-ubyte.gz").read()
    labels = gzip.open(f"{FMNIST}/{prefix}-labels-idx1-ubyte.gz").read()
    return images, labels


def shard_layout(path):
    """(index_off, records) from a shard's header."""
    with open(path, "rb") as f:
        h = f.read(64)
    assert h[:8] == b"RFSHARD\0"
    records, index_off = struct.unpack_from("<QQ", h, 16)
    return index_off, records


def entry(path, rec):
    """(offset, stored_len, decoded_len, label, crc, codec) of an entry."""
    index_off, _ = shard_layout(path)
    with open(path, "rb") as f:
        f.seek(index_off + 32 * rec)
        e = f.read(32)
    return struct.unpack_from("<QIIIIB", e, 0)


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x10]))


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """Fashion-MNIST packed with each codec: {(split, codec): (dir, stdout)}."""
    root = tmp_path_factory.mktemp("packed")
    out = {}
    for split, (prefix, _) in SPLITS.items():
        for codec, extra in (("none", ["--codec", "none"]),
                             ("zstd", ["--codec", "zstd"]),
                             ("dict", ["--codec", "zstd", "--dict"])):
            dest = root / f"{split}-{codec}"
            r = pack("idx", "--images", f"{FMNIST}/{prefix}-images-idx3-ubyte.gz",
                     "--labels", f"{FMNIST}/{prefix}-labels-idx1-ubyte.gz",
                     dest, "--class-names", "fashion-mnist", *extra)
            assert r.returncode == 0, r.stderr
            out[(split, codec)] = (dest, r.stdout)
    return out


@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("codec", ["none", "zstd", "dict"])
def test_fmnist_reads_back_exactly(packed, tmp_path, split, codec):
    dest, summary = packed[(split, codec)]
    n = SPLITS[split][1]
    images, labels = idx_src(split)
    assert f"packed {n} records" in summary
    recs = dump(dest, tmp_path)
    assert len(recs) == n
    assert bytes(label for label, _ in recs) == labels[8:]
    assert all(len(b) == 784 for _, b in recs)
    assert b"".join(b for _, b in recs) == images[16:]

    v = pack("verify", dest)
    assert v.returncode == 0, v.stdout + v.stderr
    assert f"{n} good, 0 problems" in v.stdout

    i = pack("info", dest)
    assert i.returncode == 0, i.stderr
    assert "kind      tensor u8 1x28x28 (784 bytes a sample)" in i.stdout
    assert f"samples   {n} in 1 shard" in i.stdout
    assert f"decoded   {n * 784} bytes" in i.stdout
    for c, name in enumerate(FASHION):
        assert f"  {c:5d}  {labels[8:].count(c):9d}  {name}" in i.stdout
    if codec == "dict":
        size = os.path.getsize(dest / "dict.zstd")
        assert f"codec     zstd with a {size}-byte dictionary" in i.stdout
    else:
        assert not os.path.exists(dest / "dict.zstd")


def test_compression_figures(packed):
    """zstd stores less than none, and the dictionary less than plain zstd."""
    def stored(key):
        out = pack("info", packed[key][0]).stdout
        line = next(x for x in out.splitlines() if x.startswith("stored"))
        return int(line.split()[1])

    for split in SPLITS:
        none, zstd, dict_ = (stored((split, c)) for c in ("none", "zstd", "dict"))
        assert none == SPLITS[split][1] * 784
        assert zstd < none * 0.7
        assert dict_ < zstd


def damaged_copy(packed, tmp_path, shard_size=None):
    """A copy of the test split, zstd, in several shards when asked."""
    if shard_size is None:
        dest = tmp_path / "copy"
        shutil.copytree(packed[("test", "zstd")][0], dest)
        return dest
    dest = tmp_path / "sharded"
    r = pack("idx", "--images", f"{FMNIST}/t10k-images-idx3-ubyte.gz",
             "--labels", f"{FMNIST}/t10k-labels-idx1-ubyte.gz", dest,
             "--shard-size", shard_size)
    assert r.returncode == 0, r.stderr
    return dest


def test_verify_finds_a_flipped_record_byte(packed, tmp_path):
    dest = damaged_copy(packed, tmp_path, shard_size="1M")
    shards = sorted(p for p in os.listdir(dest) if p.startswith("shard-"))
    assert len(shards) >= 3
    shard = dest / shards[1]
    off = entry(shard, 17)[0]
    flip(shard, off + 5)
    v = pack("verify", dest)
    assert v.returncode == 1
    bad = [x for x in v.stdout.splitlines() if not x.startswith("verify:")]
    assert bad == [f"{shard}: record 17 at byte {off}: checksum mismatch"
                   + bad[0].split("checksum mismatch", 1)[1]]
    assert "1 problem" in v.stdout
    # the reader refuses that one sample and no other
    r = subprocess.run([DUMP, dest, tmp_path / "d"], capture_output=True, text=True)
    assert r.returncode == 1 and f"record 17 at byte {off}" in r.stderr


def test_verify_finds_a_flipped_index_byte(packed, tmp_path):
    dest = damaged_copy(packed, tmp_path)
    shard = dest / "shard-00000.rfs"
    index_off, _ = shard_layout(shard)
    flip(shard, index_off + 32 * 1234 + 12)  # entry 1234's decoded length
    v = pack("verify", dest)
    assert v.returncode == 1
    assert f"{shard}: index at byte {index_off}: checksum mismatch" in v.stdout
    assert (f"{shard}: record 1234 (index entry at byte {index_off + 32 * 1234}): "
            "entry checksum mismatch") in v.stdout
    assert "9999 good, 2 problems" in v.stdout
    i = pack("info", dest)
    assert i.returncode == 1 and "index at byte" in i.stderr


def test_verify_finds_a_flipped_header_byte(packed, tmp_path):
    dest = damaged_copy(packed, tmp_path)
    shard = dest / "shard-00000.rfs"
    flip(shard, 20)
    v = pack("verify", dest)
    assert v.returncode == 1
    assert f"{shard}: header at byte 0: checksum mismatch" in v.stdout
    assert f"{shard}: records 0..9999 not checked" in v.stdout


def test_verify_finds_a_truncated_shard(packed, tmp_path):
    dest = damaged_copy(packed, tmp_path, shard_size="1M")
    shard = dest / "shard-00002.rfs"
    size = os.path.getsize(shard)
    os.truncate(shard, size - 1000)
    v = pack("verify", dest)
    assert v.returncode == 1
    assert f"{shard}: file is {size - 1000} bytes, the manifest says {size}: truncated" in v.stdout
    lost = next(int(x.split()[3]) for x in (dest / "MANIFEST").read_text().splitlines()
                if x.startswith("shard 2 "))
    assert f"{shard}: records 0..{lost - 1} not checked" in v.stdout
    assert f"{10000 - lost} good, 1 problem (some records unreachable)" in v.stdout


def test_verify_finds_forged_lengths(packed, tmp_path):
    """An entry forged with a huge length and every checksum recomputed."""
    def crc32c(data, crc=0):  # CRC-32C is not in Python's standard library
        crc ^= 0xFFFFFFFF
        for b in data:
            crc ^= b
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
        return crc ^ 0xFFFFFFFF

    dest = damaged_copy(packed, tmp_path, shard_size="256K")
    shard = dest / "shard-00001.rfs"
    index_off, records = shard_layout(shard)
    data = bytearray(open(shard, "rb").read())
    e = index_off + 32 * 3
    struct.pack_into("<I", data, e + 8, 0xFFFFFFF0)            # stored_len
    struct.pack_into("<I", data, e + 28, crc32c(data[e:e + 28]))
    old = struct.unpack_from("<I", data, 40)[0]
    new = crc32c(data[index_off:index_off + 32 * records])
    struct.pack_into("<I", data, 40, new)
    struct.pack_into("<I", data, 60, crc32c(data[:60]))
    open(shard, "wb").write(data)
    man = (dest / "MANIFEST").read_text().replace(f"{old:08x}", f"{new:08x}")
    (dest / "MANIFEST").write_text(man)
    v = pack("verify", dest)
    assert v.returncode == 1
    assert (f"{shard}: record 3 (index entry at byte {e}): 4294967280 stored "
            "bytes at byte") in v.stdout
    assert "outside the record area" in v.stdout
    assert "9999 good, 1 problem" in v.stdout


def test_idx_input_errors(tmp_path):
    tr = f"{FMNIST}/train-images-idx3-ubyte.gz"
    tl = f"{FMNIST}/train-labels-idx1-ubyte.gz"
    ti = f"{FMNIST}/t10k-images-idx3-ubyte.gz"
    te = f"{FMNIST}/t10k-labels-idx1-ubyte.gz"
    r = pack("idx", "--images", tr, "--labels", te, tmp_path / "a")
    assert r.returncode == 1
    assert f"images file {tr} holds 60000 images but labels file {te} holds 10000" in r.stderr
    r = pack("idx", "--images", te, "--labels", te, tmp_path / "a")
    assert r.returncode == 1 and "1 dim" in r.stderr and te in r.stderr
    r = pack("idx", "--images", ti, "--labels", ti, tmp_path / "a")
    assert r.returncode == 1 and "labels file" in r.stderr and "1 dim of u8" in r.stderr
    r = pack("idx", "--images", PNG, "--labels", te, tmp_path / "a")
    assert r.returncode == 1 and "not an IDX file" in r.stderr and PNG in r.stderr
    assert not os.path.exists(tmp_path / "a")

    # plain (not gzip) IDX files pack; a truncated one is named, with the record
    images, labels = idx_src("test")
    (tmp_path / "img").write_bytes(images)
    (tmp_path / "lab").write_bytes(labels)
    r = pack("idx", "--images", tmp_path / "img", "--labels", tmp_path / "lab",
             tmp_path / "plain", "--codec", "none")
    assert r.returncode == 0, r.stderr
    assert b"".join(b for _, b in dump(tmp_path / "plain", tmp_path)) == images[16:]
    (tmp_path / "img").write_bytes(images[:16 + 784 * 500 + 100])
    r = pack("idx", "--images", tmp_path / "img", "--labels", tmp_path / "lab",
             tmp_path / "b")
    assert r.returncode == 1
    assert f"images file {tmp_path / 'img'}: record 500 of 10000" in r.stderr
    assert "truncated" in r.stderr
    assert not os.path.exists(tmp_path / "b")
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".b.tmp")]
    (tmp_path / "img").write_bytes(images + b"\0")
    r = pack("idx", "--images", tmp_path / "img", "--labels", tmp_path / "lab",
             tmp_path / "b")
    assert r.returncode == 1 and "more data after its 10000 records" in r.stderr
    gz = gzip.compress(images)
    (tmp_path / "img.gz").write_bytes(gz[:len(gz) // 2])
    r = pack("idx", "--images", tmp_path / "img.gz", "--labels", tmp_path / "lab",
             tmp_path / "b")
    assert r.returncode == 1 and "truncated" in r.stderr
    # labels past the class names
    (tmp_path / "names").write_text("a\nb\n")
    r = pack("idx", "--images", tmp_path / "img.gz", "--labels", tmp_path / "lab",
             tmp_path / "b", "--class-names", tmp_path / "names")
    assert r.returncode == 1 and "there are 2 class names" in r.stderr
    # an existing destination is never touched
    r = pack("idx", "--images", ti, "--labels", te, tmp_path / "plain")
    assert r.returncode == 1 and "exists" in r.stderr


@pytest.mark.parametrize("args,needle", [
    ([], "usage: ringfeed-pack COMMAND"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["idx", "--labels", "x", "out"], "--images FILE is required"),
    (["idx", "--images", "x", "out"], "--labels FILE is required"),
    (["idx", "--images", "x", "--labels", "y"], "OUT_DIR is required"),
    (["idx", "--images", "x", "--labels", "y", "a", "b"], "also got 'b'"),
    (["idx", "--images", "x", "--labels", "y", "o", "--codec", "lz4"], "--codec: 'lz4'"),
    (["idx", "--images", "x", "--labels", "y", "o", "--level", "abc"], "--level: 'abc'"),
    (["idx", "--images", "x", "--labels", "y", "o", "--level", "99"], "--level: '99'"),
    (["idx", "--images", "x", "--labels", "y", "o", "--codec", "none", "--dict"],
     "--dict needs --codec zstd"),
    (["idx", "--images", "x", "--labels", "y", "o", "--shard-size", "12Q"],
     "--shard-size: '12Q'"),
    (["idx", "--images", "x", "--labels", "y", "o", "--bogus"], "unknown option '--bogus'"),
    (["idx", "--images"], "--images needs a value"),
    (["imagefolder", "src"], "SRC_DIR and OUT_DIR expected"),
    (["imagefolder", "a", "b", "--shard-size", "10"], "--shard-size: '10'"),
    (["imagefolder", "a", "b", "--loose"], "unknown option '--loose'"),
    (["verify"], "DIR is required"),
    (["verify", "a", "b"], "also got 'b'"),
    (["info", "--json"], "unknown option '--json'"),
    (["show", "a"], "DIR and INDEX are required"),
    (["show", "a", "x1"], "INDEX 'x1' is not a sample number"),
    (["show", "a", "-1"], "INDEX '-1' is not a sample number"),
    (["show", "a", "1", "2"], "also got '2'"),
    (["show", "a", "1", "--yaml"], "unknown option '--yaml'"),
])
def test_bad_arguments_exit_2(args, needle):
    r = pack(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr


@pytest.mark.parametrize("cmd", ["idx", "imagefolder", "verify", "info", "show"])
def test_help(cmd):
    r = pack(cmd, "--help")
    assert r.returncode == 0 and r.stdout.startswith(f"usage: ringfeed-pack {cmd}")
    assert pack("--help").stdout.count("\n  ") >= 4


def torchvision_samples(root):
    """torchvision's ImageFolder (find_classes + make_dataset), re-stated."""
    exts = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    out = []
    for label, c in enumerate(classes):
        for d, _, files in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for name in sorted(files):
                if name.lower().endswith(exts):
                    out.append((os.path.join(d, name), label))
    return classes, out


# a marker in entropy-coded data: 0xFF then neither a stuffed 0 nor RSTn
_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
_RST = re.compile(rb"\xff[\xd0-\xd7]")


def jpeg_layout(data):
    """What a JPEG's bytes say: {"sof": [codes], "width", "height", "comps",
    "max_h", "max_v", "dri" (0 without), "scans", "rst" (restart markers in
    order, as their numbers 0..7), "app": [APPn/COM codes but JFIF's APP0]}."""
    assert data[:2] == b"\xff\xd8", "no SOI"
    out = {"sof": [], "dri": 0, "scans": 0, "rst": [], "app": []}
    i = 2
    while i + 4 <= len(data):
        assert data[i] == 0xFF, f"no marker at byte {i}"
        m = data[i + 1]
        if m == 0xFF:
            i += 1
            continue
        if m == 0xD9:
            break
        seg = struct.unpack_from(">H", data, i + 2)[0]
        body = data[i + 4:i + 2 + seg]
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            out["sof"].append(m)
            out["height"], out["width"], out["comps"] = struct.unpack_from(">HHB", body, 1)
            samp = [body[7 + 3 * c] for c in range(out["comps"])]
            out["max_h"] = max(x >> 4 for x in samp)
            out["max_v"] = max(x & 15 for x in samp)
        elif m == 0xDD:
            out["dri"] = struct.unpack_from(">H", body)[0]
        elif (0xE0 <= m <= 0xEF and not (m == 0xE0 and body.startswith(b"JFIF\0"))) \
                or m == 0xFE:
            out["app"].append(m)
        i += 2 + seg
        if m == 0xDA:
            out["scans"] += 1
            end = _MARKER.search(data, i)
            end = end.start() if end else len(data)
            out["rst"] += [x[1] - 0xD0 for x in _RST.findall(data, i, end)]
            i = end
    return out


def restart_interval(mcus):
    """tools/jpeg_restart.h's rule: the largest divisor of mcus up to 4."""
    return next(r for r in (4, 3, 2, 1) if mcus % r == 0)


def assert_restart_markers(data, what):
    """One baseline scan, a restart every restart_interval(MCUs a row) MCUs
    (so intervals start every MCU row), every marker there and in order,
    no APPn but JFIF and no COM."""
    lay = jpeg_layout(data)
    assert lay["sof"] == [0xC0] and lay["scans"] == 1, (what, lay["sof"], lay["scans"])
    if lay["comps"] == 1:
        mcu_w = mcu_h = 8
    else:
        mcu_w, mcu_h = 8 * lay["max_h"], 8 * lay["max_v"]
    per_row = -(-lay["width"] // mcu_w)
    rows = -(-lay["height"] // mcu_h)
    assert lay["dri"] == restart_interval(per_row), (what, lay["dri"], per_row)
    assert lay["rst"] == [k % 8 for k in range(per_row * rows // lay["dri"] - 1)], what
    assert lay["app"] == [], (what, lay["app"])
    return lay


def pixels(src):
    """Pillow's decode of a file or bytes: (mode, size, array)."""
    import numpy as np
    from PIL import Image

    im = Image.open(io.BytesIO(src) if isinstance(src, bytes) else src)
    return im.mode, im.size, np.asarray(im)


def assert_lossless(data, path):
    """data is path re-encoded losslessly: restart markers, and Pillow
    decodes exactly the pixels it decodes from the file."""
    import numpy as np

    assert_restart_markers(data, path)
    (m1, s1, a1), (m2, s2, a2) = pixels(data), pixels(path)
    assert (m1, s1) == (m2, s2), path
    assert np.array_equal(a1, a2), f"{path}: other pixels"


@pytest.fixture
def tree(tmp_path):
    from PIL import Image

    src = tmp_path / "src"
    jpgs = sorted(os.path.join(NATURE, f) for f in os.listdir(NATURE)
                  if f.endswith(".jpg"))[:5]
    (src / "cat").mkdir(parents=True)
    (src / "dog" / "puppies").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "fake").mkdir()
    (src / "gray").mkdir()
    shutil.copy(jpgs[0], src / "cat" / "a.jpg")
    shutil.copy(jpgs[1], src / "cat" / "B.JPG")
    shutil.copy(jpgs[2], src / "cat" / "c.jpeg")
    shutil.copy(jpgs[3], src / "dog" / "x.jpg")
    shutil.copy(jpgs[4], src / "dog" / "puppies" / "y.jpg")
    (src / "fake" / "really-a-gif.jpg").write_bytes(GIF)   # GIF renamed .jpg
    (src / "cat" / "notes.txt").write_text("not an image, not a sample")
    (src / "cat" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 40)
    os.symlink(src / "nowhere.jpg", src / "dog" / "gone.jpg")  # dangling
    os.mkfifo(src / "dog" / "pipe.jpg")                          # would block
    Image.new("L", (40, 30), 128).save(src / "gray" / "g.jpg", quality=90)
    Image.new("RGB", (64, 48), (10, 200, 30)).save(
        src / "gray" / "p.jpg", progressive=True)
    (src / "stray.jpg").write_bytes(open(jpgs[0], "rb").read())  # not in a class
    return src


def test_imagefolder_matches_torchvision(tree, tmp_path):
    out = tmp_path / "out"
    r = pack("imagefolder", tree, out, "--shard-size", "256K")
    assert r.returncode == 0, r.stderr
    err = r.stderr
    assert "skipped fake/really-a-gif.jpg: GIF data, not JPEG" in err
    assert "skipped cat/broken.jpg: JPEG header does not parse" in err
    assert "skipped dog/gone.jpg: cannot open" in err
    assert "skipped dog/pipe.jpg: not a regular file" in err
    assert "class 'empty' (label 2) has no images" in err
    assert "class 'fake' (label 3) has no images" in err
    assert "skipped  4 files" in r.stdout
    assert "ignored  1 files" in r.stdout
    assert "classes  5 (2 empty)" in r.stdout

    classes, samples = torchvision_samples(tree)
    assert classes == ["cat", "dog", "empty", "fake", "gray"]
    skipped = {"really-a-gif.jpg", "broken.jpg", "gone.jpg", "pipe.jpg"}
    want = [(p, lab) for p, lab in samples if os.path.basename(p) not in skipped]
    got = dump(out, tmp_path)
    assert [lab for lab, _ in got] == [lab for _, lab in want]
    for (label, data), (path, _) in zip(got, want):
        assert_lossless(data, path)
    assert "restart  7 images re-encoded losslessly with restart markers in " in r.stdout
    assert ", 0 stored as they are\n" in r.stdout

    info = pack("info", out)
    assert info.returncode == 0
    assert "kind      jpeg" in info.stdout
    assert ("layout    JPEG re-encoded losslessly with restart markers (pixels "
            "identical;") in info.stdout
    assert "samples   7 in" in info.stdout
    for c, name in enumerate(classes):
        count = sum(1 for _, lab in want if lab == c)
        assert f"  {c:5d}  {count:9d}  {name}" in info.stdout
    assert pack("verify", out).returncode == 0

    # --as-is: the files' bytes, the same samples and labels
    asis = tmp_path / "asis"
    r = pack("imagefolder", tree, asis, "--shard-size", "256K", "--as-is")
    assert r.returncode == 0, r.stderr
    assert "codec none (JPEG as is)" in r.stdout and "restart" not in r.stdout
    got = dump(asis, tmp_path)
    assert [lab for lab, _ in got] == [lab for _, lab in want]
    for (label, data), (path, _) in zip(got, want):
        assert data == open(path, "rb").read(), path
    assert "jpeg_restart" not in (asis / "MANIFEST").read_text()
    assert "layout    JPEG as they were (not re-encoded)" in pack("info", asis).stdout


def test_imagefolder_strict(tree, tmp_path):
    r = pack("imagefolder", tree, tmp_path / "o1", "--strict")
    assert r.returncode == 1
    assert "class 'empty' (label 2) has no images: --strict" in r.stderr
    assert not os.path.exists(tmp_path / "o1")
    shutil.rmtree(tree / "empty")
    shutil.rmtree(tree / "fake")
    r = pack("imagefolder", tree, tmp_path / "o2", "--strict")
    assert r.returncode == 1
    assert "cat/broken.jpg: JPEG header does not parse" in r.stderr
    assert "--strict: stopping" in r.stderr
    assert not os.path.exists(tmp_path / "o2")
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".o2.tmp")]
    for bad in ("cat/broken.jpg", "dog/gone.jpg", "dog/pipe.jpg"):
        os.unlink(tree / bad)
    r = pack("imagefolder", tree, tmp_path / "o3", "--strict")
    assert r.returncode == 0, r.stderr


def test_imagefolder_without_classes_or_images(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.jpg").write_bytes(b"x")
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out")
    assert r.returncode == 1 and "no class folders" in r.stderr
    (tmp_path / "src" / "c").mkdir()
    (tmp_path / "src" / "c" / "p.png").write_bytes(GIF)
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out")
    assert r.returncode == 1 and "no image to pack" in r.stderr
    assert "skipped c/p.png: GIF data" in r.stderr
    assert not os.path.exists(tmp_path / "out")
    assert os.listdir(tmp_path) == ["src"]


def start_fifo_pack(tmp_path, n_images):
    """A pack reading its images from a FIFO fed n_images, then left open:
    the packer blocks midway with complete shards already written."""
    images, labels = idx_src("test")
    fifo = tmp_path / "images.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [PACK, "idx", "--images", fifo, "--labels",
         f"{FMNIST}/t10k-labels-idx1-ubyte.gz", out, "--codec", "none",
         "--shard-size", "64K"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w = open(fifo, "wb")
    w.write(images[:16 + 784 * n_images])
    w.flush()
    deadline = time.monotonic() + 20
    tmp = None
    while time.monotonic() < deadline:
        tmps = [p for p in os.listdir(tmp_path) if p.startswith(".out.tmp-")]
        if tmps and os.path.exists(tmp_path / tmps[0] / "shard-00005.rfs"):
            tmp = tmp_path / tmps[0]
            break
        time.sleep(0.05)
    assert tmp, "the pack did not get going"
    time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    return proc, w, out, tmp


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_interrupted_pack_leaves_no_dataset(tmp_path, sig):
    proc, w, out, tmp = start_fifo_pack(tmp_path, 3000)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=20)
    try:
        w.close()
    except BrokenPipeError:
        pass
    assert not os.path.exists(out)
    v = pack("verify", out)
    assert v.returncode == 1
    if sig == signal.SIGKILL:
        # what is left is hidden, has no MANIFEST, and does not open
        assert os.path.isdir(tmp)
        assert not os.path.exists(tmp / "MANIFEST")
        v = pack("verify", tmp)
        assert v.returncode == 1 and "did not finish" in v.stdout
    else:
        assert proc.returncode == 128 + sig
        assert "interrupted by signal" in stderr and str(tmp) in stderr
        assert not os.path.exists(tmp)


def on_a_terminal(args, signal_on=None):
    """Runs ringfeed-pack ARGS with stderr on a pseudo-terminal; with
    signal_on, sends SIGTERM once that text has appeared there.  Returns
    the exit code, the terminal's text and stdout."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([PACK] + list(args), stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []

    def drain():
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:
                return
            if not b:
                return
            chunks.append(b)

    t = threading.Thread(target=drain)
    t.start()
    if signal_on:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and signal_on.encode() not in b"".join(chunks):
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=60)
    t.join(5)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode(errors="replace"), stdout


def test_progress_bar_on_a_terminal(tmp_path):
    rc, tty, stdout = on_a_terminal(
        ["idx", "--images", f"{FMNIST}/t10k-images-idx3-ubyte.gz",
         "--labels", f"{FMNIST}/t10k-labels-idx1-ubyte.gz", tmp_path / "o",
         "--codec", "none"])
    assert rc == 0
    assert "\r" in tty and "] 100%  10000/10000" in tty
    assert b"packed 10000 records" in stdout


def test_progress_lines_in_a_log(packed):
    # the module fixture's packs ran with pipes: plain lines, one per 10%
    r = pack("verify", packed[("test", "none")][0])
    lines = [x for x in r.stderr.splitlines() if x.startswith("verifying:")]
    assert len(lines) == 10 and lines[-1].startswith("verifying: 10000/10000 (100%)")
    assert "\r" not in r.stderr


def nature_jpgs():
    return sorted(os.path.join(NATURE, f) for f in os.listdir(NATURE)
                  if f.endswith(".jpg"))


def class_counts(out, tmp_path):
    counts = {}
    for label, _ in dump(out, tmp_path):
        counts[label] = counts.get(label, 0) + 1
    return counts


def test_imagefolder_symlink_loops_are_skipped(tmp_path):
    """`a/up -> ..` and `a/me -> .` once walked 2^32 paths, filing b's
    images under a; now each is reported once and not entered."""
    jpgs = nature_jpgs()
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    shutil.copy(jpgs[0], src / "a" / "1.jpg")
    shutil.copy(jpgs[1], src / "a" / "2.jpg")
    shutil.copy(jpgs[2], src / "b" / "3.jpg")
    os.symlink("..", src / "a" / "up")
    os.symlink(".", src / "a" / "me")
    out = tmp_path / "out"
    r = pack("imagefolder", src, out, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"skipped link a/up: loops back to {src} (SRC_DIR)" in r.stderr
    assert "skipped link a/me: loops back to a\n" in r.stderr
    assert r.stderr.count("loops back") == 2
    assert len(r.stderr) < 4096
    assert "loops    2 folder links skipped" in r.stdout
    assert "packed 3 records" in r.stdout
    assert class_counts(out, tmp_path) == {0: 2, 1: 1}


def test_imagefolder_loop_warnings_are_capped(tmp_path):
    jpgs = nature_jpgs()
    src = tmp_path / "src"
    for c in range(30):
        (src / f"c{c:02d}").mkdir(parents=True)
        shutil.copy(jpgs[0], src / f"c{c:02d}" / "x.jpg")
        os.symlink(".", src / f"c{c:02d}" / "me")
    r = pack("imagefolder", src, tmp_path / "out", timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.count("loops back") == 20
    assert "skipped link c19/me: loops back to c19" in r.stderr
    assert "10 more scan warnings not shown" in r.stderr
    assert "loops    30 folder links skipped" in r.stdout


def test_imagefolder_follows_links_out_of_the_tree(tmp_path):
    """Links to folders and files outside SRC_DIR are followed, as
    torchvision's os.walk(followlinks=True) does, twice when linked twice."""
    jpgs = nature_jpgs()
    ext = tmp_path / "elsewhere"
    (ext / "sub").mkdir(parents=True)
    shutil.copy(jpgs[0], ext / "e1.jpg")
    shutil.copy(jpgs[1], ext / "e2.jpg")
    shutil.copy(jpgs[2], ext / "sub" / "s.jpg")
    src = tmp_path / "src"
    (src / "cat").mkdir(parents=True)
    shutil.copy(jpgs[3], src / "cat" / "c.jpg")
    os.symlink(ext, src / "ext")                    # a class that is a link
    os.symlink(ext / "sub", src / "cat" / "more")   # a folder link in a class
    os.symlink(ext / "sub", src / "cat" / "more2")  # the same folder again
    os.symlink(ext / "e1.jpg", src / "cat" / "f.jpg")  # a file link
    out = tmp_path / "out"
    r = pack("imagefolder", src, out, "--as-is", timeout=60)  # bytes say which file
    assert r.returncode == 0, r.stderr
    assert "loops back" not in r.stderr
    assert "loops    0 folder links skipped" in r.stdout

    classes, want = torchvision_samples(src)
    assert classes == ["cat", "ext"]
    got = dump(out, tmp_path)
    assert [lab for lab, _ in got] == [lab for _, lab in want]
    assert [lab for lab, _ in got] == [0, 0, 0, 0, 1, 1, 1]
    for (_, data), (path, _) in zip(got, want):
        assert data == open(path, "rb").read(), path


def test_imagefolder_scan_stops_on_sigterm(tmp_path):
    """A tree with no loop but 2^40 paths (d0/{x,y} -> d1, d1/{x,y} -> d2,
    ...) keeps the scan busy; SIGTERM must end it at once, nothing written."""
    jpgs = nature_jpgs()
    ext = tmp_path / "chain"
    for i in range(41):
        (ext / f"d{i}").mkdir(parents=True)
    for i in range(40):
        os.symlink(ext / f"d{i + 1}", ext / f"d{i}" / "x")
        os.symlink(ext / f"d{i + 1}", ext / f"d{i}" / "y")
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    shutil.copy(jpgs[0], src / "a" / "1.jpg")
    os.symlink(ext / "d0", src / "a" / "deep")
    out = tmp_path / "out"
    proc = subprocess.Popen([PACK, "imagefolder", src, out], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)
    assert proc.poll() is None, proc.communicate()
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        stdout, stderr = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the scan did not stop within 5 s of SIGTERM")
    assert time.monotonic() - t0 < 5
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "interrupted by signal 15" in stderr
    assert "while scanning" in stderr
    assert len(stderr) < 16384   # warnings capped, not a flood
    assert not os.path.exists(out)
    assert sorted(os.listdir(tmp_path)) == ["chain", "src"]


# ---- imagefolder --max-side ------------------------------------------------

MAX_SIDE = 256


def stored_dims(w, h, n):
    """The size --max-side n stores a w x h image at (tools/jpeg_shrink.c):
    longer side n, the other rounded half up, at least 1; as it is within."""
    longer, shorter = max(w, h), min(w, h)
    if longer <= n:
        return w, h
    other = max(1, (shorter * n * 2 + longer) // (2 * longer))
    return (n, other) if w >= h else (other, n)


@pytest.fixture
def max_side_tree(tmp_path):
    """Photographs larger than MAX_SIDE (one progressive), a grayscale and a
    CMYK one larger too, small ones (one exactly at the limit), one whose
    data is cut short (its header parses) and a GIF named .jpg."""
    from PIL import Image

    src = tmp_path / "src"
    for c in ("big", "gray", "odd", "small"):
        (src / c).mkdir(parents=True)
    shutil.copy(f"{NATURE}/Aqua.jpg", src / "big" / "aqua.jpg")        # 2560x1600
    shutil.copy(f"{NATURE}/FreshFlower.jpg", src / "big" / "flower.jpg")  # progressive
    shutil.copy(f"{NATURE}/Storm.jpg", src / "big" / "storm.jpg")      # 1920x1280
    assert Image.open(src / "big" / "flower.jpg").info.get("progressive")
    dune = Image.open(f"{NATURE}/Dune.jpg")                            # 1680x1050
    dune.convert("L").resize((900, 1400)).save(src / "gray" / "tall.jpg", quality=92)
    dune.convert("L").resize((200, 120)).save(src / "gray" / "tiny.jpg", quality=92)
    dune.convert("CMYK").resize((700, 450)).save(src / "odd" / "cmyk.jpg", quality=95)
    storm = open(f"{NATURE}/Storm.jpg", "rb").read()
    (src / "odd" / "cut.jpg").write_bytes(storm[:len(storm) * 6 // 10])
    (src / "odd" / "gif.jpg").write_bytes(GIF)
    dune.resize((240, 150)).save(src / "small" / "a.jpg", quality=90)
    dune.resize((MAX_SIDE, 160)).save(src / "small" / "b-edge.jpg", quality=90)
    return src


def mad(a, b):
    import numpy as np
    return float(np.abs(np.asarray(a, dtype=np.float64) -
                        np.asarray(b, dtype=np.float64)).mean())


def test_imagefolder_max_side(max_side_tree, tmp_path):
    import io

    from PIL import Image

    out = tmp_path / "out"
    r = pack("imagefolder", max_side_tree, out, "--max-side", MAX_SIDE, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "skipped odd/gif.jpg: GIF data, not JPEG" in r.stderr
    assert ("odd/cut.jpg: JPEG data does not decode: Premature end of JPEG file: "
            "stored as it is") in r.stderr
    assert "packing: 10/10 (100%)" in r.stderr      # the progress lines go on

    classes, samples = torchvision_samples(max_side_tree)
    want = [(p, lab) for p, lab in samples if not p.endswith("gif.jpg")]
    got = dump(out, tmp_path)
    assert [lab for lab, _ in got] == [lab for _, lab in want]
    reencoded = within = 0
    src_bytes = stored_bytes = re_src = re_out = ll_src = ll_out = 0
    for (_, data), (path, _) in zip(got, want):
        raw = open(path, "rb").read()
        src_bytes += len(raw)
        stored_bytes += len(data)
        src = Image.open(path)
        if path.endswith("cut.jpg"):
            assert data == raw, f"{path}: not stored byte for byte"
            continue
        if max(src.size) <= MAX_SIDE:   # within: re-encoded losslessly
            assert_lossless(data, path)
            within += 1
            ll_src += len(raw)
            ll_out += len(data)
            continue
        reencoded += 1
        re_src += len(raw)
        re_out += len(data)
        assert_restart_markers(data, path)
        im = Image.open(io.BytesIO(data))
        assert im.size == stored_dims(*src.size, MAX_SIDE), path
        assert max(im.size) == MAX_SIDE
        assert not im.info.get("progressive"), path
        mode = "L" if src.mode == "L" else "RGB"    # CMYK comes back RGB
        assert im.mode == mode, path
        # against Pillow's box downscale of the same decode: the difference
        # is the re-encoding's loss, so no more than Pillow's own downscale
        # saved at quality 90 loses (+0.5 level), and at most 6 levels;
        # measured here: 1.1-1.8 for the photographs and the gray one, 5.3
        # for the CMYK one (a 700x450 Dune shrunk 2.7x: detail up to the
        # new pixel size), each within 0.15 of Pillow's own loss
        ref = src.convert(mode).resize(im.size, Image.BOX)
        b = io.BytesIO()
        ref.save(b, "JPEG", quality=90)
        own = mad(Image.open(b).convert(mode), ref)
        d = mad(im.convert(mode), ref)
        assert d <= own + 0.5 and d <= 6, f"{path}: {d:.2f} (Pillow's own {own:.2f})"
    assert reencoded == 5 and within == 3
    assert (f"max-side {MAX_SIDE} px, quality 90: 5 images re-encoded in ") in r.stdout
    assert "1 that do not decode stored as they are\n" in r.stdout
    assert (f"restart  3 images at most {MAX_SIDE} px re-encoded losslessly with "
            "restart markers in ") in r.stdout
    assert ", 0 stored as they are\n" in r.stdout
    assert f"sources  {src_bytes} bytes before, {stored_bytes} bytes stored" in r.stdout
    assert f"; shrunk {re_src} -> {re_out} bytes" in r.stdout
    assert f"; re-encoded losslessly {ll_src} -> {ll_out} bytes" in r.stdout
    assert re_out < re_src // 10

    manifest = (out / "MANIFEST").read_text()
    assert f"\nmax_side {MAX_SIDE}\nmax_side_quality 90\njpeg_restart lossless\n" in manifest
    i = pack("info", out)
    assert i.returncode == 0, i.stderr
    assert (f"max side  {MAX_SIDE} px (packed with --max-side {MAX_SIDE} --quality 90: "
            "larger images were re-encoded)") in i.stdout
    assert ("layout    JPEG with restart markers: larger ones shrunk, the others "
            "re-encoded losslessly") in i.stdout
    assert "samples   9 in 1 shard" in i.stdout
    v = pack("verify", out)
    assert v.returncode == 0 and "9 good, 0 problems" in v.stdout, v.stdout


def test_imagefolder_max_side_quality_and_strict(max_side_tree, tmp_path):
    from PIL import Image

    # --strict refuses the file whose data does not decode, then the GIF
    r = pack("imagefolder", max_side_tree, tmp_path / "s", "--max-side", MAX_SIDE,
             "--strict", timeout=120)
    assert r.returncode == 1
    assert ("odd/cut.jpg: JPEG data does not decode: Premature end of JPEG file "
            "(--strict: stopping)") in r.stderr
    os.unlink(max_side_tree / "odd" / "cut.jpg")
    r = pack("imagefolder", max_side_tree, tmp_path / "s", "--max-side", MAX_SIDE,
             "--strict", timeout=120)
    assert r.returncode == 1
    assert "odd/gif.jpg: GIF data, not JPEG (--strict: stopping)" in r.stderr
    assert not os.path.exists(tmp_path / "s")
    os.unlink(max_side_tree / "odd" / "gif.jpg")

    # another quality, recorded; the files shrink with it
    q = {}
    for quality in (90, 50):
        out = tmp_path / f"q{quality}"
        r = pack("imagefolder", max_side_tree, out, "--max-side", 512,
                 "--quality", quality, "--strict", timeout=120)
        assert r.returncode == 0, r.stderr
        assert f"max_side 512\nmax_side_quality {quality}\n" in (out / "MANIFEST").read_text()
        assert f"--max-side 512 --quality {quality}:" in pack("info", out).stdout
        got = dump(out, tmp_path)
        assert len(got) == 8
        q[quality] = sum(len(d) for _, d in got)
    assert q[50] < q[90]

    # --as-is, without --max-side: no key, and info says so
    out = tmp_path / "plain"
    r = pack("imagefolder", max_side_tree, out, "--as-is")
    assert r.returncode == 0, r.stderr
    assert "max_side" not in (out / "MANIFEST").read_text()
    assert "max-side" not in r.stdout
    i = pack("info", out).stdout
    assert "max side  none (no image shrunk)" in i
    assert "layout    JPEG as they were (not re-encoded)" in i
    for (_, data), (path, _) in zip(dump(out, tmp_path), torchvision_samples(max_side_tree)[1]):
        assert data == open(path, "rb").read()
    assert Image.open(max_side_tree / "big" / "aqua.jpg").size == (2560, 1600)


@pytest.mark.parametrize("args,needle", [
    (["--max-side", "15"], "--max-side: '15' is not a number of pixels from 16 to 65535"),
    (["--max-side", "65536"], "--max-side: '65536' is not a number of pixels"),
    (["--max-side", "5x"], "--max-side: '5x'"),
    (["--max-side", "-256"], "--max-side: '-256'"),
    (["--quality", "80"], "--quality 80 needs --max-side"),
    (["--max-side", "256", "--quality", "0"],
     "--quality: '0' is not a JPEG quality from 1 to 100"),
    (["--max-side", "256", "--quality", "101"], "--quality: '101'"),
    (["--max-side", "256", "--quality", "high"], "--quality: 'high'"),
    (["--max-side"], "--max-side needs a value"),
    (["--as-is", "--max-side", "256"], "--as-is and --max-side do not go together"),
    (["--max-side", "256", "--as-is"], "--as-is and --max-side do not go together"),
    (["--as-is", "--quality", "80"], "--quality 80 needs --max-side"),
])
def test_max_side_bad_arguments_exit_2(tmp_path, args, needle):
    r = pack("imagefolder", tmp_path, tmp_path / "out", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert not os.path.exists(tmp_path / "out")


# ---- imagefolder: the lossless re-encoding (the default) --------------------

def test_imagefolder_lossless_restart(max_side_tree, tmp_path):
    """Every YCbCr and gray JPEG (baseline, progressive, with EXIF, an ICC
    profile and a comment) re-encoded with restart markers to the same
    pixels; the CMYK one stored as it is, counted; the cut one stored as it
    is, warned about; --strict stops on the cut one; sizes and counts in
    the summary."""
    from PIL import Image

    dune = Image.open(f"{NATURE}/Dune.jpg")
    exif = Image.Exif()
    exif[0x0112] = 6       # orientation: rotated (which ImageFolder ignores)
    dune.resize((321, 203)).save(max_side_tree / "small" / "exif.jpg", quality=88,
                                 exif=exif.tobytes(), icc_profile=b"\0" * 300,
                                 comment=b"a comment")
    # APP1 (EXIF), APP2 (ICC), COM
    assert {0xE1, 0xE2, 0xFE} <= set(
        jpeg_layout((max_side_tree / "small" / "exif.jpg").read_bytes())["app"])
    out = tmp_path / "out"
    r = pack("imagefolder", max_side_tree, out, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "codec none (JPEG re-encoded losslessly with restart markers)" in r.stdout
    assert ("odd/cut.jpg: JPEG data does not decode: Premature end of JPEG file: "
            "stored as it is, not re-encoded") in r.stderr
    assert "cmyk" not in r.stderr          # counted, not warned about
    assert "skipped odd/gif.jpg: GIF data, not JPEG" in r.stderr

    _, samples = torchvision_samples(max_side_tree)
    want = [p for p, _ in samples if not p.endswith("gif.jpg")]
    got = dump(out, tmp_path)
    assert len(got) == len(want) == 10
    src_bytes = stored = ll_src = ll_out = 0
    intervals = {1: 0, 2: 0, 3: 0, 4: 0}
    for (_, data), path in zip(got, want):
        raw = open(path, "rb").read()
        src_bytes += len(raw)
        stored += len(data)
        if path.endswith(("cut.jpg", "cmyk.jpg")):
            assert data == raw, path
            continue
        assert_lossless(data, path)
        intervals[jpeg_layout(data)["dri"]] += 1
        ll_src += len(raw)
        ll_out += len(data)
        im = Image.open(io.BytesIO(data))
        assert not im.info.get("progressive") and "exif" not in im.info, path
        assert "icc_profile" not in im.info and "comment" not in im.info, path
    assert jpeg_layout(open(max_side_tree / "big" / "flower.jpg", "rb").read())["scans"] > 1
    assert "restart  8 images re-encoded losslessly with restart markers in " in r.stdout
    assert "s, 2 stored as they are (1 CMYK, 1 do not decode)\n" in r.stdout
    assert (f"interval every 4 MCUs: {intervals[4]} images, 3: {intervals[3]}, "
            f"2: {intervals[2]}, 1: {intervals[1]}\n") in r.stdout
    assert (f"sources  {src_bytes} bytes before, {stored} bytes stored "
            f"({stored / src_bytes:.2f}x); re-encoded losslessly {ll_src} -> {ll_out} "
            "bytes") in r.stdout
    manifest = (out / "MANIFEST").read_text()
    assert "\njpeg_restart lossless\n" in manifest and "max_side" not in manifest
    i = pack("info", out)
    assert "max side  none (no image shrunk)" in i.stdout
    assert ("layout    JPEG re-encoded losslessly with restart markers (pixels "
            "identical; CMYK, RGB and undecodable files as they were)") in i.stdout
    v = pack("verify", out)
    assert v.returncode == 0 and "10 good, 0 problems" in v.stdout, v.stdout

    # --strict: the file whose data does not decode stops the pack
    r = pack("imagefolder", max_side_tree, tmp_path / "s", "--strict", timeout=120)
    assert r.returncode == 1
    assert ("odd/cut.jpg: JPEG data does not decode: Premature end of JPEG file "
            "(--strict: stopping)") in r.stderr
    assert not os.path.exists(tmp_path / "s")


# ---- imagefolder --jobs: the same pack on any number of threads -------------

@pytest.fixture
def jobs_tree(max_side_tree):
    """max_side_tree (photographs up to 2560x1600, progressive, gray, CMYK,
    one whose data is cut short, a GIF named .jpg) and: an empty class, a
    file whose header does not parse, a dangling link, and 40 small JPEGs
    of different sizes and sampling, so files of very different costs
    finish out of order on several threads."""
    from PIL import Image

    src = max_side_tree
    (src / "empty").mkdir()
    (src / "odd" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\0" * 40)
    os.symlink(src / "nowhere.jpg", src / "odd" / "gone.jpg")
    dune = Image.open(f"{NATURE}/Dune.jpg")
    (src / "many").mkdir()
    for i in range(40):
        w, h = 40 + 37 * i % 300, 30 + 53 * i % 260
        dune.resize((w, h)).save(src / "many" / f"{i:02d}.jpg", quality=70 + i % 25,
                                 subsampling=i % 3)
    return src


def comparable(text, out):
    """A pack's stdout or stderr less what depends on time, threads and
    the output folder's name: the progress lines, the time and jobs lines,
    seconds, OUT_DIR."""
    lines = [x for x in text.splitlines()
             if not x.startswith("packing:") and not x.startswith(("  time ", "  jobs "))]
    text = re.sub(r"\d+\.\d+ CPU s", "_ CPU s", "\n".join(lines))
    return text.replace(str(out), "OUT")


def pack_files(out):
    """{file name: bytes} of a packed dataset folder."""
    return {p: (out / p).read_bytes() for p in sorted(os.listdir(out))}


def test_imagefolder_jobs_same_pack(jobs_tree, tmp_path):
    """The dataset's files, byte for byte, the warnings in scan order and
    the summary's counts are the same with --jobs 1, 2 and 5 (and -j 3
    under --max-side, and --as-is)."""
    for extra, jobs in (((), ("1", "2", "5")),
                        (("--max-side", MAX_SIDE), ("1", "3")),
                        (("--as-is",), ("1", "4"))):
        ref = None
        for n in jobs:
            out = tmp_path / f"out{'-'.join(map(str, extra))}-{n}"
            flag = "-j" if n == "3" else "--jobs"
            r = pack("imagefolder", jobs_tree, out, "--shard-size", "256K", *extra,
                     flag, n, timeout=300)
            assert r.returncode == 0, r.stderr
            threads = int(n)
            assert f"  jobs     {threads} thread{'s' if threads > 1 else ''}: files read" in r.stdout
            assert "skipped odd/broken.jpg: JPEG header does not parse" in r.stderr
            assert "skipped odd/gone.jpg: cannot open" in r.stderr
            assert "class 'empty' (label 1) has no images: kept" in r.stderr
            got = (pack_files(out), comparable(r.stdout, out), comparable(r.stderr, out))
            if ref is None:
                ref = got
                assert len([f for f in got[0] if f.endswith(".rfs")]) > 1, got[0].keys()
                continue
            assert got[0].keys() == ref[0].keys(), (extra, n)
            for name in got[0]:
                assert got[0][name] == ref[0][name], f"{extra} --jobs {n}: {name} differs"
            assert got[1] == ref[1], (extra, n)
            assert got[2] == ref[2], (extra, n)
        samples = [p for p, _ in torchvision_samples(jobs_tree)[1]
                   if not p.endswith(("gif.jpg", "broken.jpg", "gone.jpg"))]
        recs = dump(out, tmp_path)
        assert len(recs) == len(samples) == 49
        if "--as-is" in extra:
            for (_, data), path in zip(recs, samples):
                assert data == open(path, "rb").read(), path


def test_imagefolder_jobs_strict_stops_at_the_first_bad_file(max_side_tree, tmp_path):
    """With --strict, --jobs 4 stops at the same first bad file in scan
    order as --jobs 1 (odd/cut.jpg, after the slow large photographs; the
    GIF after it fails faster), says the same, and writes nothing."""
    (max_side_tree / "odd" / "zz.jpg").write_bytes(b"not a jpeg at all")
    for first in ("odd/cut.jpg: JPEG data does not decode: Premature end of JPEG file "
                  "(--strict: stopping)",
                  "odd/gif.jpg: GIF data, not JPEG (--strict: stopping)"):
        errs = []
        for n in ("1", "4"):
            out = tmp_path / f"s{n}"
            r = pack("imagefolder", max_side_tree, out, "--strict", "--jobs", n,
                     timeout=120)
            assert r.returncode == 1, (r.stdout, r.stderr)
            assert first in r.stderr, r.stderr
            assert "zz.jpg" not in r.stderr
            assert not os.path.exists(out)
            assert not [p for p in os.listdir(tmp_path) if p.startswith(f".s{n}.tmp")]
            errs.append(comparable(r.stderr, out))
        assert errs[0] == errs[1]
        if "cut.jpg" in first:
            os.unlink(max_side_tree / "odd" / "cut.jpg")


def test_imagefolder_jobs_default_is_the_cpus(jobs_tree, tmp_path):
    """Without --jobs: the CPUs the process may run on (its affinity); one
    CPU, one thread."""
    cpus = sorted(os.sched_getaffinity(0))
    r = pack("imagefolder", jobs_tree, tmp_path / "all", timeout=300)
    assert r.returncode == 0, r.stderr
    n = min(len(cpus), 52)          # no more threads than files
    assert f"  jobs     {n} thread{'s' if n > 1 else ''}: " in r.stdout
    r = subprocess.run([PACK, "imagefolder", jobs_tree, tmp_path / "one"],
                       capture_output=True, text=True, timeout=300,
                       preexec_fn=lambda: os.sched_setaffinity(0, cpus[:1]))
    assert r.returncode == 0, r.stderr
    assert "  jobs     1 thread: " in r.stdout
    assert pack_files(tmp_path / "one") == pack_files(tmp_path / "all")
    # more jobs than files: a thread a file, the same pack
    r = pack("imagefolder", jobs_tree, tmp_path / "max", "--jobs", "1024", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "  jobs     52 threads: " in r.stdout
    assert pack_files(tmp_path / "max") == pack_files(tmp_path / "all")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_imagefolder_jobs_interrupted_leaves_no_dataset(tmp_path, sig):
    """A signal midway through a pack on three threads: the threads finish
    the file each is on, the temporary folder goes, nothing is left."""
    src = tmp_path / "src"
    for c in ("a", "b"):
        (src / c).mkdir(parents=True)
        for i in range(150):
            os.symlink(f"{NATURE}/Aqua.jpg", src / c / f"{i:03d}.jpg")
    out = tmp_path / "out"
    proc = subprocess.Popen([PACK, "imagefolder", src, out, "--jobs", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if [p for p in os.listdir(tmp_path) if p.startswith(".out.tmp-")]:
            break
        time.sleep(0.02)
    time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()
    t0 = time.monotonic()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 128 + sig, stderr
    assert f"interrupted by signal {int(sig)}" in stderr
    assert "packed" not in stdout
    assert not os.path.exists(out)
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_signal_message_clears_the_progress_bar(tmp_path):
    """On a terminal, a signal's message starts on a line of its own: the
    bar is wiped first (it once ran on after the bar's text)."""
    src = tmp_path / "src"
    for c in ("a", "b"):
        (src / c).mkdir(parents=True)
        for i in range(150):
            os.symlink(f"{NATURE}/Aqua.jpg", src / c / f"{i:03d}.jpg")
    rc, tty, _ = on_a_terminal(["imagefolder", src, tmp_path / "out", "--jobs", "2"],
                               signal_on="packing [")
    assert rc == 128 + signal.SIGTERM, tty[-2000:]
    assert "packing [" in tty, tty[-2000:]
    at = tty.index("ringfeed-pack: interrupted by signal")
    assert tty[:at].endswith("\r"), repr(tty[max(0, at - 120):at + 40])


@pytest.mark.parametrize("args,needle", [
    (["--jobs", "0"], "--jobs: '0' is not a number of threads from 1 to 1024"),
    (["--jobs", "-1"], "--jobs: '-1' is not a number of threads"),
    (["--jobs", "abc"], "--jobs: 'abc' is not a number of threads"),
    (["--jobs", "1025"], "--jobs: '1025' is not a number of threads"),
    (["--jobs", "99999999999999999999999"], "--jobs: '99999999999999999999999' is not"),
    (["--jobs", "2x"], "--jobs: '2x'"),
    (["--jobs="], "--jobs: '' is not a number of threads"),
    (["-j", "0"], "--jobs: '0' is not a number of threads"),
    (["-j0"], "--jobs: '0' is not a number of threads"),
    (["--jobs"], "--jobs needs a value"),
    (["-j"], "-j needs a value"),
])
def test_jobs_bad_arguments_exit_2(tmp_path, args, needle):
    r = pack("imagefolder", tmp_path, tmp_path / "out", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert "see 'ringfeed-pack imagefolder --help'" in r.stderr
    assert not os.path.exists(tmp_path / "out")
