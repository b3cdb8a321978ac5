"""Token datasets (docs/design/tokens.md): `ringfeed-pack tokens` from
nanoGPT .bin files, NumPy .npy files and Megatron-LM .bin/.idx pairs (all
written here with numpy), checked record by record against the inputs'
documents; bad inputs refused naming the file and what; ringfeed.Writer's
ragged field making the same pack from Python.  Then ATTACH
transform=tokens through ringfeed.Loader on a real daemon:
  - every window equals the concatenated stream's slice at the index
    loader.last reports (u16 and i32, documents and small shards crossed),
    each window once an epoch, for 1 and 3 workers alike;
  - three ranks' windows of an epoch are every window once (the padding
    aside);
  - a resume mid-epoch gives the batches an uninterrupted run gives;
  - doc_ids follow the documents' boundaries;
  - refusals: a pack that is not a token dataset, zstd records, context=
    missing or with another transform, subset=, field=."""
import os
import struct

import numpy as np
import pytest

import ringfeed
from conftest import dump_records, pack_run

L = 37


def docs_of(path, tmp):
    """The pack's documents, in order: (dtype, [numpy arrays])."""
    mf = open(os.path.join(path, "MANIFEST")).read()
    dtype = np.uint16 if "dtype=u16" in mf else np.int32
    out = []
    for label, rec in dump_records(path, tmp):
        (n,) = struct.unpack_from("<I", rec, 0)
        assert n + 4 == len(rec)
        out.append(np.frombuffer(rec[4:], dtype=np.dtype(dtype).newbyteorder("<")))
    return dtype, out


def split_eot(tokens, eot):
    """Documents of tokens ending after each eot, the rest last."""
    docs, start = [], 0
    for i, t in enumerate(tokens):
        if t == eot:
            docs.append(tokens[start:i + 1])
            start = i + 1
    if start < len(tokens):
        docs.append(tokens[start:])
    return docs


def same_docs(got, want):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(g.astype(np.int64), np.asarray(w, dtype=np.int64)), k


def random_docs(rng, n, hi, longest=300):
    return [rng.integers(0, hi, size=int(rng.integers(1, longest))) for _ in range(n)]


def write_megatron(prefix, docs, code, np_dtype, seqs_per_doc=1):
    """A Megatron-core .bin/.idx pair: each document cut into
    seqs_per_doc sequences (the last may be empty)."""
    sizes, pointers, doc_idx, at = [], [], [0], 0
    with open(prefix + ".bin", "wb") as b:
        for d in docs:
            cuts = np.array_split(np.asarray(d), seqs_per_doc)
            for c in cuts:
                arr = c.astype(np_dtype)
                b.write(arr.tobytes())
                sizes.append(len(arr))
                pointers.append(at)
                at += arr.nbytes
            doc_idx.append(len(sizes))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(sizes)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(np.array(sizes, dtype="<i4").tobytes())
        f.write(np.array(pointers, dtype="<i8").tobytes())
        f.write(np.array(doc_idx, dtype="<i8").tobytes())


def test_bin_one_document_per_file_and_split_by_eot(tmp_path):
    rng = np.random.default_rng(1)
    files, docs = [], []
    for i in range(3):
        d = rng.integers(0, 65535, size=1000 + i, dtype=np.uint16)
        p = tmp_path / f"part{i}.bin"
        d.astype("<u2").tofile(p)
        files.append(p)
        docs.append(d)
    r = pack_run("tokens", "--format", "bin", *files, tmp_path / "one", "--shard-size", "4096")
    assert r.returncode == 0, r.stderr
    assert "tokens   3003 (u16) in 3 documents" in r.stdout
    dtype, got = docs_of(tmp_path / "one", tmp_path)
    assert dtype == np.uint16
    same_docs(got, docs)

    # nanoGPT's layout: one train.bin, the end-of-text token after each
    # document; an empty document (two eots in a row) left out
    eot = 50256
    stream = np.concatenate([np.append(d % 50000, eot) for d in random_docs(rng, 40, 50000)] +
                            [np.array([eot, 7, 8, 9])]).astype("<u2")
    stream.tofile(tmp_path / "train.bin")
    r = pack_run("tokens", "--format", "bin", "--eot", eot, tmp_path / "train.bin",
                 tmp_path / "eot", "--shard-size", "8K")
    assert r.returncode == 0, r.stderr
    want = split_eot(stream.tolist(), eot)
    want = [w for w in want if len(w)]
    _, got = docs_of(tmp_path / "eot", tmp_path)
    same_docs(got, want)
    assert np.array_equal(np.concatenate(got), stream)
    assert int(open(tmp_path / "eot" / "MANIFEST").read().split("\nshards ")[1].split()[0]) > 1

    # --dtype i32 widens
    r = pack_run("tokens", "--format", "bin", "--dtype", "i32", files[0], tmp_path / "wide")
    assert r.returncode == 0, r.stderr
    dtype, got = docs_of(tmp_path / "wide", tmp_path)
    assert dtype == np.int32
    same_docs(got, docs[:1])


def test_npy_types_and_ranges(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.integers(0, 65536, size=500).astype("<u2")
    b = rng.integers(0, 2**31 - 1, size=300).astype("<u4")
    c = rng.integers(0, 100000, size=200).astype(">i8")   # big-endian, read as such
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "c.npy", c)
    r = pack_run("tokens", "--format", "npy", tmp_path / "a.npy", tmp_path / "u16")
    assert r.returncode == 0, r.stderr
    dtype, got = docs_of(tmp_path / "u16", tmp_path)
    assert dtype == np.uint16
    same_docs(got, [a])
    r = pack_run("tokens", "--format", "npy", tmp_path / "a.npy", tmp_path / "b.npy",
                 tmp_path / "c.npy", tmp_path / "i32")
    assert r.returncode == 0, r.stderr
    dtype, got = docs_of(tmp_path / "i32", tmp_path)
    assert dtype == np.int32      # chosen: an input wider than u16
    same_docs(got, [a, b, c])

    # a value past the chosen dtype is refused naming the file and the token
    r = pack_run("tokens", "--format", "npy", "--dtype", "u16", tmp_path / "b.npy",
                 tmp_path / "x")
    assert r.returncode == 1
    assert "b.npy: token 0" in r.stderr and "use --dtype i32" in r.stderr
    neg = np.array([1, 2, -3], dtype="<i4")
    np.save(tmp_path / "neg.npy", neg)
    r = pack_run("tokens", "--format", "npy", tmp_path / "neg.npy", tmp_path / "x")
    assert r.returncode == 1 and "neg.npy: token 2" in r.stderr and "-3" in r.stderr
    assert not os.path.exists(tmp_path / "x")


def test_megatron_pairs_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    docs = random_docs(rng, 30, 65535)
    write_megatron(str(tmp_path / "m16"), docs, 8, "<u2", seqs_per_doc=2)
    r = pack_run("tokens", "--format", "megatron", tmp_path / "m16", tmp_path / "p16")
    assert r.returncode == 0, r.stderr
    dtype, got = docs_of(tmp_path / "p16", tmp_path)
    assert dtype == np.uint16
    same_docs(got, docs)

    docs32 = random_docs(rng, 20, 200000)
    write_megatron(str(tmp_path / "m32"), docs32, 4, "<i4")
    # a prefix given as its .idx, two pairs in one pack
    r = pack_run("tokens", "--format", "megatron", str(tmp_path / "m32") + ".idx",
                 str(tmp_path / "m16") + ".bin", tmp_path / "p32")
    assert r.returncode == 0, r.stderr
    dtype, got = docs_of(tmp_path / "p32", tmp_path)
    assert dtype == np.int32
    same_docs(got, docs32 + docs)


def refused(tmp_path, args, *needles):
    r = pack_run("tokens", *args, tmp_path / "out")
    assert r.returncode in (1, 2), r
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    assert not os.path.exists(tmp_path / "out")
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".out.tmp")]


def test_bad_inputs_named(tmp_path):
    (tmp_path / "odd.bin").write_bytes(b"\x01\x00\x02")
    refused(tmp_path, ["--format", "bin", tmp_path / "odd.bin"], "odd.bin", "odd length")
    np.save(tmp_path / "f.npy", np.array([1.0, 2.0], dtype=np.float32))
    refused(tmp_path, ["--format", "npy", tmp_path / "f.npy"], "f.npy", "f4",
            "tokens are integers")
    np.save(tmp_path / "two.npy", np.zeros((2, 3), dtype=np.uint16))
    refused(tmp_path, ["--format", "npy", tmp_path / "two.npy"], "two.npy", "2 dims")
    (tmp_path / "junk.npy").write_bytes(b"not a numpy file at all")
    refused(tmp_path, ["--format", "npy", tmp_path / "junk.npy"], "junk.npy")

    docs = [np.arange(10), np.arange(5)]
    write_megatron(str(tmp_path / "m"), docs, 8, "<u2")
    idx = (tmp_path / "m.idx").read_bytes()
    (tmp_path / "bad.bin").write_bytes((tmp_path / "m.bin").read_bytes())
    (tmp_path / "bad.idx").write_bytes(b"MMIDIDY\x00\x00" + idx[9:])
    refused(tmp_path, ["--format", "megatron", tmp_path / "bad"], "bad.idx", "magic")
    # a sequence count past the file
    (tmp_path / "bad.idx").write_bytes(idx[:18] + struct.pack("<Q", 1 << 40) + idx[26:])
    refused(tmp_path, ["--format", "megatron", tmp_path / "bad"], "bad.idx", "byte 18",
            "sequences need more")
    # a .bin shorter than its sequences
    (tmp_path / "bad.idx").write_bytes(idx)
    (tmp_path / "bad.bin").write_bytes((tmp_path / "m.bin").read_bytes()[:-2])
    refused(tmp_path, ["--format", "megatron", tmp_path / "bad"], "bad.idx", "sequence 1",
            "pass the end")
    # float codes are not tokens
    (tmp_path / "bad.bin").write_bytes((tmp_path / "m.bin").read_bytes())
    (tmp_path / "bad.idx").write_bytes(idx[:17] + b"\x07" + idx[18:])
    refused(tmp_path, ["--format", "megatron", tmp_path / "bad"], "bad.idx", "code 7",
            "integers")
    refused(tmp_path, ["--format", "megatron", tmp_path / "nothere"], "nothere.idx")
    refused(tmp_path, ["--format", "megatron", "--eot", "3", tmp_path / "m"], "--eot")
    refused(tmp_path, ["--format", "csv", tmp_path / "m"], "--format")
    (tmp_path / "empty.bin").write_bytes(b"")
    refused(tmp_path, ["--format", "bin", tmp_path / "empty.bin"], "no tokens")


def test_writer_makes_the_same_pack(tmp_path):
    """ringfeed.Writer with one ragged field, records uncompressed: the
    layout ringfeed-pack tokens writes, for users with their own tokenizer."""
    rng = np.random.default_rng(4)
    docs = [d.astype(np.uint16) for d in random_docs(rng, 25, 65535)]
    np.concatenate(docs).astype("<u2").tofile(tmp_path / "all.bin")
    with ringfeed.Writer(str(tmp_path / "py"), {"tokens": ringfeed.Ragged("uint16")},
                         raw_codec="none") as w:
        for d in docs:
            w.write({"tokens": d})
    _, got = docs_of(tmp_path / "py", tmp_path)
    same_docs(got, docs)
    mf = open(tmp_path / "py" / "MANIFEST").read()
    assert "field tokens ragged dtype=u16" in mf and "codec none" in mf


def token_pack(tmp_path, name, dtype, seed=5, ndocs=120):
    """A pack of ndocs documents of 1..300 tokens in shards of 4 KiB (many
    windows cross a document and a shard), and its documents."""
    rng = np.random.default_rng(seed)
    hi = 65535 if dtype == "u16" else 2**31 - 1
    docs = [rng.integers(0, hi, size=int(rng.integers(1, 300)), dtype=np.int64)
            for _ in range(ndocs)]
    files = []
    for k, d in enumerate(docs):
        p = tmp_path / f"{name}-{k}.npy"
        np.save(p, d.astype("<u2" if dtype == "u16" else "<i4"))
        files.append(p)
    r = pack_run("tokens", "--format", "npy", "--shard-size", "4K", *files, tmp_path / name)
    assert r.returncode == 0, r.stderr
    shards = int(open(tmp_path / name / "MANIFEST").read().split("\nshards ")[1].split()[0])
    assert shards > 5 or ndocs < 100
    return str(tmp_path / name), docs


def windows_of(loader):
    """Every batch of one epoch: [(window index, window, padding)]."""
    out = []
    for w in loader:
        info = loader.last
        w = np.asarray(w)
        assert w.shape == (len(info), L + 1)
        for i, row, pad in zip(info.indices.tolist(), w, info.padding.tolist()):
            out.append((i, row.astype(np.int64), pad))
    return out


@pytest.mark.parametrize("dtype", ["u16", "i32"])
def test_windows_are_the_streams_slices(tmp_path, daemon_factory, dtype):
    path, docs = token_pack(tmp_path, "t" + dtype, dtype)
    stream = np.concatenate(docs)
    n = (len(stream) - 1) // L
    for workers in (1, 3):
        d = daemon_factory({"tok": path}, workers=workers)
        loader = ringfeed.Loader("tok", 16, socket=d.sock, transform="tokens", context=L,
                                 seed=7, output="numpy")
        got = windows_of(loader)
        assert sorted(i for i, _, _ in got) == list(range(n))
        for i, row, _ in got:
            assert np.array_equal(row, stream[i * L:i * L + L + 1]), i
        w = next(iter(loader))
        assert w.dtype == (np.uint16 if dtype == "u16" else np.int32)
        if workers == 1:
            first = [i for i, _, _ in got]
        else:
            assert [i for i, _, _ in got] == first  # the order is the sampler's alone
        loader.close()
        d.stop()


def test_ranks_split_every_window_once(tmp_path, daemon_factory):
    path, docs = token_pack(tmp_path, "ranks", "u16", seed=6)
    n = (sum(len(x) for x in docs) - 1) // L
    d = daemon_factory({"tok": path}, workers=2)
    seen = []
    for rank in range(3):
        loader = ringfeed.Loader("tok", 8, socket=d.sock, transform="tokens", context=L,
                                 seed=2, rank=rank, world_size=3, output="numpy")
        loader.set_epoch(1)
        seen += [i for i, _, pad in windows_of(loader) if not pad]
        loader.close()
    assert sorted(seen) == list(range(n))


def test_resume_mid_epoch(tmp_path, daemon_factory):
    path, _ = token_pack(tmp_path, "resume", "i32", seed=9)
    d = daemon_factory({"tok": path}, workers=2)
    kw = dict(socket=d.sock, transform="tokens", context=L, seed=11, output="numpy")
    whole = ringfeed.Loader("tok", 12, **kw)
    want = [(list(whole.last.indices), np.asarray(w).tolist()) for w in whole]
    whole.close()
    first = ringfeed.Loader("tok", 12, **kw)
    it = iter(first)
    got = []
    for _ in range(5):
        w = next(it)
        got.append((list(first.last.indices), np.asarray(w).tolist()))
    state = first.state_dict()
    first.close()
    second = ringfeed.Loader("tok", 12, **kw)
    second.load_state_dict(state)
    got += [(list(second.last.indices), np.asarray(w).tolist()) for w in second]
    second.close()
    assert got == want
    other = ringfeed.Loader("tok", 12, socket=d.sock, transform="tokens", context=L + 1,
                            seed=11, output="numpy")
    with pytest.raises(ValueError):
        other.load_state_dict(state)
    other.close()


def test_doc_ids_follow_the_documents(tmp_path, daemon_factory):
    path, docs = token_pack(tmp_path, "ids", "u16", seed=12)
    stream = np.concatenate(docs)
    doc_of = np.concatenate([np.full(len(x), k) for k, x in enumerate(docs)])
    d = daemon_factory({"tok": path}, workers=2)
    loader = ringfeed.Loader("tok", 16, socket=d.sock, transform="tokens", context=L,
                             doc_ids=True, seed=1, output="numpy")
    crossed = 0
    for batch in loader:
        assert set(batch) == {"tokens", "doc_ids"}
        assert batch["doc_ids"].dtype == np.int32 and batch["doc_ids"].shape == (16, L + 1) \
            or batch["doc_ids"].shape[0] < 16
        for i, row, ids in zip(loader.last.indices.tolist(), batch["tokens"], batch["doc_ids"]):
            span = slice(i * L, i * L + L + 1)
            assert np.array_equal(row.astype(np.int64), stream[span])
            assert np.array_equal(ids, doc_of[span] - doc_of[i * L]), i
            crossed += int(ids[-1] > 0)
    assert crossed > 10
    x, y = ringfeed.shift(batch["tokens"])
    assert x.dtype == np.int64 and np.array_equal(x[:, 1:], y[:, :-1])
    loader.close()


def test_refusals(tmp_path, daemon_factory):
    path, _ = token_pack(tmp_path, "ok", "u16", seed=13, ndocs=10)
    rng = np.random.default_rng(0)
    with ringfeed.Writer(str(tmp_path / "zstd"), {"tokens": ringfeed.Ragged("uint16")},
                         raw_codec="zstd") as w:
        for _ in range(5):
            w.write({"tokens": np.zeros(int(rng.integers(500, 900)), dtype=np.uint16)})
    with ringfeed.Writer(str(tmp_path / "two"), {"tokens": ringfeed.Ragged("uint16"),
                                                 "n": ringfeed.Scalar("int64")},
                         raw_codec="none") as w:
        w.write({"tokens": np.arange(100, dtype=np.uint16), "n": 1})
    d = daemon_factory({"tok": path, "zstd": str(tmp_path / "zstd"),
                        "two": str(tmp_path / "two")}, workers=1)
    kw = dict(socket=d.sock, transform="tokens", output="numpy")
    for name, extra, needle in (
            ("zstd", dict(context=8), "stored zstd"),
            ("two", dict(context=8), "exactly one field"),
            ("tok", dict(context=8, subset="0:5"), "subset="),
            ("tok", dict(context=8, params="field=tokens"), "field="),
            ("tok", dict(context=8, size=64), "size="),
            ("tok", dict(context=65536), "no whole window")):
        with pytest.raises(ringfeed.Error, match=needle):
            ringfeed.Loader(name, 8, **kw, **extra)
    with pytest.raises(ringfeed.Error, match="context=L"):
        ringfeed.Loader("tok", 8, **kw)
    with pytest.raises(ringfeed.Error, match="tokens"):
        ringfeed.Loader("tok", 8, socket=d.sock, context=8)
    # the daemon still serves
    loader = ringfeed.Loader("tok", 8, **kw, context=8)
    assert np.asarray(next(iter(loader))).shape == (8, 9)
    loader.close()
