"""Token datasets (docs/design/tokens.md): `ringfeed-pack tokens` from
nanoGPT .bin files, NumPy .npy files and Megatron-LM .bin/.idx pairs (all
written here with numpy), checked record by record against the inputs'
documents; bad inputs refused naming the file and what; ringfeed.Writer's
ragged field making the same pack from Python."""
import os
import struct

import numpy as np
import pytest

import ringfeed
from conftest import dump_records, pack_run


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
