"""A Loader's metadata against a real daemon: classes, class_to_idx,
num_samples and source(i) (the CLASSES and SOURCES verbs, the source list
ringfeed-pack imagefolder records), checked against torchvision's
ImageFolder on a tree the test makes, with a file the packer skips so that
the dataset's indices and ImageFolder's differ after it.
"""
import errno
import io
import os

import pytest

import ringfeed
from conftest import ctl, pack_tool, raw_request

import subprocess

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def image_folder(root):
    """(classes, class_to_idx, samples) of torchvision.datasets.ImageFolder(root):
    torchvision's own when it imports, else the same walk (its
    find_classes and make_dataset: sorted class folders, os.walk with
    followlinks, sorted folders and names, the extension filter)."""
    try:
        from torchvision.datasets import ImageFolder
        f = ImageFolder(root)
        return f.classes, f.class_to_idx, f.samples
    except ImportError:
        pass
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    class_to_idx = {c: i for i, c in enumerate(classes)}
    samples = []
    for c in sorted(class_to_idx):
        for dirpath, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for name in sorted(names):
                if name.lower().endswith(IMG_EXTENSIONS):
                    samples.append((os.path.join(dirpath, name), class_to_idx[c]))
    return classes, class_to_idx, samples


def jpeg(seed):
    from PIL import Image
    img = Image.new("RGB", (24 + seed % 7, 20), (seed * 40 % 256, seed * 90 % 256, 77))
    out = io.BytesIO()
    img.save(out, "JPEG", quality=90)
    return out.getvalue()


# the tree: three classes (one with a space in its name, one holding a
# subfolder), a file whose content is not an image (the packer skips it,
# ImageFolder lists it), and names a source list escapes: a newline, a
# backslash, a byte that is not UTF-8
TREE = {
    "ant/a1.jpg": 1, "ant/a2.JPG": 2, "ant/sub/a3.jpeg": 3,
    "bee hive/b1.jpg": 4, "bee hive/b2_bad.jpg": None, "bee hive/b3.jpg": 5,
    "cat/c\nline.jpg": 6, "cat/c\\back.jpg": 7, "cat/c\udcff.jpg": 8, "cat/readme.txt": 9,
}


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("meta")
    tree = os.path.join(root, "tree")
    for rel, seed in TREE.items():
        path = os.path.join(tree, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"GIF89a" + bytes(20) if seed is None else jpeg(seed))
    ds = os.path.join(root, "ds")
    r = subprocess.run([pack_tool(), "imagefolder", "-j", "2", tree, ds], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert b"b2_bad.jpg" in r.stderr  # named as skipped
    bare = os.path.join(root, "bare")
    subprocess.run([pack_tool(), "imagefolder", "--no-sources", tree, bare], check=True,
                   capture_output=True)
    return {"tree": tree, "ds": ds, "bare": bare}


@pytest.fixture
def daemon(daemon_factory, packed):
    return daemon_factory({"imgs": packed["ds"], "bare": packed["bare"]})


def test_manifest_names_the_source_list(packed):
    manifest = open(os.path.join(packed["ds"], "MANIFEST")).read()
    size = os.path.getsize(os.path.join(packed["ds"], "sources.txt"))
    assert f"\nsources sources.txt {size} " in manifest
    assert "sources" not in open(os.path.join(packed["bare"], "MANIFEST")).read()
    lines = open(os.path.join(packed["ds"], "sources.txt"), "rb").read().split(b"\n")
    assert b"cat/c\\x0aline.jpg" in lines and b"cat/c\\\\back.jpg" in lines
    assert b"cat/c\\xff.jpg" in lines


def test_metadata_matches_imagefolder(packed, daemon):
    classes, class_to_idx, samples = image_folder(packed["tree"])
    kept = [os.path.relpath(p, packed["tree"]) for p, _ in samples
            if not p.endswith("b2_bad.jpg")]
    assert len(kept) == len(samples) - 1 == 8
    with ringfeed.Loader("imgs", batch_size=3, transform="eval", size=16, seed=5,
                         socket=daemon.sock) as loader:
        assert loader.classes == classes == ["ant", "bee hive", "cat"]
        assert loader.class_to_idx == class_to_idx
        assert loader.num_samples == len(kept)
        assert [loader.source(i) for i in range(loader.num_samples)] == kept
        assert loader.source(-1) == kept[-1]
        with pytest.raises(IndexError, match="has 8 samples"):
            loader.source(8)
        # every delivered label is the class folder of its sample's file
        seen = set()
        for _, labels in loader:
            for idx, label in zip(loader.last.indices.tolist(), labels.tolist()):
                assert class_to_idx[loader.source(idx).split("/")[0]] == label
                seen.add(idx)
        assert seen == set(range(len(kept)))
        assert loader.fields is None or [f["name"] for f in loader.fields][-1] == "label"


def test_without_a_source_list(daemon):
    with ringfeed.Loader("bare", batch_size=4, transform="eval", size=16,
                         socket=daemon.sock) as loader:
        assert loader.classes == ["ant", "bee hive", "cat"]
        with pytest.raises(ringfeed.Error, match="no source list") as e:
            loader.source(0)
        assert e.value.errno == errno.ENOENT
        assert "--no-sources" in str(e.value)


def test_verbs_on_the_wire(daemon):
    assert raw_request(daemon.sock, b"CLASSES imgs\n") == b"OK 3\nant\nbee hive\ncat\n"
    assert raw_request(daemon.sock, b"SOURCES imgs 6 5\n") == (
        b"OK 2\ncat/c\\\\back.jpg\ncat/c\\xff.jpg\n")
    assert raw_request(daemon.sock, b"SOURCES imgs 8 1\n").startswith(
        b"ERR bad-arg SOURCES: start 8 is past dataset imgs's 8 samples")
    assert raw_request(daemon.sock, b"CLASSES nope\n").startswith(b"ERR no-dataset no dataset nope")
    assert raw_request(daemon.sock, b"SOURCES bare 0 1\n").startswith(
        b"ERR no-dataset dataset bare has no source list")


def test_a_damaged_source_list_is_refused(packed, daemon_factory, tmp_path):
    import shutil
    ds = str(tmp_path / "ds")
    shutil.copytree(packed["ds"], ds)
    path = os.path.join(ds, "sources.txt")
    data = bytearray(open(path, "rb").read())
    data[0] ^= 1
    os.chmod(path, 0o644)
    open(path, "wb").write(bytes(data))
    d = daemon_factory({"imgs": ds})
    reply = raw_request(d.sock, b"SOURCES imgs 0 1\n")
    assert reply.startswith(b"ERR bad-dataset dataset imgs's source list: ")
    assert b"checksum mismatch" in reply


def test_ringfeedctl_classes_and_sources(daemon):
    assert ctl(daemon.sock, "classes", "imgs").stdout == "ant\nbee hive\ncat\n"
    assert ctl(daemon.sock, "--json", "classes", "imgs").stdout.strip() == (
        '{"classes":["ant","bee hive","cat"]}')
    out = ctl(daemon.sock, "sources", "imgs", "0", "4096").stdout.splitlines()
    assert out[:2] == ["ant/a1.jpg", "ant/a2.JPG"] and len(out) == 8
    r = ctl(daemon.sock, "sources", "bare", "0", "1", check=False)
    assert r.returncode == 1 and "has no source list" in r.stderr
    r = ctl(daemon.sock, "sources", "imgs", "0", check=False)
    assert r.returncode == 2 and "three arguments" in r.stderr


def test_verify_checks_the_source_list(packed, tmp_path):
    import shutil
    r = subprocess.run([pack_tool(), "verify", packed["ds"]], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    ds = str(tmp_path / "ds")
    shutil.copytree(packed["ds"], ds)
    path = os.path.join(ds, "sources.txt")
    os.chmod(path, 0o644)
    with open(path, "ab") as f:
        f.write(b"x\n")
    r = subprocess.run([pack_tool(), "verify", ds], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout
    assert "sources.txt: source list is" in r.stdout and "1 problem" in r.stdout
