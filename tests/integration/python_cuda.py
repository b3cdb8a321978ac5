#!/usr/bin/python3
"""ringfeed.Loader(device="cuda") on a real GPU: each batch is copied from
the registered ring straight into a torch CUDA tensor on the current
stream and its slot goes back when that copy is done.

Checks, over one epoch of Fashion-MNIST's test split: the device batches
equal what a host loader with the same options reads (byte for byte, and
labels), the ring was pinned (cudaHostRegister), every batch went through
rf_cuda_copy_release, and no copy is left pending; and with dtype= and
normalize= (float32, float16, bfloat16), the batches libringfeed converts
on the device (rf_cuda_convert_release) equal the host's conversion bit
for bit, also after a switch to another stream.

    python_cuda.py [--socket PATH --dataset NAME] [--host-only]

Without --socket it packs the test split and starts its own daemon.  Exit
77 when torch has no CUDA device (Debian's torch is CPU-only): nothing to
check here.  Run by scripts/gpu-check and by meson as `python_cuda`.

--host-only reads one epoch on the host through the extension alone (no
torch, no numpy: its arrays through memoryview) and checks that every
sample index comes exactly once with a label of the dataset's classes:
scripts/gpu-check's proof that the extension it built imports and reads,
on any interpreter.
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--dataset", default="fmnist-test")
    ap.add_argument("--host-only", action="store_true")
    args = ap.parse_args()
    if args.host_only:
        return host_only(args)
    try:
        import torch
    except ImportError:
        print("python_cuda: torch does not import: nothing to check (exit 77)")
        return 77
    if not torch.cuda.is_available():
        print("python_cuda: this torch has no CUDA device: nothing to check (exit 77)")
        return 77
    import ringfeed

    daemon = None
    if args.socket is None:
        sys.path.insert(0, HERE)
        from conftest import FMNIST, Daemon, pack_tool
        tmp = tempfile.mkdtemp(prefix="rf-cuda-")
        subprocess.run([pack_tool(), "idx", "--images", f"{FMNIST}/t10k-images-idx3-ubyte.gz",
                        "--labels", f"{FMNIST}/t10k-labels-idx1-ubyte.gz", f"{tmp}/test"],
                       check=True, stdout=subprocess.DEVNULL)
        daemon = Daemon({args.dataset: f"{tmp}/test"}).start()
        args.socket = daemon.sock
    try:
        opts = dict(batch_size=500, seed=9, socket=args.socket)
        host = ringfeed.Loader(args.dataset, **opts)
        dev = ringfeed.Loader(args.dataset, device="cuda", **opts)
        n = 0
        for (hx, hy), (dx, dy) in zip(host, dev):
            assert dx.is_cuda and dy.is_cuda and dx.dtype == torch.uint8, (dx.device, dx.dtype)
            assert dx.shape == hx.shape, (dx.shape, hx.shape)
            assert torch.equal(dx.cpu(), hx), f"batch {n}: device pixels differ from the host's"
            assert torch.equal(dy.cpu(), hy), f"batch {n}: device labels differ"
            n += 1
        torch.cuda.synchronize()
        st = dev.stats()
        assert n == len(host) == len(dev), (n, len(host))
        assert st["pinned"], f"the ring was not pinned: {st['pin_note']}"
        assert st["cuda_copies"] == n, st
        print(f"python_cuda: {n} batches copied to {torch.cuda.get_device_name()}, equal to the "
              f"host's; pinned: {st['pin_note']}")
        converted(ringfeed, torch, args, opts)
        return 0
    finally:
        if daemon:
            daemon.cleanup()


def converted(ringfeed, torch, args, opts):
    """dtype=/normalize= with device="cuda": libringfeed's converting copy
    (the kernel after the one copy) gives the host converter's bits, on a
    side stream too."""
    norm = ((0.2860,), (0.3530,))
    for dtype, normalize in ((torch.float32, norm), (torch.float16, norm),
                             (torch.bfloat16, norm), (torch.float32, None)):
        host = ringfeed.Loader(args.dataset, dtype=dtype, normalize=normalize, **opts)
        dev = ringfeed.Loader(args.dataset, device="cuda", dtype=dtype, normalize=normalize,
                              **opts)
        side = torch.cuda.Stream()
        n = 0
        for (hx, hy), (dx, dy) in zip(host, dev):
            assert dx.is_cuda and dx.dtype == dtype and hx.dtype == dtype, (dx.dtype, hx.dtype)
            assert torch.equal(dx.cpu(), hx), f"{dtype} {normalize}: batch {n} differs from " \
                "the host's conversion"
            assert torch.equal(dy.cpu(), hy), f"batch {n}: labels differ"
            n += 1
            if n == 3:  # the rest on another stream: the staging buffer is shared
                torch.cuda.set_stream(side)
        torch.cuda.set_stream(torch.cuda.default_stream())
        torch.cuda.synchronize()
        st = dev.stats()
        assert n == len(host) and st["cuda_copies"] == n and st["copies_pending"] == 0, st
        host.close()
        dev.close()
        print(f"python_cuda: {n} batches converted on the device to {dtype} "
              f"(normalize={normalize}), equal to the host's")


def host_only(args):
    """One epoch through ringfeed._ringfeed.Client on the host."""
    try:
        import torch  # noqa: F401  (a CUDA torch loads the CUDA runtime first)
    except ImportError:
        pass
    import ringfeed
    from ringfeed import _ringfeed

    if args.socket is None:
        sys.exit("python_cuda: --host-only needs --socket")
    c = _ringfeed.Client(args.dataset, batch=500, seed=9, socket=args.socket, dlpack=False)
    try:
        info = c.info()
        n, bpe = info["dataset_samples"], info["batches_per_epoch"]
        seen = bytearray(n)
        classes = set()
        for k in range(bpe):
            img, lab, recs, epoch, seq = c.next(copy=True)[:5]
            count = len(recs) // 16
            labels = memoryview(lab).cast("B").cast("q")
            assert (epoch, seq) == (0, k), f"batch {k} arrived as epoch {epoch} batch {seq}"
            assert memoryview(img).nbytes == count * info["sample_bytes"], "image bytes"
            for i in range(count):
                index, label, flags = struct.unpack_from("<QiI", recs, 16 * i)
                assert label == labels[i], f"batch {k} sample {i}: labels disagree"
                assert not flags, f"batch {k} sample {i}: flags {flags}"
                assert seen[index] == 0, f"sample {index} came twice"
                seen[index] = 1
                classes.add(label)
        assert all(seen), f"{n - sum(seen)} samples never came"
        assert classes == set(range(10)), f"labels {sorted(classes)}"
    finally:
        c.close()
    print(f"python_cuda: ringfeed {ringfeed.__file__}: one epoch of {args.dataset} on the "
          f"host, {n} samples in {bpe} batches, each once, labels 0..9")
    return 0


if __name__ == "__main__":
    sys.exit(main())
