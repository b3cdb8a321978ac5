#!/usr/bin/python3
"""train_torch.py - ringfeed-train's recipe in PyTorch: the Fashion-MNIST MLP
fed by ringfeed (ringfeed.Loader) or by torch.utils.data.DataLoader, on one
process or under torchrun with DistributedDataParallel.

    examples/train_torch.py [--loader ringfeed|torch] [--socket PATH]
                            [--train NAME] [--eval NAME] [--epochs E] [--batch B]
                            [--eval-batch B] [--lr X] [--seed S] [--workers N]
                            [--depth N] [--device auto|cpu|cuda] [--threads N]
                            [--data-root DIR] [--max-steps N] [--json]
                            [--dump-indices FILE]
    torchrun --standalone --nproc_per_node 2 examples/train_torch.py ...
    scripts/demo --torch ...      (against a daemon of its own)

(Debian 12's torchrun, torch 1.13 on Python 3.11, fails before starting a
rank with "AttributeError: 'NoneType' object has no attribute 'get'": it
cannot parse its own --redirects/--tee default "0".  Add `--redirects 2
--tee 2`: ranks' stderr is then tee'd to --log_dir, stdout left alone.)

The recipe is ringfeed-train's (examples/train_step.c, kernels/kernels.h):
the MLP 784-512-256-10 (Linear+ReLU, Linear+ReLU, Linear), inputs x/255
normalized with mean 0.2860 and std 0.3530, batch 128, softmax
cross-entropy, SGD lr 0.05 with momentum 0.9 (PyTorch's: v = mu*v + g) and
weight decay 5e-4 on the weights only (biases are not decayed, as
kn_sgd's), the lr decayed to 0 by a cosine over the whole run counted in
updates (lr * (1 + cos(pi k / total)) / 2 at update k), 10 epochs.  Initial
weights as kn_model_create draws them: Kaiming-uniform U(-a, a), a =
sqrt(6 / fan_in) for the hidden layers and sqrt(3 / fan_in) for the last,
biases 0 (the draws come from torch's generator seeded with --seed, not from
the kernels' hash, so the starting point is not the C trainer's bit for bit).

Loaders:
  ringfeed  the daemon's datasets --train (default fmnist-train, shuffled with
            --seed, one permutation per epoch) and --eval (fmnist-test, in
            order); images are uint8 (N,1,28,28) views of the ring, read in
            place on the CPU (with CUDA: copied to the device by the loader,
            device="cuda:N").  --socket as libringfeed (default
            $RINGFEED_SOCKET, ...).
  torch     torchvision.datasets.FashionMNIST + PILToTensor (the same uint8
            tensors), DataLoader with --workers processes (default 2,
            persistent), pin_memory on CUDA; shuffled by a generator seeded
            with --seed, or a DistributedSampler under torchrun.  --train and
            --eval pick the split: a name ending in "test" or "t10k" is the
            test split, anything else the training split.  The raw files are
            un-gzipped from /usr/share/datasets/fashion-mnist into
            --data-root/FashionMNIST/raw (default data/torchvision) once;
            nothing is downloaded.

Distributed: under torchrun (WORLD_SIZE > 1) each rank attaches with its own
rank (ringfeed takes RANK/WORLD_SIZE from the environment; the DataLoader
gets a DistributedSampler), gradients are averaged by
DistributedDataParallel (gloo on the CPU, nccl on CUDA), and rank 0 prints
once: losses and accuracies all-reduced over the ranks, samples/s for all
ranks together, wait and compute the ranks' mean.  Both samplers split an
epoch the same way: shuffled order padded by wrapping to a multiple of the
world, rank r taking positions r, r+w, r+2w, ...  So update s of a w-rank
run with batch B sees exactly the samples of update s of a 1-process run
with batch w*B (but for the padding in the epoch's last batch).  Evaluation
is split over the ranks too, each sample scored once (ringfeed's padding
samples are left out; the DataLoader's evaluation takes every w-th sample).
On the CPU a rank's OpenBLAS gets cores/local ranks threads unless
OPENBLAS_NUM_THREADS says otherwise (torchrun sets OMP_NUM_THREADS=1).

On the CPU, as ringfeed-train does (kernels/cpu/cpu_backend.c): Debian's
OpenBLAS, under Debian's torch, falls back to its SSE3 "Prescott" kernels
on CPUs it does not know (recent Xeons), 2-3x slower at this MLP's GEMMs;
the script re-selects them for what the CPU can do before the first GEMM,
unless OPENBLAS_CORETYPE is set.  The header says which core runs.

Output (rank 0): a header (device, BLAS, loaders, model, optimizer), then one
line per epoch as it ends:

  epoch  train loss  train acc  test loss  test acc  samples/s  wait ms  compute ms  wait %  bound

train loss/acc are the running mean over the epoch's steps; test over one
pass of the evaluation set after the epoch; samples/s training samples over
the epoch's training time (evaluation left out); wait ms the mean time per
step inside the loader's next (waiting for data), compute ms the mean time of
the rest of the step (normalize, forward, backward and DDP's all-reduce,
SGD; on CUDA after torch.cuda.synchronize(), so the figure is the GPU's);
wait % = wait / (wait + compute); bound "input" when a step waited longer
than it computed.  The first 10 steps of the run are warm-up and left out of
the times.  Then the verdict over the run and last `test accuracy: 0.xxxx`.

--json prints one JSON object instead (rank 0, one line): every figure, the
per-update training losses (all-reduced), and per rank the parameters'
checksum (param_sum: the sum of every parameter as float64; param_sha256:
sha256 of their float32 bytes in named_parameters order) so ranks can be
compared bit for bit.  --max-steps N stops after N updates (the lr schedule
stays the full run's), evaluates and reports.  --dump-indices FILE writes
every training sample index this rank received, one line `epoch seq index`
per sample (epochs from 0; with ranks > 1 "{rank}" in FILE is replaced by
the rank, or ".rankR" is appended).

Exit status: 0 done; 1 failed (the reason on stderr); 2 bad usage.
"""
import argparse
import gzip
import hashlib
import json
import math
import os
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FMNIST_SRC = "/usr/share/datasets/fashion-mnist"
FMNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MEAN, STD = 0.2860, 0.3530
WARMUP_STEPS = 10
PROG = "train_torch"

# Before torch loads OpenBLAS: ranks sharing a machine share its cores.
if int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(max(
        1, len(os.sched_getaffinity(0)) // int(os.environ["LOCAL_WORLD_SIZE"]))))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Fail(Exception):
    pass


# ---- the runtime -------------------------------------------------------------

_BLAS_NOTE = []


def _loaded_blas():
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            base = os.path.basename(path)
            if "openblas" in base and ".so" in base or base.startswith("libblas.so"):
                return path
    return None


def raise_openblas():
    """What kernels/cpu/cpu_backend.c does for ringfeed-train: Debian's
    OpenBLAS falls back to its "Prescott" (SSE3) kernels on CPUs it does not
    know (recent Xeons), 2-3x slower at this MLP's GEMMs; re-select them for
    what the CPU can do through OpenBLAS's dynamic-arch entry points, before
    any GEMM.  Does nothing when OPENBLAS_CORETYPE is set, when OpenBLAS chose
    something else, or when torch's BLAS is not a dynamic-arch OpenBLAS.
    Returns a note for the header."""
    if _BLAS_NOTE:
        return _BLAS_NOTE[0]
    import ctypes
    note = "BLAS: " + (torch.__config__.show().split("BLAS_INFO=")[-1].split(",")[0])
    path = _loaded_blas()
    try:
        lib = ctypes.CDLL(path) if path else None
        lib.openblas_get_corename.restype = ctypes.c_char_p
    except (OSError, AttributeError, TypeError):
        lib = None
    if lib is not None:
        core = lib.openblas_get_corename().decode()
        raised = ""
        if core == "Prescott" and "OPENBLAS_CORETYPE" not in os.environ and \
                hasattr(lib, "gotoblas_dynamic_init") and hasattr(lib, "gotoblas_dynamic_quit"):
            flags = set()
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("flags"):
                        flags = set(line.split(":", 1)[1].split())
                        break
            want = ("SkylakeX" if {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= flags
                    else "Haswell" if {"avx2", "fma"} <= flags else None)
            if want:
                os.environ["OPENBLAS_CORETYPE"] = want
                lib.gotoblas_dynamic_quit()
                lib.gotoblas_dynamic_init()
                del os.environ["OPENBLAS_CORETYPE"]
                core = lib.openblas_get_corename().decode()
                raised = " (raised from the Prescott fallback)"
        note = "BLAS: OpenBLAS core %s%s, %d threads" % (core, raised,
                                                          lib.openblas_get_num_threads())
    _BLAS_NOTE.append(note)
    return note


def import_ringfeed():
    try:
        import ringfeed
    except ImportError:
        build = os.environ.get("RINGFEED_BUILD_DIR", os.path.join(ROOT, "build"))
        sys.path.insert(0, os.path.join(build, "python"))
        try:
            import ringfeed
        except ImportError as e:
            raise Fail(f"cannot import ringfeed ({e}): build it (ninja -C build) and run "
                       "with PYTHONPATH=build/python") from None
    return ringfeed


class Dist:
    """The process group (or its absence): rank, world, device, reductions."""

    def __init__(self, want_device="auto"):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        cuda = torch.cuda.is_available()
        if want_device == "cuda" and not cuda:
            raise Fail("--device cuda: this torch sees no CUDA device")
        self.cuda = cuda and want_device != "cpu"
        if self.cuda:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
            self.why = f"cuda:{self.local_rank} ({torch.cuda.get_device_name(self.device)})"
        else:
            self.device = torch.device("cpu")
            self.why = "cpu (" + ("--device cpu" if cuda else
                                  "torch sees no CUDA device" if torch.version.cuda else
                                  "this torch is built without CUDA") + ")"
        self.pg = None
        self._keep = []
        if self.world > 1:
            import torch.distributed as dist
            self.backend = "nccl" if self.cuda else "gloo"
            dist.init_process_group(self.backend)
            self.pg = dist

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _all_reduce(self, t, op=None):
        """all_reduce, keeping t alive to the end.  A tensor that Python drops
        while gloo's worker thread still holds it is freed by that thread,
        which then needs the GIL; if that happens as the process group is
        destroyed at exit (the main thread holding the GIL and joining the
        worker), the process hangs.  Keeping every collective's tensor (a few
        dozen small ones a run) closes that window."""
        if self.pg:
            self.pg.all_reduce(t, op=op or self.pg.ReduceOp.SUM)
            self._keep.append(t)
        return t

    def sum(self, values):
        """Sums a list of floats over the ranks (float64)."""
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        return self._all_reduce(t).tolist()

    def max(self, values):
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        return self._all_reduce(t, self.pg.ReduceOp.MAX if self.pg else None).tolist()

    def gather_rows(self, row):
        """Every rank's list of floats (same length on every rank), as a list
        of lists indexed by rank: a sum of rows that are zero but for one
        rank's, so each value arrives exactly."""
        t = torch.zeros((self.world, len(row)), dtype=torch.float64, device=self.device)
        t[self.rank] = torch.tensor(row, dtype=torch.float64)
        return self._all_reduce(t).tolist()

    def close(self):
        if self.pg:
            self.pg.destroy_process_group()
            self.pg = None


# ---- the model and the optimizer ------------------------------------------------

def make_mlp(seed, in_features=784, classes=10):
    """784-512-256-10 with kn_model_create's initialization (see the top)."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(in_features, 512), nn.ReLU(),
                          nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, classes))
    g = torch.Generator().manual_seed(seed)
    linears = [m for m in model if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for k, lin in enumerate(linears):
            a = math.sqrt((3.0 if k == len(linears) - 1 else 6.0) / lin.in_features)
            lin.weight.uniform_(-a, a, generator=g)
            lin.bias.zero_()
    return model


def make_sgd(model, lr, momentum=0.9, weight_decay=5e-4):
    """SGD with weight decay on the weights only (kn_sgd leaves biases out)."""
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias")]
    plain = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return torch.optim.SGD([{"params": decay, "weight_decay": weight_decay},
                            {"params": plain, "weight_decay": 0.0}],
                           lr=lr, momentum=momentum)


def cosine_lr(lr, step, total):
    """tr_lr: lr * (1 + cos(pi step / total)) / 2; 0 past the end."""
    if total <= 0 or step >= total:
        return 0.0
    return lr * 0.5 * (1.0 + math.cos(math.pi * step / total))


def normalizer(mean, std):
    def norm(images, device):
        x = images.to(device, non_blocking=True).to(torch.float32)
        return x.div_(255.0).sub_(mean).div_(std)
    return norm


def checksum(model):
    """(sum of every parameter as float64, sha256 of their float32 bytes)."""
    h = hashlib.sha256()
    total = 0.0
    for name, p in model.named_parameters():
        t = p.detach().to("cpu").contiguous()
        h.update(name.encode())
        h.update(t.numpy().tobytes())
        total += float(t.double().sum())
    return total, h.hexdigest()


# ---- batch sources -------------------------------------------------------------
#
# A source's epoch(e) yields (images, labels, meta): images uint8 (N, C, H, W)
# (on the device when the loader put it there), labels int64, meta with
# .epoch, .seq, .indices (dataset indices) and .padding (a bool mask, or
# None when the source has no padding).  Every source starts epoch e from its
# first batch.

class _Meta:
    __slots__ = ("epoch", "seq", "indices", "padding")

    def __init__(self, epoch, seq, indices, padding=None):
        self.epoch, self.seq, self.indices, self.padding = epoch, seq, indices, padding


class RingfeedSource:
    def __init__(self, dataset, batch, *, shuffle, seed, socket=None, device=None, depth=None,
                 transform="raw", size=None, params=None, name=None):
        rf = import_ringfeed()
        self.loader = rf.Loader(dataset, batch_size=batch, shuffle=shuffle, seed=seed,
                                socket=socket, device=device, depth=depth, transform=transform,
                                size=size, params=params, name=name)
        self.name = dataset
        self.batch = batch

    def __len__(self):
        return len(self.loader)

    def describe(self):
        L = self.loader
        return "%s, %d batches of %d an epoch (rank %d of %d)" % (
            self.name, len(L), self.batch, L.rank, L.world_size)

    def epoch(self, e):
        L = self.loader
        L.set_epoch(e)
        it = iter(L)
        box = []
        while True:
            try:
                box.append(next(it))
            except StopIteration:
                return
            # nothing in this frame keeps the batch while the caller holds it
            # (a local would, until the next batch): its ring slot goes back
            # as soon as the caller frees the images
            yield box.pop() + (L.last,)

    def stats(self):
        return self.loader.stats()

    def close(self):
        self.loader.close()


class _Indexed(torch.utils.data.Dataset):
    """A dataset whose items also carry their index (for --dump-indices)."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        x, y = self.ds[i]
        return x, y, i


def _with_meta(batch, epoch, seq):
    images, labels, idx = batch
    return images, labels, _Meta(epoch, seq, idx)


class TorchSource:
    """A DataLoader over a map-style dataset of (uint8 image tensor, label)."""

    def __init__(self, ds, batch, *, shuffle, seed, workers, rank, world, pin, name,
                 stride_split=False):
        from torch.utils.data import DataLoader, DistributedSampler, Subset
        self.name = name
        self.batch = batch
        self.sampler = None
        self.n = len(ds)
        ds = _Indexed(ds)
        kw = dict(batch_size=batch, num_workers=workers, pin_memory=pin,
                  persistent_workers=workers > 0)
        if world > 1 and stride_split:
            # every w-th sample: each scored once, no padding
            ds = Subset(ds, range(rank, len(ds), world))
            self.loader = DataLoader(ds, shuffle=False, **kw)
        elif world > 1:
            self.sampler = DistributedSampler(ds, num_replicas=world, rank=rank,
                                              shuffle=shuffle, seed=seed)
            self.loader = DataLoader(ds, sampler=self.sampler, **kw)
        else:
            gen = torch.Generator().manual_seed(seed)
            self.loader = DataLoader(ds, shuffle=shuffle, generator=gen, **kw)
        self.rank, self.world = rank, world

    def __len__(self):
        return len(self.loader)

    def describe(self):
        return "%s, %d batches of %d an epoch (rank %d of %d; DataLoader, %d workers)" % (
            self.name, len(self.loader), self.batch, self.rank, self.world,
            self.loader.num_workers)

    def epoch(self, e):
        if self.sampler is not None:
            self.sampler.set_epoch(e)
        it = iter(self.loader)
        seq = 0
        while True:
            try:
                # as RingfeedSource.epoch: no local keeps the batch
                yield _with_meta(next(it), e, seq)
            except StopIteration:
                return
            seq += 1

    def stats(self):
        return {}

    def close(self):
        it = getattr(self.loader, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        self.loader = None


def fmnist_root(root):
    """ROOT/FashionMNIST/raw with the four un-gzipped files torchvision reads,
    made from /usr/share/datasets/fashion-mnist when absent (atomically, so
    ranks preparing it at once do not trip on each other)."""
    raw = os.path.join(root, "FashionMNIST", "raw")
    for name in FMNIST_FILES:
        dst = os.path.join(raw, name)
        if os.path.exists(dst):
            continue
        src = os.path.join(FMNIST_SRC, name + ".gz")
        if not os.path.exists(src):
            raise Fail(f"no {src}: Fashion-MNIST is not installed (scripts/install-deps)")
        os.makedirs(raw, exist_ok=True)
        tmp = f"{dst}.tmp{os.getpid()}"
        with gzip.open(src) as f, open(tmp, "wb") as g:
            shutil.copyfileobj(f, g)
        os.replace(tmp, dst)
    return root


def torch_fmnist(name, root):
    from torchvision import datasets, transforms
    test = name.endswith("test") or name.endswith("t10k")
    return datasets.FashionMNIST(fmnist_root(root), train=not test, download=False,
                                 transform=transforms.PILToTensor()), \
        "FashionMNIST(train=%s)" % (not test)


# ---- the loop ------------------------------------------------------------------

class Trainer:
    """The training loop shared by this example and bench/torch-train: model,
    optimizer, cosine schedule, the per-step clocks and the per-epoch sums."""

    def __init__(self, model, opt, dist, *, lr, total_steps, norm, max_steps=0, dump=None,
                 record_steps=True):
        self.net = model
        self.model = model.to(dist.device)
        if dist.pg:
            from torch.nn.parallel import DistributedDataParallel as DDP
            self.model = DDP(self.net, device_ids=[dist.local_rank] if dist.cuda else None)
        self.opt = opt
        self.dist = dist
        self.lr = lr
        self.total = total_steps
        self.norm = norm
        self.max_steps = max_steps
        self.dump = dump
        self.steps = 0           # updates made
        self.step_loss = []      # per update: loss * n (float64, on the device)
        self.step_count = []     # per update: n
        self.record_steps = record_steps
        self.run_wait = self.run_compute = 0.0
        self.run_timed = 0

    def done(self):
        return self.max_steps and self.steps >= self.max_steps

    def train_epoch(self, source, e):
        """One epoch of source (or until max_steps).  Returns this epoch's
        figures, all-reduced over the ranks."""
        dev = self.dist.device
        self.model.train()
        loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
        correct = torch.zeros((), dtype=torch.int64, device=dev)
        samples = batches = 0
        wait = compute = 0.0
        timed = 0
        self.dist.sync()
        start = time.perf_counter()
        it = source.epoch(e)
        while not self.done():
            t0 = time.perf_counter()
            try:
                images, labels, meta = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            n = labels.shape[0]
            if self.dump is not None:
                ep, seq = meta.epoch, meta.seq
                self.dump.write("".join(f"{ep} {seq} {i}\n" for i in meta.indices.tolist()))
            x = self.norm(images, dev)
            del images, meta  # the ring slot goes back now (x is a copy)
            y = labels.to(dev, non_blocking=True)
            lr = cosine_lr(self.lr, self.steps, self.total)
            for g in self.opt.param_groups:
                g["lr"] = lr
            out = self.model(x)
            loss = F.cross_entropy(out, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            with torch.no_grad():
                ld = loss.detach().double() * n
                loss_sum += ld
                correct += (out.argmax(1) == y).sum()
                if self.record_steps:
                    self.step_loss.append(ld)
                    self.step_count.append(n)
            self.dist.sync()
            t2 = time.perf_counter()
            if self.steps >= WARMUP_STEPS:
                wait += t1 - t0
                compute += t2 - t1
                timed += 1
            self.steps += 1
            samples += n
            batches += 1
        seconds = time.perf_counter() - start
        self.run_wait += wait
        self.run_compute += compute
        self.run_timed += timed
        s = self.dist.sum([float(loss_sum), float(correct), samples, batches, wait, compute,
                           timed])
        (mx,) = self.dist.max([seconds])
        n_all = s[2]
        w = self.dist.world
        return {"epoch": e + 1, "samples": int(n_all), "batches": int(s[3]),
                "updates": batches, "seconds": mx,
                "samples_per_s": n_all / mx if mx > 0 else 0.0,
                "loss": s[0] / n_all if n_all else 0.0, "train_acc": s[1] / n_all if n_all else 0.0,
                "wait_ms": 1e3 * s[4] / s[6] if s[6] else 0.0,
                "compute_ms": 1e3 * s[5] / s[6] if s[6] else 0.0,
                "timed_steps": int(s[6] / w)}

    def evaluate(self, source, e):
        """One pass over source's epoch e; padding left out.  All-reduced."""
        dev = self.dist.device
        self.model.eval()
        loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
        correct = torch.zeros((), dtype=torch.int64, device=dev)
        count = torch.zeros((), dtype=torch.int64, device=dev)
        with torch.no_grad():
            for images, labels, meta in source.epoch(e):
                x = self.norm(images, dev)
                pad = meta.padding
                del images
                y = labels.to(dev, non_blocking=True)
                out = self.net(x)
                losses = F.cross_entropy(out, y, reduction="none")
                hit = out.argmax(1) == y
                if pad is not None and bool(pad.any()):
                    keep = ~pad.to(dev)
                    losses, hit = losses[keep], hit[keep]
                loss_sum += losses.double().sum()
                correct += hit.sum()
                count += hit.numel()
        s = self.dist.sum([float(loss_sum), float(correct), float(count)])
        return {"test_loss": s[0] / s[2] if s[2] else 0.0,
                "test_acc": s[1] / s[2] if s[2] else 0.0, "test_samples": int(s[2])}

    def step_losses(self):
        """Per update, the mean training loss over every rank's samples."""
        if not self.step_loss:
            return []
        t = torch.stack(self.step_loss)
        n = torch.tensor(self.step_count, dtype=torch.float64, device=t.device)
        self.dist._all_reduce(t)
        self.dist._all_reduce(n)
        return (t / n).tolist()

    def verdict(self):
        w = 1e3 * self.run_wait / self.run_timed if self.run_timed else 0.0
        c = 1e3 * self.run_compute / self.run_timed if self.run_timed else 0.0
        s = self.dist.sum([w, c])
        w, c = s[0] / self.dist.world, s[1] / self.dist.world
        return w, c


def bound(wait_ms, compute_ms):
    return "input" if wait_ms > compute_ms else "compute"


def share(wait_ms, compute_ms):
    return 100.0 * wait_ms / (wait_ms + compute_ms) if wait_ms + compute_ms > 0 else 0.0


def dump_path(path, rank, world):
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    return path if world == 1 else f"{path}.rank{rank}"


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="train_torch.py",
        description="ringfeed-train's Fashion-MNIST recipe in PyTorch, fed by ringfeed or "
                    "by torch's DataLoader; DDP under torchrun.")
    ap.add_argument("--loader", choices=("ringfeed", "torch"), default="ringfeed")
    ap.add_argument("--socket", default=None, help="ringfeedd's socket (default: as libringfeed)")
    ap.add_argument("--train", default="fmnist-train",
                    help="training dataset (default %(default)s)")
    ap.add_argument("--eval", default="fmnist-test",
                    help="evaluation dataset (default %(default)s)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128, help="samples per step per rank")
    ap.add_argument("--eval-batch", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=0.05, help="peak lr, cosine-decayed to 0")
    ap.add_argument("--seed", type=int, default=0, help="shuffle and initial weights")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (--loader torch)")
    ap.add_argument("--depth", type=int, default=None,
                    help="ringfeed ring slots (default: the daemon's)")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's)")
    ap.add_argument("--data-root", default=os.path.join(ROOT, "data", "torchvision"),
                    help="torchvision's root (--loader torch; default %(default)s)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N updates")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument("--dump-indices", default=None, metavar="FILE")
    a = ap.parse_args(argv)
    for k in ("epochs", "batch", "eval_batch"):
        if getattr(a, k) < 1:
            ap.error(f"--{k.replace('_', '-')} must be >= 1")
    if a.lr < 0 or not math.isfinite(a.lr):
        ap.error("--lr must be a finite number >= 0")
    if a.workers < 0 or a.max_steps < 0 or a.threads < 0 or a.seed < 0:
        ap.error("--workers, --max-steps, --threads and --seed must be >= 0")
    return a


def make_sources(a, dist):
    if a.loader == "ringfeed":
        dev = str(dist.device) if dist.cuda else None
        train = RingfeedSource(a.train, a.batch, shuffle=True, seed=a.seed, socket=a.socket,
                               device=dev, depth=a.depth, name=PROG)
        ev = RingfeedSource(a.eval, a.eval_batch, shuffle=False, seed=a.seed, socket=a.socket,
                            device=dev, name=PROG + ":eval")
        return train, ev
    tr_ds, tr_name = torch_fmnist(a.train, a.data_root)
    ev_ds, ev_name = torch_fmnist(a.eval, a.data_root)
    train = TorchSource(tr_ds, a.batch, shuffle=True, seed=a.seed, workers=a.workers,
                        rank=dist.rank, world=dist.world, pin=dist.cuda, name=tr_name)
    ev = TorchSource(ev_ds, a.eval_batch, shuffle=False, seed=a.seed, workers=a.workers,
                     rank=dist.rank, world=dist.world, pin=dist.cuda, name=ev_name,
                     stride_split=True)
    return train, ev


def main(argv=None):
    a = parse(argv)
    out = sys.stdout
    dist = train = ev = dump = None
    try:
        if a.threads:
            torch.set_num_threads(a.threads)
        blas = raise_openblas()
        dist = Dist(a.device)
        say = (lambda *s: print(*s, file=out, flush=True)) if dist.rank == 0 and not a.json \
            else (lambda *s: None)
        train, ev = make_sources(a, dist)
        bpe = len(train)
        total = a.epochs * bpe
        if a.dump_indices:
            dump = open(dump_path(a.dump_indices, dist.rank, dist.world), "w")
        model = make_mlp(a.seed)
        opt = make_sgd(model, a.lr)
        norm = normalizer(MEAN, STD)
        T = Trainer(model, opt, dist, lr=a.lr, total_steps=total, norm=norm,
                    max_steps=a.max_steps, dump=dump)
        nparams = sum(p.numel() for p in model.parameters())
        say(f"{PROG}: torch {torch.__version__} on {dist.why}; {blas}; "
            f"{torch.get_num_threads()} torch thread(s)" +
            (f"; {dist.world} ranks, DDP over {dist.backend}" if dist.pg else ""))
        say(f"{PROG}: loader {a.loader}: train {train.describe()}; eval {ev.describe()}")
        say(f"{PROG}: MLP 784-512-256-10 fp32, {nparams} parameters; SGD lr {a.lr:g} cosine to "
            f"0 over {a.epochs} epochs ({total} updates), momentum 0.9, weight decay 0.0005 "
            f"(weights only), batch {a.batch}" + (f" per rank ({a.batch * dist.world} an update)"
                                                  if dist.world > 1 else "") + f", seed {a.seed}")
        say("")
        say("epoch  train loss  train acc  test loss  test acc  samples/s  wait ms  compute ms"
            "  wait %  bound")
        epochs = []
        t_run = time.perf_counter()
        for e in range(a.epochs):
            before = T.steps
            row = T.train_epoch(train, e)
            row.update(T.evaluate(ev, e))
            row["bound"] = bound(row["wait_ms"], row["compute_ms"])
            row["wait_share"] = share(row["wait_ms"], row["compute_ms"]) / 100.0
            if a.loader == "ringfeed":
                st = train.stats()
                row["ringfeed_wait_seconds"] = st.get("wait_seconds", 0.0)
            epochs.append(row)
            say("%5d  %10.4f  %9.4f  %9.4f  %8.4f  %9.0f  %7.3f  %10.3f  %5.1f%%  %s" % (
                row["epoch"], row["loss"], row["train_acc"], row["test_loss"], row["test_acc"],
                row["samples_per_s"], row["wait_ms"], row["compute_ms"],
                100 * row["wait_share"], row["bound"]))
            if T.done() or T.steps == before:
                break
        wall = time.perf_counter() - t_run
        w, c = T.verdict()
        acc = epochs[-1]["test_acc"] if epochs else 0.0
        psum, psha = checksum(T.net)
        rows = dist.gather_rows([psum, T.steps] + list(bytes.fromhex(psha)))
        ranks = [{"rank": r, "param_sum": row[0], "updates": int(row[1]),
                  "param_sha256": bytes(int(b) for b in row[2:]).hex()}
                 for r, row in enumerate(rows)]
        losses = T.step_losses()
        if a.json:
            if dist.rank == 0:
                print(json.dumps({
                    "loader": a.loader, "device": str(dist.device), "world": dist.world,
                    "batch": a.batch, "eval_batch": a.eval_batch, "lr": a.lr, "seed": a.seed,
                    "epochs_planned": a.epochs, "updates_planned": total, "updates": T.steps,
                    "batches_per_epoch": bpe, "train": a.train, "eval": a.eval,
                    "epochs": epochs, "step_losses": losses,
                    "final_loss": losses[-1] if losses else None,
                    "wait_ms": w, "compute_ms": c, "wait_share": share(w, c) / 100.0,
                    "verdict": "input-bound" if w > c else "compute-bound",
                    "seconds": wall, "test_accuracy": acc,
                    "param_sum": psum, "param_sha256": psha, "ranks": ranks}), file=out,
                    flush=True)
        else:
            say("")
            if w > c:
                fix = ("give the daemon more workers (ringfeedctl workers N)"
                       if a.loader == "ringfeed"
                       else "give the DataLoader more workers (--workers)")
                say(f"verdict: input-bound: a step waited {w:.3f} ms for data ({share(w, c):.1f}% "
                    f"of it) and computed {c:.3f} ms; {fix}")
            else:
                say(f"verdict: compute-bound: a step waited {w:.3f} ms for data "
                    f"({share(w, c):.1f}% of it) and computed {c:.3f} ms; the loader keeps up, "
                    "more workers would not help")
            say(f"training and evaluation took {wall:.1f} s")
            say(f"test accuracy: {acc:.4f}")
        return 0
    except Fail as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # ringfeed.Error among them
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    finally:
        if dump:
            dump.close()
        for s in (train, ev):
            if s is not None:
                s.close()
        if dist is not None:
            dist.close()


if __name__ == "__main__":
    sys.exit(main())
