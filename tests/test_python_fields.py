"""The binding's side of sample fields, without a real daemon.

RaggedBatch on hand-made arrays (lengths, split, pad, strings; empty
samples, a batch without rows, bad offsets refused), then ringfeed.Loader
against tests/fake_serve.c (the fake daemon of the C tests as a program):
a ring with a field table gives dict batches whose every column holds the
bytes fake_publish wrote, as torch and as numpy, as views and as copies,
with each element type as documented (float16, bfloat16, uint16, int64);
a ring of an older dataset's fields and a version-2 ring still give
(images, labels).
"""
import os
import subprocess
import tempfile

import numpy as np
import pytest

import ringfeed
from ringfeed import RaggedBatch

torch = pytest.importorskip("torch")

FAKE = os.environ.get("RINGFEED_FAKE_SERVE")


# ---- RaggedBatch on its own

@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_ragged_split_pad_lengths(lib):
    values = np.arange(5 * 4, dtype=np.float32).reshape(5, 4)
    offsets = np.array([0, 2, 2, 5, 5], dtype=np.int64)  # samples of 2, 0, 3, 0 rows
    if lib == "torch":
        values, offsets = torch.from_numpy(values), torch.from_numpy(offsets)
    r = RaggedBatch(values, offsets, "boxes")
    assert len(r) == 4 and r.rows == 5 and r.tail == (4,)
    assert list(r.lengths.tolist()) == [2, 0, 3, 0]
    parts = r.split()
    assert [tuple(p.shape) for p in parts] == [(2, 4), (0, 4), (3, 4), (0, 4)]
    assert parts[2].tolist() == values[2:5].tolist()
    assert r[-2].tolist() == values[2:5].tolist()
    with pytest.raises(IndexError):
        r[4]
    padded, lengths = r.pad(-1)
    assert tuple(padded.shape) == (4, 3, 4)
    assert padded[0, :2].tolist() == values[0:2].tolist()
    assert (padded[1] == -1).all() and (padded[0, 2] == -1).all()
    assert lengths.tolist() == [2, 0, 3, 0]
    if lib == "torch":  # what pad_sequence(batch_first=True) gives
        ref = torch.nn.utils.rnn.pad_sequence(parts, batch_first=True, padding_value=-1)
        assert torch.equal(ref, padded)
    assert "samples=4" in repr(r) and "boxes" in repr(r)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_ragged_no_rows_and_no_samples(lib):
    mk = (lambda a: torch.from_numpy(a)) if lib == "torch" else (lambda a: a)
    r = RaggedBatch(mk(np.zeros((0,), np.int32)), mk(np.zeros(4, np.int64)))
    assert len(r) == 3 and r.rows == 0 and r.tail == ()
    padded, lengths = r.pad()
    assert tuple(padded.shape) == (3, 0) and lengths.tolist() == [0, 0, 0]
    assert [len(p) for p in r.split()] == [0, 0, 0]
    e = RaggedBatch(mk(np.zeros((0, 4), np.float32)), mk(np.zeros(1, np.int64)))
    assert len(e) == 0 and e.split() == [] and tuple(e.pad()[0].shape) == (0, 0, 4)


def test_ragged_strings_and_refusals():
    caps = [b"a cat", b"", b"two dogs"]
    values = np.frombuffer(b"".join(caps), dtype=np.uint8)
    offsets = np.cumsum([0] + [len(c) for c in caps]).astype(np.int64)
    r = RaggedBatch(values, offsets)
    assert r.strings() == caps
    assert RaggedBatch(torch.from_numpy(values.copy()), torch.from_numpy(offsets)).strings(
        "utf-8") == ["a cat", "", "two dogs"]
    with pytest.raises(TypeError, match="bytes field"):
        RaggedBatch(np.zeros((2, 4), np.float32), np.array([0, 2])).strings()
    with pytest.raises(ValueError, match="not from 0"):
        RaggedBatch(np.zeros(3), np.array([1, 3]))
    with pytest.raises(ValueError, match="not from 0"):
        RaggedBatch(np.zeros(3), np.array([0, 2]))
    with pytest.raises(ValueError, match="decrease"):
        RaggedBatch(np.zeros(3), np.array([0, 2, 1, 3]))
    with pytest.raises(ValueError, match="count \\+ 1"):
        RaggedBatch(np.zeros(0), np.zeros(0, np.int64))


# ---- against the fake daemon

def fake_pixel(epoch, seq, i, j):
    return (epoch * 131 + seq * 31 + i * 7 + j) & 0xFF


def field_bytes(k, primary, epoch, seq, i, n, start=0):
    add = 0 if k == primary else 17 * (k + 1)
    return bytes(fake_pixel(epoch, seq, i, start + j + add) for j in range(n))


def rows(seq, i):
    return (i + seq) % 3


def count(seq):
    return 5 if seq % 3 == 2 else 6


@pytest.fixture
def serve():
    procs = []
    tmp = tempfile.TemporaryDirectory()

    def start(mode):
        if not FAKE:
            pytest.skip("RINGFEED_FAKE_SERVE is not set (run through meson test)")
        path = os.path.join(tmp.name, f"{mode}.sock")
        p = subprocess.Popen([FAKE, path, mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        assert p.stdout.readline().strip() == "ready"
        return path

    yield start
    for p in procs:
        p.stdin.close()
        p.wait(timeout=30)
    tmp.cleanup()


def as_bytes(x):
    if isinstance(x, np.ndarray):
        return x.tobytes()
    if x.dtype == torch.bfloat16:
        x = x.view(torch.int16)
    return x.contiguous().numpy().tobytes()


def check_dict_batch(b, info):
    """Every column of dict batch b as fake_publish wrote it."""
    e, s = info.epoch, info.seq
    n = count(s)
    assert list(b) == ["image", "boxes", "caption", "emb", "mask", "bf", "label"]
    assert tuple(b["image"].shape) == (n, 3, 4, 4)
    assert as_bytes(b["image"]) == b"".join(field_bytes(0, 0, e, s, i, 48) for i in range(n))
    for k, name, width in ((3, "emb", 4), (6, "label", 8)):
        assert as_bytes(b[name]) == b"".join(field_bytes(k, 0, e, s, i, width)
                                             for i in range(n)), name
    for k, name, width in ((1, "boxes", 16), (2, "caption", 1)):
        r = b[name]
        assert isinstance(r, RaggedBatch) and len(r) == n
        assert r.lengths.tolist() == [rows(s, i) for i in range(n)]
        want = b"".join(field_bytes(k, 0, e, s, i, rows(s, i) * width) for i in range(n))
        assert as_bytes(r.values) == want, name
    assert tuple(b["boxes"].values.shape[1:]) == (4,)
    assert b["caption"].strings() == [field_bytes(2, 0, e, s, i, rows(s, i)) for i in range(n)]
    assert info.dropped == s % 5


def test_dict_batches_torch(serve):
    path = serve("fields")
    with ringfeed.Loader("fake", batch_size=6, socket=path, reconnect_timeout=0) as loader:
        assert [f["name"] for f in loader.fields][:3] == ["image", "boxes", "caption"]
        assert loader.fields[1]["kind"] == "ragged" and loader.fields[1]["role"] == "boxes"
        for _ in range(7):  # past an epoch's 5 batches
            b = next(iter(loader))
            check_dict_batch(b, loader.last)
            assert b["image"].dtype == torch.uint8 and b["label"].dtype == torch.int64
            assert b["emb"].dtype == torch.float16 and b["bf"].dtype == torch.bfloat16
            # a torch without uint16 tensors: int32, a copy, of the same values
            m = b["mask"]
            assert m.dtype in ((torch.int32, torch.uint16) if hasattr(torch, "uint16")
                               else (torch.int32,))
            assert tuple(m.shape) == (count(loader.last.seq), 1, 4, 4)
            want = np.frombuffer(b"".join(field_bytes(4, 0, loader.last.epoch, loader.last.seq,
                                                      i, 32) for i in range(m.shape[0])),
                                 dtype="<u2")
            assert m.to(torch.int64).flatten().tolist() == want.tolist()
            assert b["boxes"].offsets.dtype == torch.int64
            assert b["boxes"].values.dtype == torch.float32
            padded, lengths = b["boxes"].pad()
            assert padded.shape[0] == len(b["boxes"])
        # zero copy: the image is a view of the ring
        base, size = loader.ring()
        assert base <= b["image"].data_ptr() < base + size
        assert base <= b["boxes"].values.data_ptr() < base + size
        del b, padded


def test_dict_batches_numpy_and_copies(serve):
    path = serve("fields")
    with ringfeed.Loader("fake", batch_size=6, socket=path, output="numpy", copy=True,
                         reconnect_timeout=0) as loader:
        held = []
        for b in loader:  # copies: holding every batch of an epoch is fine
            check_dict_batch(b, loader.last)
            assert b["mask"].dtype == np.uint16 and b["emb"].dtype == np.float16
            assert b["bf"].dtype == np.float32  # numpy has no bfloat16
            bits = np.frombuffer(as_bytes(b["bf"]), dtype=np.uint32)
            raw = np.frombuffer(b"".join(field_bytes(5, 0, loader.last.epoch, loader.last.seq,
                                                     i, 4) for i in range(len(b["bf"]))),
                                dtype=np.uint16)
            assert (bits == raw.astype(np.uint32) << 16).all()
            held.append(b)
        assert len(held) == 5
        base, size = loader.ring()
        assert not base <= held[-1]["image"].ctypes.data < base + size


def test_dict_batch_views_release_in_order(serve):
    path = serve("fields")
    with ringfeed.Loader("fake", batch_size=6, socket=path, depth=4,
                         reconnect_timeout=0) as loader:
        it = iter(loader)
        b = next(it)
        boxes = b["boxes"]  # a ragged column alone keeps the slot
        del b
        assert loader.stats()["views"] == 1
        del boxes
        assert loader.stats()["views"] == 0
        state = loader.state_dict()
        next(it)
    with ringfeed.Loader("fake", batch_size=6, socket=path, reconnect_timeout=0) as again:
        again.load_state_dict(state)
        b = next(iter(again))
        assert (again.last.epoch, again.last.seq) == (state["epoch"], state["seq"])
        check_dict_batch(b, again.last)


@pytest.mark.parametrize("mode", ["legacy", "v2"])
def test_older_rings_give_images_and_labels(serve, mode):
    path = serve(mode)
    with ringfeed.Loader("fake", batch_size=6, socket=path, reconnect_timeout=0) as loader:
        assert (loader.fields is None) == (mode == "v2")
        images, labels = next(iter(loader))
        n = count(loader.last.seq)
        assert images.shape[0] == n and labels.tolist() == [i % 10 for i in range(n)]
        e, s = loader.last.epoch, loader.last.seq
        assert as_bytes(images) == b"".join(bytes(fake_pixel(e, s, i, j) for j in range(48))
                                            for i in range(n))
        assert loader.last.dropped == 0


def test_device_needs_cuda(serve):
    path = serve("fields")
    if torch.cuda.is_available():
        with ringfeed.Loader("fake", batch_size=6, socket=path, device="cuda",
                             reconnect_timeout=0) as loader:
            b = next(iter(loader))
            assert b["image"].is_cuda and b["boxes"].values.is_cuda
            assert b["boxes"].offsets.is_cuda
            check_dict_batch({k: (v.cpu() if hasattr(v, "cpu") else
                                  RaggedBatch(v.values.cpu(), v.offsets.cpu()))
                              for k, v in b.items()}, loader.last)
    else:
        with pytest.raises(ringfeed.Error, match="CUDA"):
            ringfeed.Loader("fake", batch_size=6, socket=path, device="cuda")
