"""test_subsets.py - named index sets and ranges (proto/subset.h): ringfeed-pack
split, info and verify; ringfeed.split writing the tool's bytes; ATTACH
subset= through ringfeed.Loader and ringfeed-read on one daemon that is
never restarted.

  - the tool: split, info's listing, verify clean; a re-split refused
    without --force, replacing with it (old files gone); bad arguments;
  - ringfeed.split gives byte-identical set files and MANIFEST to the
    tool's for the same arguments (stratified too), and another seed
    another split; the dataset's identity is unchanged by a split (the
    daemon serves the pack it opened before the split);
  - train and val loaders on one daemon, the split made while it runs:
    disjoint, their union the whole dataset, each index once per epoch,
    len() and num_samples the subset's, across two ranks too;
  - resume inside a subset: state_dict() then a new loader continues with
    exactly the batches the first would have given;
  - ranges: (start, stop), range, slice, open ends; out of bounds, empty,
    negative and stepped ranges refused with messages naming the bounds;
  - an unknown name lists the pack's sets; a corrupted set file is named
    by verify and by the daemon's refusal; the daemon still serves.
"""
import filecmp
import os
import shutil
import subprocess

import pytest

import ringfeed
from conftest import FMNIST, pack_run, pack_tool, read_tool

N = 10000  # Fashion-MNIST's test set


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """The Fashion-MNIST test set packed once (no sets)."""
    dest = tmp_path_factory.mktemp("subsets") / "fm"
    subprocess.run([pack_tool(), "idx", "--images", f"{FMNIST}/t10k-images-idx3-ubyte.gz",
                    "--labels", f"{FMNIST}/t10k-labels-idx1-ubyte.gz", str(dest)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(dest)


def fresh(pack, tmp_path, name):
    d = str(tmp_path / name)
    shutil.copytree(pack, d)
    return d


def sets_of(d):
    return sorted(f for f in os.listdir(d) if f.startswith("subset-"))


def test_tool_split_info_verify(pack, tmp_path):
    d = fresh(pack, tmp_path, "a")
    r = pack_run("split", d, "--val", "0.1", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert "subset train: 9000 samples" in r.stdout and "subset val: 1000 samples" in r.stdout
    info = pack_run("info", d).stdout
    assert "subsets   2" in info and "train" in info and "val" in info and "10.0%" in info
    v = pack_run("verify", d)
    assert v.returncode == 0 and "0 problems" in v.stdout, v.stdout
    before = sets_of(d)
    r = pack_run("split", d, "--val", "500")
    assert r.returncode == 1 and "--force replaces them" in r.stderr, r.stderr
    assert sets_of(d) == before
    r = pack_run("split", d, "--val", "500", "--force", "--names", "fit,holdout")
    assert r.returncode == 0, r.stderr
    assert len(sets_of(d)) == 4  # other names: the first split's sets stay
    r = pack_run("split", d, "--val", "500", "--force")
    assert r.returncode == 0 and "replaced 2" in r.stdout
    assert len(sets_of(d)) == 4 and not set(before) & set(sets_of(d))  # old files removed
    for args, want in ((["--val", "1.0"], "--val"), (["--val", "0"], "--val"),
                       (["--val", "10000"], "1..9999"), ([], "--val is required"),
                       (["--val", "0.1", "--names", "a"], "--names"),
                       (["--val", "0.1", "--names", "9a,b"], "starting with a letter"),
                       (["--val", "0.1", "--names", "a,a"], "two names")):
        r = pack_run("split", d, *args)
        assert r.returncode != 0 and want in r.stderr, (args, r.stderr)


def test_python_split_is_the_tools(pack, tmp_path):
    for stratify in (False, True):
        a, b = fresh(pack, tmp_path, f"t{stratify}"), fresh(pack, tmp_path, f"p{stratify}")
        args = ["--val", "0.15", "--seed", "11"] + (["--stratify"] if stratify else [])
        assert pack_run("split", a, *args).returncode == 0
        got = ringfeed.split(b, 0.15, stratify=stratify, seed=11)
        assert got["train"] == N - 1500 and got["val"] == 1500
        assert sets_of(a) == sets_of(b)
        for f in sets_of(a) + ["MANIFEST"]:
            assert filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False), f
    c = fresh(pack, tmp_path, "c")
    ringfeed.split(c, 1500, seed=12)
    assert sets_of(c) != sets_of(b)
    with pytest.raises(ringfeed.Error, match="--force"):
        ringfeed.split(c, 0.2)
    assert ringfeed.split(c, 0.2, force=True)["replaced"] == 2
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        ringfeed.split(c, 1.5, force=True)
    with pytest.raises(TypeError):
        ringfeed.split(c, "0.1", force=True)


def stratified_counts(d, name):
    loader = ringfeed.Loader("fm", 1000, socket=d.sock, subset=name, shuffle=False,
                             output="numpy")
    counts = [0] * 10
    for _, labels in loader:
        for v in labels:
            counts[int(v)] += 1
    loader.close()
    return counts


def epoch_indices(loader):
    out = []
    for _ in loader:
        out += [int(i) for i, f in zip(loader.last.indices, loader.last.flags) if not f & 1]
    return out


def test_loaders_on_one_daemon(pack, tmp_path, daemon_factory):
    dpath = fresh(pack, tmp_path, "live")
    d = daemon_factory({"fm": dpath}, workers=2)
    # the split made while the daemon serves the pack: offered at once
    ringfeed.split(dpath, 0.2, stratify=True, seed=4)
    tr = ringfeed.Loader("fm", 128, socket=d.sock, subset="train", seed=1, output="numpy")
    va = ringfeed.Loader("fm", 128, socket=d.sock, subset="val", seed=1, output="numpy")
    assert tr.subsets == {"train": 8000, "val": 2000}
    assert (tr.num_samples, va.num_samples) == (8000, 2000)
    assert (len(tr), len(va)) == (63, 16)
    assert (tr.subset, va.subset) == ("train", "val")
    a, b = epoch_indices(tr), epoch_indices(va)
    assert len(a) == len(set(a)) == 8000 and len(b) == len(set(b)) == 2000
    assert not set(a) & set(b) and set(a) | set(b) == set(range(N))
    assert stratified_counts(d, "val") == [200] * 10
    # two ranks of the val set: every index once, padding aside
    ranks = [ringfeed.Loader("fm", 64, socket=d.sock, subset="val", rank=r, world_size=3,
                             output="numpy") for r in range(3)]
    got = sum((epoch_indices(l) for l in ranks), [])
    assert sorted(got) == sorted(b)
    for loader in ranks + [tr, va]:
        loader.close()
    st = d.stats()
    assert int(st["workers.alive"]) >= 1


def test_resume_inside_a_subset(pack, tmp_path, daemon_factory):
    dpath = fresh(pack, tmp_path, "resume")
    ringfeed.split(dpath, 0.3, seed=8)
    d = daemon_factory({"fm": dpath}, workers=2)
    kw = dict(socket=d.sock, subset="val", seed=5, output="numpy")
    whole = ringfeed.Loader("fm", 100, **kw)
    want = [list(whole.last.indices) for _ in whole]
    whole.close()
    first = ringfeed.Loader("fm", 100, **kw)
    it = iter(first)
    got = [list((next(it), first.last.indices)[1]) for _ in range(7)]
    state = first.state_dict()
    assert state["subset"] == "val"
    first.close()
    second = ringfeed.Loader("fm", 100, **kw)
    second.load_state_dict(state)
    got += [list(second.last.indices) for _ in second]
    assert got == want
    other = ringfeed.Loader("fm", 100, socket=d.sock, subset="train", seed=5, output="numpy")
    with pytest.raises(ValueError, match="subset"):
        other.load_state_dict(state)
    other.close()
    second.close()


def test_ranges(pack, daemon_factory):
    d = daemon_factory({"fm": pack}, workers=2)
    for subset, lo, hi in (((100, 300), 100, 300), (range(9000, 10000), 9000, 10000),
                           (slice(None, 50), 0, 50), (slice(9990, None), 9990, 10000)):
        loader = ringfeed.Loader("fm", 32, socket=d.sock, subset=subset, output="numpy")
        assert loader.num_samples == hi - lo
        assert sorted(epoch_indices(loader)) == list(range(lo, hi)), subset
        loader.close()
    for subset, err, want in (((5, 20000), ringfeed.Error, "outside dataset fm's 10000"),
                              ((10000, 10001), ringfeed.Error, "outside"),
                              ((7, 7), ringfeed.Error, "empty"), ((-5, 10), ringfeed.Error, "from 0"),
                              (range(0, 10, 2), ringfeed.Error, "step"),
                              ("nope", ringfeed.Error, "its subsets|no subsets"),
                              ("bad name", ringfeed.Error, "letter"), (3, ringfeed.Error, "name")):
        with pytest.raises(err, match=want):
            ringfeed.Loader("fm", 32, socket=d.sock, subset=subset)
    r = subprocess.run([read_tool(), "--socket", d.sock, "--dataset", "fm", "--batch", "50",
                        "--epochs", "1", "--subset", "200:300", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and '"samples":100' in r.stdout, r.stdout + r.stderr
    r = subprocess.run([read_tool(), "--socket", d.sock, "--dataset", "fm", "--batch", "50",
                        "--epochs", "1", "--subset", "val x=1"], capture_output=True, text=True)
    assert r.returncode == 2 and "no blanks" in r.stderr
    assert int(d.stats()["workers.alive"]) >= 1


def test_damaged_set_named(pack, tmp_path, daemon_factory):
    dpath = fresh(pack, tmp_path, "bad")
    ringfeed.split(dpath, 0.1, seed=2)
    d = daemon_factory({"fm": dpath}, workers=2)
    with pytest.raises(ringfeed.Error, match="its subsets: train val"):
        ringfeed.Loader("fm", 32, socket=d.sock, subset="test")
    val = [f for f in sets_of(dpath) if f.startswith("subset-val-")][0]
    with open(os.path.join(dpath, val), "r+b") as f:
        f.seek(30)
        b = f.read(1)
        f.seek(30)
        f.write(bytes([b[0] ^ 0x40]))
    v = pack_run("verify", dpath)
    assert v.returncode == 1 and val in v.stdout and "checksum mismatch" in v.stdout, v.stdout
    with pytest.raises(ringfeed.Error, match=f"{val}.*checksum mismatch"):
        ringfeed.Loader("fm", 32, socket=d.sock, subset="val")
    # the daemon still serves: the other set and the whole dataset
    for subset in ("train", None):
        loader = ringfeed.Loader("fm", 500, socket=d.sock, subset=subset, output="numpy")
        next(iter(loader))
        loader.close()
