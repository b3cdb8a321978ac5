"""test_pack_formats.py - ringfeed-pack imagefolder with PNG, WebP, TIFF, BMP
and PPM/PGM files beside JPEGs.

Builds an ImageFolder tree with Pillow holding every format and mode that
tools/image_decode.h accepts, files it refuses, a JPEG and files that are not
images, packs it, and checks with tests/dump_dataset (the reader library):
sample i is the i-th file torchvision's ImageFolder lists (its rule is
implemented here: sorted class folders, os.walk in sorted order, the
extensions any case), less the refused ones, which the output names with a
reason; each RFPX record's pixels equal numpy.asarray(Image.open(f)
.convert("RGB")) exactly; the JPEG record is a JPEG.  Also --max-side on raw
images (the box filter's exact block means) and --image-mode's argument.

The binaries come from the environment (meson sets them): RINGFEED_PACK,
RINGFEED_DUMP; else from RINGFEED_BUILD_DIR.
"""
import io
import os
import struct
import subprocess
import zlib

import numpy as np
import pytest
from PIL import Image

BUILD = os.environ.get("RINGFEED_BUILD_DIR",
                       os.path.join(os.path.dirname(__file__), "../../build"))
from conftest import DUMP, PACK, dump_records as dump, pack_run as pack  # noqa: E402
# torchvision.datasets.folder.IMG_EXTENSIONS
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif",
                  ".tiff", ".webp")


def test_binaries_are_built():
    for path in (PACK, DUMP):
        assert os.access(path, os.X_OK), f"{path} is not built (RINGFEED_BUILD_DIR={BUILD})"


def image_folder(root):
    """torchvision's ImageFolder listing: [(path, label)], classes."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    samples = []
    for label, c in enumerate(classes):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for name in sorted(files):
                if name.lower().endswith(IMG_EXTENSIONS):
                    samples.append((os.path.join(dirpath, name), label))
    return samples, classes


def rfpx(rec):
    """An RFPX record's pixels as an (h, w, 3) array (proto/pixels.h)."""
    assert rec[:4] == b"RFPX", rec[:16]
    version, channels, reserved, w, h = struct.unpack_from("<BBHII", rec, 4)
    assert (version, channels, reserved) == (1, 3, 0)
    assert len(rec) == 16 + w * h * 3
    return np.frombuffer(rec, np.uint8, offset=16).reshape(h, w, 3)


# ---- files Pillow cannot write: PNG chunks and BMP/PNM bytes by hand ----

def png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))


def png_bytes(w, h, depth, ctype, rows, extra=()):
    """A PNG of rows (bytes each, packed as the PNG stores them)."""
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)
    raw = b"".join(b"\0" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) +
            b"".join(png_chunk(k, d) for k, d in extra) +
            png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def pack_bits(values, bits):
    out, acc, n = bytearray(), 0, 0
    for v in values:
        acc = acc << bits | int(v)
        n += bits
        if n == 8:
            out.append(acc)
            acc = n = 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def bmp4_bytes(w, h, idx, palette):
    """A 4-bit uncompressed bottom-up BMP (Pillow writes none)."""
    stride = ((w * 4 + 31) // 32) * 4
    rows = b"".join(pack_bits(idx[y], 4).ljust(stride, b"\0")
                    for y in reversed(range(h)))
    pal = b"".join(bytes((b, g, r, 0)) for r, g, b in palette)
    off = 14 + 40 + len(pal)
    return (b"BM" + struct.pack("<IHHI", off + len(rows), 0, 0, off) +
            struct.pack("<IiiHHIIiiII", 40, w, h, 1, 4, 0, len(rows), 2835,
                        2835, len(palette), 0) + pal + rows)


def build_tree(root):
    """Writes the tree; returns {relative path: expected outcome}, the
    outcome "rfpx", "jpeg" or "refused"."""
    rng = np.random.default_rng(7)
    W, H = 23, 11
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    rgba = rng.integers(0, 256, (H, W, 4), dtype=np.uint8)
    gray = rng.integers(0, 256, (H, W), dtype=np.uint8)
    g16 = rng.integers(0, 65536, (H, W), dtype=np.uint16)
    g16[0, :5] = [0, 1, 255, 256, 65535]   # around the clip
    files = {}

    def save(rel, img, outcome="rfpx", **kw):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        img.save(path, **kw)
        files[rel] = outcome

    def write(rel, data, outcome="rfpx"):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").write(data)
        files[rel] = outcome

    pal_img = Image.fromarray(gray % 37).convert("P")
    pal_img.putpalette(list(rng.integers(0, 256, 37 * 3, dtype=np.uint8)))

    # PNG, every colour type and depth
    save("png/bilevel.png", Image.fromarray(gray > 127))
    save("png/gray8.png", Image.fromarray(gray))
    save("png/gray16.png", Image.fromarray(g16.astype(np.int32), "I"))
    save("png/la8.png", Image.fromarray(rgba[:, :, :2].copy(), "LA"))
    save("png/rgb8.png", Image.fromarray(rgb))
    save("png/rgba8.png", Image.fromarray(rgba, "RGBA"))
    save("png/palette.png", pal_img, transparency=3)
    for bits in (2, 4):
        v = rng.integers(0, 1 << bits, (H, W))
        write(f"png/gray{bits}.png",
              png_bytes(W, H, bits, 0, [pack_bits(r, bits) for r in v]))
    p4 = rng.integers(0, 16, (H, W))
    plte = bytes(rng.integers(0, 256, 16 * 3, dtype=np.uint8))
    write("png/palette4_trns_gama.png",
          png_bytes(W, H, 4, 3, [pack_bits(r, 4) for r in p4],
                    [(b"gAMA", struct.pack(">I", 100000)), (b"PLTE", plte),
                     (b"tRNS", bytes(range(0, 256, 16)))]))
    for name, ctype, ch in (("la16", 4, 2), ("rgb16", 2, 3), ("rgba16", 6, 4)):
        px = rng.integers(0, 65536, (H, W, ch), dtype=np.uint16)
        write(f"png/{name}.png",
              png_bytes(W, H, 16, ctype, [px[y].astype(">u2").tobytes() for y in range(H)]))
    write("png/palette_short.png",   # index 5 past a 4-entry PLTE: refused
          png_bytes(2, 1, 8, 3, [bytes((0, 5))], [(b"PLTE", bytes(12))]),
          "refused")

    # WebP
    save("webp/lossy.webp", Image.fromarray(rgb), quality=80)
    save("webp/lossless.webp", Image.fromarray(rgb), lossless=True)
    save("webp/alpha.webp", Image.fromarray(rgba, "RGBA"), quality=70)
    save("webp/alpha_lossless.webp", Image.fromarray(rgba, "RGBA"), lossless=True)
    frames = [Image.fromarray(rgb), Image.fromarray(255 - rgb)]
    save("webp/animated.webp", frames[0], "refused", save_all=True,
         append_images=frames[1:], duration=100)

    # TIFF
    save("tiff/rgb.tif", Image.fromarray(rgb))
    save("tiff/rgb_lzw.tiff", Image.fromarray(rgb), compression="tiff_lzw")
    save("tiff/rgba.tif", Image.fromarray(rgba, "RGBA"))
    save("tiff/gray.tif", Image.fromarray(gray))
    save("tiff/la.tif", Image.fromarray(rgba[:, :, :2].copy(), "LA"))
    save("tiff/bilevel.tif", Image.fromarray(gray > 127))
    save("tiff/palette.tif", pal_img)
    save("tiff/gray16.tif", Image.fromarray(g16, "I;16"), "refused")
    save("tiff/cmyk.tif", Image.fromarray(rgba, "CMYK"), "refused")

    # BMP
    save("bmp/bilevel.bmp", Image.fromarray(gray > 127))
    save("bmp/gray8.bmp", Image.fromarray(gray))
    save("bmp/palette8.bmp", pal_img)
    save("bmp/rgb24.bmp", Image.fromarray(rgb))
    save("bmp/rgba32.bmp", Image.fromarray(rgba, "RGBA"))
    write("bmp/palette4.bmp",
          bmp4_bytes(W, H, rng.integers(0, 16, (H, W)),
                     [tuple(rng.integers(0, 256, 3)) for _ in range(16)]))

    # PPM / PGM
    save("pnm/rgb.ppm", Image.fromarray(rgb))
    save("pnm/gray.pgm", Image.fromarray(gray))
    write("pnm/comment.ppm", b"P6\n# a comment\n2 1\n255\n" + bytes(range(6)))
    write("pnm/gray16.pgm", b"P5\n2 2\n65535\n" + bytes(8), "refused")
    write("pnm/maxval15.pgm", b"P5 2 1 15\n" + bytes((3, 15)), "refused")

    # the rest: a JPEG, the format told by the content, not the name
    save("mixed/a.jpg", Image.fromarray(rgb), "jpeg", quality=90)
    save("mixed/b_png_named.JPG", Image.fromarray(rgb), format="PNG")
    save("mixed/c_upper.PNG", Image.fromarray(gray))
    write("mixed/d_text.png", b"this is not an image\n", "refused")
    write("mixed/notes.txt", b"ignored\n", None)
    save("mixed/e.gif", Image.fromarray(rgb), None)
    return {k: v for k, v in files.items() if v is not None}


def expected_pixels(path):
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def test_formats_pack_as_pillow_reads_them(tmp_path):
    src = tmp_path / "src"
    files = build_tree(str(src))
    r = pack("imagefolder", src, tmp_path / "out", "-j", 2)
    assert r.returncode == 0, r.stderr
    samples, classes = image_folder(str(src))
    listed = {os.path.relpath(p, src) for p, _ in samples}
    assert listed == set(files), "the tree's image files are ImageFolder's"
    kept = [(p, lab) for p, lab in samples
            if files[os.path.relpath(p, src)] != "refused"]
    refused = sorted(k for k, v in files.items() if v == "refused")
    for rel in refused:
        assert f"skipped {rel}: " in r.stderr, (rel, r.stderr)
    assert r.stderr.count("skipped ") == len(refused), r.stderr
    assert f"skipped  {len(refused)} files" in r.stdout
    assert f"raw      {len(kept) - 1} images stored as RGB pixels" in r.stdout
    recs = dump(tmp_path / "out", str(tmp_path))
    assert len(recs) == len(kept)
    for (path, label), (got_label, rec) in zip(kept, recs):
        rel = os.path.relpath(path, src)
        assert got_label == label, rel
        if files[rel] == "jpeg":
            assert rec[:2] == b"\xff\xd8", rel
            continue
        np.testing.assert_array_equal(rfpx(rec), expected_pixels(path),
                                      err_msg=rel)
    v = subprocess.run([PACK, "verify", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)
    assert v.returncode == 0, v.stdout + v.stderr
    # the MANIFEST counts the pixel records (an older reader refuses it) and
    # names zstd, which they are stored with; JPEGs stay as they are
    manifest = open(tmp_path / "out" / "MANIFEST").read().splitlines()
    assert f"raw_images {len(kept) - 1}" in manifest, manifest
    assert "codec zstd" in manifest, manifest


def test_a_jpeg_only_pack_is_as_before(tmp_path):
    src = tmp_path / "src"
    os.makedirs(src / "a")
    Image.fromarray(np.full((40, 30, 3), 90, np.uint8)).save(src / "a" / "x.jpg", quality=90)
    r = pack("imagefolder", src, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    manifest = open(tmp_path / "out" / "MANIFEST").read().splitlines()
    assert "codec none" in manifest and not any(ln.startswith("raw_images") for ln in manifest)


def test_refusal_reasons(tmp_path):
    src = tmp_path / "src"
    build_tree(str(src))
    r = pack("imagefolder", src, tmp_path / "out", "-j", 1)
    assert r.returncode == 0, r.stderr
    reasons = {
        "png/palette_short.png": "PNG: a palette index past",
        "webp/animated.webp": "WebP: animated",
        "tiff/gray16.tif": "TIFF: 1 sample of 16 bits",
        "tiff/cmyk.tif": "TIFF: photometric 5",
        "pnm/gray16.pgm": "PNM: maxval 65535",
        "pnm/maxval15.pgm": "PNM: maxval 15",
        "mixed/d_text.png": "skipped mixed/d_text.png: ",
    }
    for rel, why in reasons.items():
        line = [ln for ln in r.stderr.splitlines() if f"skipped {rel}:" in ln]
        assert line and why in line[0], (rel, r.stderr)
    s = pack("imagefolder", src, tmp_path / "strict", "--strict")
    assert s.returncode != 0 and "--strict: stopping" in s.stderr
    assert not os.path.exists(tmp_path / "strict")


def test_max_side_shrinks_raw_images_by_the_box_filter(tmp_path):
    src = tmp_path / "src" / "c"
    os.makedirs(src)
    rng = np.random.default_rng(3)
    big = rng.integers(0, 256, (32, 64, 3), dtype=np.uint8)
    small = rng.integers(0, 256, (8, 12, 3), dtype=np.uint8)
    Image.fromarray(big).save(src / "big.png")
    Image.fromarray(small).save(src / "small.webp", lossless=True)
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out", "--max-side", 16)
    assert r.returncode == 0, r.stderr
    assert "1 shrunk to 16 px" in r.stdout
    (_, a), (_, b) = dump(tmp_path / "out", str(tmp_path))
    # 64x32 -> 16x8: each output pixel the mean of a 4x4 block, half up
    block = big.reshape(8, 4, 16, 4, 3).astype(np.int64).sum(axis=(1, 3))
    np.testing.assert_array_equal(rfpx(a), ((block + 8) // 16).astype(np.uint8))
    np.testing.assert_array_equal(rfpx(b), small)


def test_image_mode_argument(tmp_path):
    src = tmp_path / "src" / "c"
    os.makedirs(src)
    Image.new("RGB", (4, 4), (1, 2, 3)).save(src / "x.png")
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out", "--image-mode", "raw")
    assert r.returncode == 0, r.stderr
    (_, rec), = dump(tmp_path / "out", str(tmp_path))
    assert rfpx(rec).tolist() == [[[1, 2, 3]] * 4] * 4
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out2", "--image-mode", "png")
    assert r.returncode == 2 and "--image-mode: 'png'" in r.stderr
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out3", "--quality", "80")
    assert r.returncode == 2 and "--quality 80 needs --max-side or --image-mode" in r.stderr
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out4", "--smart-pixels", "10")
    assert r.returncode == 2 and "--smart-pixels 10 needs --image-mode smart" in r.stderr
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out5", "--raw-codec", "lz4")
    assert r.returncode == 2 and "--raw-codec: 'lz4'" in r.stderr
    # uncompressed pixel records: the same pixels, and a MANIFEST that says none
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out6", "--raw-codec", "none")
    assert r.returncode == 0, r.stderr
    (_, rec), = dump(tmp_path / "out6", str(tmp_path))
    assert rfpx(rec).tolist() == [[[1, 2, 3]] * 4] * 4
    manifest = open(tmp_path / "out6" / "MANIFEST").read().splitlines()
    assert "codec none" in manifest and "raw_images 1" in manifest, manifest


def photo(w, h, seed):
    """Smooth content with some texture, as JPEG is made for."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    px = np.stack([128 + 90 * np.sin(x / 17.0 + seed), 255 * y / max(h - 1, 1),
                   128 + 60 * np.cos((x + y) / 23.0)], axis=-1) + rng.normal(0, 4, (h, w, 3))
    return np.clip(px, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("mode", ["jpeg", "smart"])
def test_image_mode_jpeg_and_smart(tmp_path, mode):
    """jpeg: every PNG becomes a JPEG at --quality (lossy, as Pillow's JPEG
    of it at that quality is); smart: raw up to --smart-pixels pixels, JPEG above.
    JPEG files are unchanged either way, and only RFPX records count in
    raw_images."""
    src = tmp_path / "src" / "c"
    os.makedirs(src)
    Image.fromarray(photo(200, 150, 1)).save(src / "a_big.png")      # 30000 px
    Image.fromarray(photo(40, 30, 2)).save(src / "b_small.png")      # 1200 px
    Image.fromarray(photo(120, 80, 3)).save(src / "c.jpg", quality=92)
    args = ["--image-mode", mode, "--quality", "95"]
    if mode == "smart":
        args += ["--smart-pixels", "5000"]
    r = pack("imagefolder", tmp_path / "src", tmp_path / "out", *args)
    assert r.returncode == 0, r.stderr
    recs = [rec for _, rec in dump(tmp_path / "out", str(tmp_path))]
    big, small, jpg = recs
    assert big[:2] == b"\xff\xd8", "the large PNG is stored as a JPEG"
    # as lossy as Pillow's own JPEG of the same pixels at the same quality
    # (both libjpeg-turbo, 4:2:0): within 0.5 of 255 of it on average
    got = np.asarray(Image.open(io.BytesIO(big)).convert("RGB")).astype(int)
    buf = io.BytesIO()
    Image.open(src / "a_big.png").convert("RGB").save(buf, "JPEG", quality=95)
    ref = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")).astype(int)
    assert got.shape == ref.shape
    assert np.abs(got - ref).mean() <= 0.5, np.abs(got - ref).mean()
    if mode == "jpeg":
        assert small[:2] == b"\xff\xd8"
    else:
        np.testing.assert_array_equal(rfpx(small), photo(40, 30, 2))
    assert jpg[:2] == b"\xff\xd8"
    with open(src / "c.jpg", "rb") as f:          # the JPEG file: pixels as they were
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB")),
                                      np.asarray(Image.open(f).convert("RGB")))
    manifest = open(tmp_path / "out" / "MANIFEST").read().splitlines()
    raw = [ln for ln in manifest if ln.startswith("raw_images")]
    assert raw == ([] if mode == "jpeg" else ["raw_images 1"]), raw
    assert "encoded  " + ("2" if mode == "jpeg" else "1") + " images stored as JPEGs at " \
        "quality 95" in r.stdout, r.stdout
    v = subprocess.run([PACK, "verify", str(tmp_path / "out")], capture_output=True,
                       text=True, timeout=300)
    assert v.returncode == 0, v.stdout + v.stderr
