"""Tensor datasets of every packed dtype, delivered as stored.

`ringfeed-pack idx` packs IDX files of six element types (u8 i8 i16 i32 f32
f64; big-endian in the file, little-endian in the pack).  Transform `raw`
delivers each exactly as stored, and every client knows the element type:
libringfeed's rf_batch.dtype (rf_dump's "dtype"), ringfeed-read's digest
over the bytes, and the Python Loader's arrays in numpy and torch, views
and copies, with the right dtype and shape.  Every sample of one epoch is
compared byte for byte with the array the IDX file was written from.
"""
import json
import os
import subprocess

import numpy as np
import pytest
import xxhash

import ringfeed
from conftest import binary, pack_tool, run_read

import torch  # noqa: E402  Debian's python3-torch is a test dependency (install-deps)

N = 37      # samples: batches of 8 leave a partial last batch
BATCH = 8

# name: (IDX type code, numpy dtype, torch dtype, libringfeed name, sample shape)
DTYPES = {
    "u8": (0x08, np.uint8, torch.uint8, "uint8", (5, 7)),
    "i8": (0x09, np.int8, torch.int8, "int8", (2, 3, 4)),
    "i16": (0x0B, np.int16, torch.int16, "int16", (5, 7)),
    "i32": (0x0C, np.int32, torch.int32, "int32", (2, 3, 4)),
    "f32": (0x0D, np.float32, torch.float32, "float32", (5, 7)),
    "f64": (0x0E, np.float64, torch.float64, "float64", (2, 3, 4)),
}


def ring_shape(shape):
    """The shape a ring gives a sample: CHW, leading dims of 1 added."""
    return (1,) * (3 - len(shape)) + tuple(shape)


def make_values(name, rng):
    _, npt, _, _, shape = DTYPES[name]
    dt = np.dtype(npt)
    if dt.kind == "f":
        a = rng.standard_normal((N,) + shape).astype(dt) * 1000
        flat = a.reshape(N, -1)
        info = np.finfo(dt)
        # values a conversion or a byte swap gone wrong would change
        flat[0, :6] = [np.inf, -np.inf, -0.0, info.tiny / 4, info.max, info.min]
        flat[1, 0] = np.nan
    else:
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, (N,) + shape, dtype=dt, endpoint=True)
        flat = a.reshape(N, -1)
        flat[0, :3] = [info.min, info.max, 0]
    return a


def write_idx(path, a, code):
    """An IDX file of a: magic 00 00 type ndim, big-endian dims and data."""
    with open(path, "wb") as f:
        f.write(bytes([0, 0, code, a.ndim]))
        f.write(b"".join(int(d).to_bytes(4, "big") for d in a.shape))
        f.write(a.astype(a.dtype.newbyteorder(">")).tobytes())


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    """Per dtype: its source values, labels and pack folder."""
    root = tmp_path_factory.mktemp("dtypes")
    rng = np.random.default_rng(20240611)
    out = {}
    for name, (code, *_rest) in DTYPES.items():
        values = make_values(name, rng)
        labels = rng.integers(0, 10, N, dtype=np.uint8)
        write_idx(root / f"{name}-images", values, code)
        write_idx(root / f"{name}-labels", labels, 0x08)
        dest = root / name
        subprocess.run([pack_tool(), "idx", "--images", str(root / f"{name}-images"),
                        "--labels", str(root / f"{name}-labels"), str(dest)],
                       check=True, stdout=subprocess.DEVNULL)
        out[name] = (values, labels, str(dest))
    return out


@pytest.fixture(scope="module")
def daemon(packs, tmp_path_factory):
    # module scope: conftest's daemon_factory is per test, so make one here
    from conftest import Daemon
    d = Daemon({name: p[2] for name, p in packs.items()}, workers=2).start()
    yield d
    d.cleanup()


def le_bytes(a):
    """a's elements as the pack stores them: little-endian."""
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()


@pytest.mark.parametrize("name", list(DTYPES))
def test_pack_stores_dtype_and_shape(packs, name):
    values, _, dest = packs[name]
    with open(os.path.join(dest, "MANIFEST")) as f:
        lines = f.read().splitlines()
    assert f"dtype {name}" in lines
    # a 2-dim sample gets a channel axis (1xHxW); others keep their dims
    assert "shape " + "x".join(str(d) for d in ring_shape(values.shape[1:])) in lines, lines


@pytest.mark.parametrize("output", ["numpy", "torch"])
@pytest.mark.parametrize("copy", [False, True])
@pytest.mark.parametrize("name", list(DTYPES))
def test_loader_delivers_as_stored(daemon, packs, name, output, copy):
    values, labels, _ = packs[name]
    _, npt, tdt, tname, shape = DTYPES[name]
    want_shape = ring_shape(shape)
    loader = ringfeed.Loader(name, batch_size=BATCH, seed=5, socket=daemon.sock,
                             output=output, copy=copy)
    assert loader.dtype == tname
    seen = []
    for images, lab in loader:
        info = loader.last
        idx = info.indices
        idx = idx.numpy() if output == "torch" else idx
        if output == "torch":
            assert torch.is_tensor(images) and images.dtype == tdt, images.dtype
            assert lab.dtype == torch.int64
            arr, lab = images.numpy(), lab.numpy()
        else:
            assert isinstance(images, np.ndarray) and images.dtype == np.dtype(npt)
            assert lab.dtype == np.int64
            arr = images
        assert arr.shape == (len(idx),) + want_shape, arr.shape
        assert arr.flags.c_contiguous
        for k, i in enumerate(idx):
            assert arr[k].tobytes() == le_bytes(values[i]), (name, int(i))
            assert lab[k] == labels[i]
        seen += [int(i) for i in idx]
        del images, arr
    loader.close()
    assert sorted(seen) == list(range(N))


def test_rf_dump_reports_dtype(daemon, packs, tmp_path):
    """libringfeed's rf_batch: dtype, shape in elements, the bytes as stored."""
    for name, (values, labels, _) in packs.items():
        out = tmp_path / f"{name}.bin"
        r = subprocess.run([binary("tests/rf_dump"), "--socket", daemon.sock, "--dataset", name,
                            "--epochs", "1", "--batch", str(BATCH), "--no-shuffle", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        meta = json.loads(r.stdout)
        sample = values[0]
        assert meta["dtype"] == name
        assert meta["layout"] == 1  # RF_LAYOUT_CHW
        assert tuple(meta["shape"]) == ring_shape(sample.shape)
        assert meta["sample_bytes"] == sample.nbytes and meta["samples"] == N
        data = out.read_bytes()
        row = 24 + sample.nbytes
        assert len(data) == N * row
        for k in range(N):
            hdr = data[k * row:k * row + 24]
            i = int.from_bytes(hdr[0:8], "little")
            assert i == k and int.from_bytes(hdr[8:12], "little") == labels[i]
            assert data[k * row + 24:(k + 1) * row] == le_bytes(values[i]), (name, k)


def test_read_digest_is_over_stored_bytes(daemon, packs):
    """ringfeed-read's digest: per batch the records, then the bytes."""
    for name, (values, labels, _) in packs.items():
        out, _ = run_read(daemon.sock, name, batch=BATCH, extra=["--no-shuffle"])
        h = xxhash.xxh64(seed=0)
        for b in range(0, N, BATCH):
            idx = range(b, min(N, b + BATCH))
            for i in idx:
                h.update(i.to_bytes(8, "little") + int(labels[i]).to_bytes(4, "little"))
            h.update(b"".join(le_bytes(values[i]) for i in idx))
        assert out["samples"] == N and out["digest"] == h.hexdigest(), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA device")
@pytest.mark.parametrize("name", list(DTYPES))
def test_cuda_delivers_as_stored(daemon, packs, name):
    values, labels, _ = packs[name]
    _, _, tdt, _, shape = DTYPES[name]
    loader = ringfeed.Loader(name, batch_size=BATCH, seed=5, socket=daemon.sock,
                             device="cuda")
    seen = []
    for images, lab in loader:
        assert images.is_cuda and images.dtype == tdt
        idx = loader.last.indices.numpy()
        arr = images.cpu().numpy()
        assert arr.shape == (len(idx),) + ring_shape(shape)
        for k, i in enumerate(idx):
            assert arr[k].tobytes() == le_bytes(values[i]), (name, int(i))
        assert (lab.cpu().numpy() == labels[idx]).all()
        seen += [int(i) for i in idx]
    loader.close()
    assert sorted(seen) == list(range(N))
