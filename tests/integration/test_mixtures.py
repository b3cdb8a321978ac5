"""Weighted mixtures (docs/design/mixtures.md) through a real daemon and
ringfeed.Loader, over three packs of Fashion-MNIST's test images (the
first 6000, 2000 and 777):
  - every sample's pixels and label are its source's record at the index
    loader.last reports, and each source's samples are its own;
  - every prefix of an epoch (12,000 samples: a's 6000 at 0.5) is within
    one sample of the weights, a's samples each once, the small sources
    wrapping into their next epochs whole;
  - the stream is the same for 1 and 3 workers and after a resume
    mid-epoch, and STATS counts what the loader counted;
  - a config mixture (mixture.NAME), per_stream, repeat=0, two ranks;
  - a mixture of token datasets: each window is its source's slice;
  - refusals, each named: an unknown source, sources of another schema,
    repeat= on a plain dataset, subset=, shuffle=block, epoch_of= naming no
    source, an epoch too long to walk, a config mixture of a dataset the
    config lacks."""
import gzip
import subprocess

import numpy as np
import pytest

import ringfeed
from conftest import FMNIST, Daemon, pack_first, pack_run, ringfeedd

SIZES = {"a": 6000, "b": 2000, "c": 777}
WEIGHTS = {"a": 0.5, "b": 0.3, "c": 0.2}


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    out = {}
    for name, n in SIZES.items():
        root = tmp_path_factory.mktemp(f"mix-{name}")
        out[name] = pack_first(root, n)
    return out


@pytest.fixture(scope="module")
def fmnist():
    with gzip.open(f"{FMNIST}/t10k-images-idx3-ubyte.gz") as f:
        img = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(f"{FMNIST}/t10k-labels-idx1-ubyte.gz") as f:
        lab = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return img, lab


def conf_file(tmp_path, lines):
    p = tmp_path / "ringfeedd.conf"
    p.write_text("".join(line + "\n" for line in lines))
    return str(p)


def start(packs, tmp_path, workers=2, conf=()):
    d = Daemon(packs, workers=workers,
               extra=["--config", conf_file(tmp_path, conf)] if conf else [])
    return d.start()


def epoch_of(loader, check=None):
    """One epoch: [(source number, index in the source, label)] in order."""
    out = []
    for x, y in loader:
        info = loader.last
        rows = list(zip(info.sources.tolist(), info.source_indices.tolist(),
                        np.asarray(y).tolist()))
        if check:
            check(np.asarray(x), rows)
        out += rows
    return out


def test_samples_are_their_sources_records(packs, fmnist, tmp_path):
    img, lab = fmnist
    d = start(packs, tmp_path)
    try:
        loader = ringfeed.Loader(WEIGHTS, 100, socket=d.sock, seed=3, output="numpy")
        assert loader.sources == [("a", 0), ("b", 6000), ("c", 8000)]
        assert len(loader) == 120

        def check(x, rows):
            for k, (s, i, y) in enumerate(rows):
                assert 0 <= i < SIZES["abc"[s]]
                assert np.array_equal(x[k, 0], img[i]) and y == lab[i], (s, i)

        rows = epoch_of(loader, check)
        loader.close()
    finally:
        d.cleanup()
    assert len(rows) == 12000
    counts = [0, 0, 0]
    worst = 0.0
    shares = [WEIGHTS[n] for n in "abc"]
    for p, (s, _, _) in enumerate(rows, 1):
        counts[s] += 1
        worst = max(worst, max(abs(counts[k] - shares[k] * p) for k in range(3)))
    assert worst <= 1.0, worst
    assert counts == [6000, 3600, 2400]
    a = sorted(i for s, i, _ in rows if s == 0)
    assert a == list(range(6000)), "a's samples each once an epoch"
    c = np.bincount([i for s, i, _ in rows if s == 2], minlength=777)
    assert c.min() >= 3 and c.max() <= 4, "c's epochs come whole"


def test_same_for_one_and_three_workers_and_after_a_resume(packs, tmp_path):
    kw = dict(seed=7, output="numpy")
    runs = []
    for workers in (1, 3):
        d = start(packs, tmp_path, workers=workers)
        try:
            loader = ringfeed.Loader(WEIGHTS, 64, socket=d.sock, **kw)
            rows = epoch_of(loader)
            # STATS counts the batches published: the epoch, and the first
            # k of the next (the ring runs ahead), which blends as the
            # epoch's first k did
            st = d.stats()
            cid = next(k.split(".")[1] for k in st if k.endswith(".mix"))
            ahead = int(st[f"clients.{cid}.batches"]) - 188
            counts = {n: 0 for n in "abc"}
            for s, _, _ in rows + rows[:ahead * 64]:
                counts["abc"[s]] += 1
            mix = st[f"clients.{cid}.mix"]
            assert mix == ",".join(f"{n}:{counts[n]}" for n in "abc"), (mix, counts)
            loader.close()
            runs.append(rows)
            if workers == 3:
                first = ringfeed.Loader(WEIGHTS, 64, socket=d.sock, **kw)
                it = iter(first)
                got = []
                for _ in range(70):
                    next(it)
                    info = first.last
                    got += list(zip(info.sources.tolist(), info.source_indices.tolist()))
                state = first.state_dict()
                first.close()
                second = ringfeed.Loader(WEIGHTS, 64, socket=d.sock, **kw)
                second.load_state_dict(state)
                got += [(s, i) for s, i, _ in epoch_of(second)]
                second.close()
                assert got == [(s, i) for s, i, _ in rows]
        finally:
            d.cleanup()
    assert runs[0] == runs[1]


def test_config_mixture_per_stream_no_repeat_and_ranks(packs, tmp_path):
    d = start(packs, tmp_path, conf=["mixture.blend = a:5 b:3 c:2"])
    try:
        loader = ringfeed.Loader("blend", 50, socket=d.sock, seed=1, output="numpy",
                                 per_stream=True)
        seen = []
        for _ in loader:
            counts = loader.last.source_counts
            assert sorted(counts.values()) == [0, 0, 50], counts
            seen.append(next(n for n, c in counts.items() if c))
        loader.close()
        assert len(seen) == 240 and seen.count("a") == 120  # a: 6000 in batches of 50
        worst = max(abs(seen[:p].count(n) - WEIGHTS[n] * p)
                    for p in range(1, len(seen) + 1) for n in "abc")
        assert worst <= 1.0

        # repeat=0: the epoch ends as c (777 at 0.2) runs out, nothing twice
        loader = ringfeed.Loader("blend", 100, socket=d.sock, output="numpy", repeat=False)
        rows = epoch_of(loader)
        loader.close()
        assert 3880 <= len(rows) <= 3890
        assert len(set((s, i) for s, i, _ in rows)) == len(rows)
        assert sum(1 for s, _, _ in rows if s == 2) == 777

        # two ranks: one blend, a's samples split between them, each once
        both = []
        for rank in (0, 1):
            loader = ringfeed.Loader("blend", 100, socket=d.sock, rank=rank, world_size=2,
                                     seed=4, output="numpy")
            both.append(epoch_of(loader))
            loader.close()
        assert [s for s, _, _ in both[0]] == [s for s, _, _ in both[1]]
        a = sorted(i for rows in both for s, i, _ in rows if s == 0)
        assert a == list(range(6000))
    finally:
        d.cleanup()


def token_pack(tmp_path, name, seed):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 65535, size=int(rng.integers(1, 200))) for _ in range(60)]
    files = []
    for k, doc in enumerate(docs):
        p = tmp_path / f"{name}-{k}.npy"
        np.save(p, doc.astype("<u2"))
        files.append(p)
    r = pack_run("tokens", "--format", "npy", "--shard-size", "4K", *files, tmp_path / name)
    assert r.returncode == 0, r.stderr
    return str(tmp_path / name), np.concatenate(docs).astype(np.int64)


def test_token_mixture_windows_are_their_sources_slices(tmp_path):
    L = 31
    x, xs = token_pack(tmp_path, "x", 1)
    y, ys = token_pack(tmp_path, "y", 2)
    d = Daemon({"x": x, "y": y}, workers=2).start()
    try:
        loader = ringfeed.Loader({"x": 0.75, "y": 0.25}, 16, socket=d.sock,
                                 transform="tokens", context=L, output="numpy")
        got = {0: [], 1: []}
        for w in loader:
            info = loader.last
            for row, s, i in zip(np.asarray(w), info.sources.tolist(),
                                 info.source_indices.tolist()):
                stream = xs if s == 0 else ys
                assert np.array_equal(row.astype(np.int64), stream[i * L:i * L + L + 1])
                got[s].append(i)
        loader.close()
        # the epoch is x's windows, each once; y gives a third as many
        assert sorted(got[0]) == list(range((len(xs) - 1) // L))
        assert abs(len(got[1]) * 3 - len(got[0])) <= 3
    finally:
        d.cleanup()


def refused(d, dataset, match, **kw):
    with pytest.raises(ringfeed.Error, match=match):
        ringfeed.Loader(dataset, 10, socket=d.sock, **kw)


def test_refusals_named(packs, tmp_path):
    tok, _ = token_pack(tmp_path, "t", 3)
    d = Daemon(dict(packs, tok=tok), workers=1).start()
    try:
        refused(d, {"a": 1, "nope": 1}, 'mixture mix=: no dataset "nope"')
        refused(d, {"a": 1, "tok": 1}, "mixture mix=: a and tok differ")
        refused(d, "a", "repeat= is for mixtures", repeat=False)
        refused(d, WEIGHTS, "subset= with a mixture", subset=(0, 10))
        refused(d, WEIGHTS, "shuffle=block with a mixture", shuffle="block")
        refused(d, WEIGHTS, "epoch_of=z is not one of the mixture's sources", epoch_of="z")
        # an epoch the walk would take too long for (a's 6000 at a billionth):
        # refused from the thread pool, the daemon serving meanwhile
        refused(d, {"a": 1e-9, "b": 1}, "an epoch of over 536870912 positions")
        with pytest.raises(ringfeed.Error, match="a mixture needs 2"):
            ringfeed.Loader({"a": 1}, 10, socket=d.sock)
        with pytest.raises(ringfeed.Error, match="weight b=0"):
            ringfeed.Loader({"a": 1, "b": 0}, 10, socket=d.sock)
        # the daemon still serves
        loader = ringfeed.Loader("a", 10, socket=d.sock, output="numpy")
        next(iter(loader))
        loader.close()
    finally:
        d.cleanup()
    bad = conf_file(tmp_path, ["mixture.m = a:1 zz:1"])
    r = subprocess.run([ringfeedd(), "--socket", str(tmp_path / "s"), "--config", bad,
                        "--dataset", f"a={packs['a']}"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0 and "mixture.m: zz is not a dataset of this config" in r.stderr
