"""MixUp and CutMix on a batch in the trainer, on the batch's device, as
deterministic as the stream: a batch's mixing is a pure function of
(seed, rank, epoch, seq), so a run resumed at a batch mixes it as the
first run did.

    for images, labels in loader:
        images = images.cuda(non_blocking=True).float().div_(255)
        images, targets = ringfeed.mixup(images, labels.cuda(), 1000, loader=loader)
        loss = torch.sum(-targets * torch.log_softmax(model(images), 1), 1).mean()

The conventions are torchvision's (references/classification and
transforms.v2's MixUp/CutMix) and timm's:

* lambda ~ Beta(alpha, alpha); the batch is mixed with a random
  permutation of itself: images lam * x + (1 - lam) * x[perm], targets
  lam * y + (1 - lam) * y[perm], y the labels one-hot (or already soft,
  (N, num_classes) floats), with timm's label smoothing if asked
  (off = s / num_classes, on = 1 - s + off).
* CutMix pastes x[perm]'s box into x: its centre uniform over the pixels
  (cx = randint(W), cy = randint(H)), its half sides int(0.5 * sqrt(1 -
  lam) * W) and ... * H, clipped to the image; lambda then becomes the
  share of the image left unpasted, 1 - box area / (W * H).

The draws (lambda, the permutation, CutMix's centre) come from a CPU
torch.Generator seeded from (seed, rank, epoch, seq) and the op (SplitMix64
over the four words, ``mix_seed``), so they are the same on CPU and CUDA
and for any number of workers; mixup_params and cutmix_params give them
without touching a batch.  The inputs are not modified: the results are
new tensors on the images' device.
"""
import math

__all__ = ["mixup", "cutmix", "mixup_params", "cutmix_params", "mix_seed"]

_MASK64 = (1 << 64) - 1
_OP_TAGS = {"mixup": 1, "cutmix": 2}


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _word(name, v):
    if isinstance(v, bool) or not isinstance(v, int) and not hasattr(v, "__index__"):
        raise TypeError(f"{name}={v!r}: an integer is required")
    v = int(v.__index__())
    if not 0 <= v <= _MASK64:
        raise ValueError(f"{name}={v}: must be 0 to 2**64 - 1")
    return v


def mix_seed(op, seed, epoch, seq, rank=0):
    """The 64-bit seed of op's ("mixup" or "cutmix") generator for the batch
    (epoch, seq) of rank in a run seeded with seed: SplitMix64 chained over
    seed, rank, epoch, seq and the op's tag."""
    if op not in _OP_TAGS:
        raise ValueError(f"op={op!r}: use 'mixup' or 'cutmix'")
    h = 0
    for name, v in (("seed", seed), ("rank", rank), ("epoch", epoch), ("seq", seq)):
        h = _splitmix64(h ^ _word(name, v))
    return _splitmix64(h ^ _OP_TAGS[op])


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the binding works without torch
        raise ImportError("ringfeed.mixup and ringfeed.cutmix need PyTorch") from e
    return torch


def _generator(op, seed, epoch, seq, rank):
    torch = _torch()
    g = torch.Generator()
    g.manual_seed(mix_seed(op, seed, epoch, seq, rank))
    return g


def _alpha(alpha):
    a = float(alpha)
    if not (a > 0.0 and math.isfinite(a)):
        raise ValueError(f"alpha={alpha!r}: must be a positive number (Beta(alpha, alpha))")
    return a


def _beta(g, alpha):
    torch = _torch()
    return float(torch._sample_dirichlet(torch.tensor([alpha, alpha], dtype=torch.float64),
                                         generator=g)[0])


def _batch_of(seed, epoch, seq, rank, loader, batch):
    """(seed, epoch, seq, rank) from the arguments, loader= or batch=."""
    if loader is not None and batch is not None:
        raise TypeError("give loader= or batch=, not both")
    src = loader.last if loader is not None else batch
    if loader is not None and src is None:
        raise ValueError("loader= has delivered no batch yet: mix inside the loop over it")
    if src is not None:
        if epoch is not None or seq is not None:
            raise TypeError("epoch= and seq= come from loader=/batch=: give one or the other")
        epoch, seq = src.epoch, src.seq
    if loader is not None:
        if seed is not None or rank is not None:
            raise TypeError("seed= and rank= come from loader=: give one or the other")
        seed, rank = loader.seed, loader.rank
    if epoch is None or seq is None:
        raise TypeError("the batch's epoch= and seq= are required (or loader=/batch=)")
    return (0 if seed is None else seed), epoch, seq, (0 if rank is None else rank)


def mixup_params(n, alpha=1.0, *, seed=0, epoch, seq, rank=0):
    """MixUp's draws for a batch of n: (lam, perm), lam a float in (0, 1),
    perm a CPU int64 permutation of range(n)."""
    n = _word("n", n)
    g = _generator("mixup", seed, epoch, seq, rank)
    lam = _beta(g, _alpha(alpha))
    return lam, _torch().randperm(n, generator=g)


def cutmix_params(n, height, width, alpha=1.0, *, seed=0, epoch, seq, rank=0):
    """CutMix's draws for a batch of n images of height x width:
    (lam, perm, (y1, y2, x1, x2)), lam corrected to the box's real area
    (1 - (y2 - y1) * (x2 - x1) / (height * width)), the box rows y1:y2 and
    columns x1:x2."""
    torch = _torch()
    n, height, width = _word("n", n), _word("height", height), _word("width", width)
    if height == 0 or width == 0:
        raise ValueError(f"an image of {height}x{width}: nothing to cut")
    g = _generator("cutmix", seed, epoch, seq, rank)
    lam = _beta(g, _alpha(alpha))
    perm = torch.randperm(n, generator=g)
    cx = int(torch.randint(width, (1,), generator=g))
    cy = int(torch.randint(height, (1,), generator=g))
    r = 0.5 * math.sqrt(1.0 - lam)
    rw, rh = int(r * width), int(r * height)
    x1, x2 = max(cx - rw, 0), min(cx + rw, width)
    y1, y2 = max(cy - rh, 0), min(cy + rh, height)
    lam = 1.0 - (x2 - x1) * (y2 - y1) / (width * height)
    return lam, perm, (y1, y2, x1, x2)


def _targets(labels, num_classes, dtype, label_smoothing):
    """labels as (N, num_classes) soft targets of dtype on labels' device."""
    torch = _torch()
    k = _word("num_classes", num_classes)
    if k < 1:
        raise ValueError("num_classes must be at least 1")
    s = float(label_smoothing)
    if not 0.0 <= s < 1.0:
        raise ValueError(f"label_smoothing={label_smoothing!r}: must be in [0, 1)")
    if labels.dim() == 2 and labels.is_floating_point():
        if labels.shape[1] != k:
            raise ValueError(f"soft labels of shape {tuple(labels.shape)}: "
                             f"expected (N, {k}) for num_classes={k}")
        return labels.to(dtype)
    if labels.dim() != 1 or labels.is_floating_point() or labels.dtype == torch.bool:
        raise TypeError(f"labels: expected integer class indices (N,) or soft labels (N, {k}), "
                        f"got {labels.dtype} of shape {tuple(labels.shape)}")
    bad = (labels < 0) | (labels >= k)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise ValueError(f"labels[{i}] = {int(labels[i])}: outside 0..{k - 1} (num_classes={k})")
    off = s / k
    y = torch.full((labels.shape[0], k), off, dtype=dtype, device=labels.device)
    return y.scatter_(1, labels.long().view(-1, 1), 1.0 - s + off)


def _check_batch(images, labels):
    torch = _torch()
    if not isinstance(images, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError("images and labels must be torch tensors")
    if images.dim() != 4:
        raise ValueError(f"images of shape {tuple(images.shape)}: expected a batch (N, C, H, W) "
                         "or (N, H, W, C)")
    if labels.shape[0] != images.shape[0]:
        raise ValueError(f"{images.shape[0]} images but {labels.shape[0]} labels")


def mixup(images, labels, num_classes, alpha=1.0, *, seed=None, epoch=None, seq=None, rank=None,
          loader=None, batch=None, label_smoothing=0.0):
    """MixUp: (lam * images + (1 - lam) * images[perm], soft targets mixed
    alike), new tensors on images' device; lam, perm = mixup_params(...).

    images: a floating-point batch (N, C, H, W) or (N, H, W, C) (convert
    uint8 first: mixing bytes would round).  labels: int class indices (N,)
    or soft labels (N, num_classes), on any device (moved to images').  The
    batch's identity: epoch= and seq= (and seed=, rank=, default 0), or
    loader= (its seed, rank and last batch's epoch and seq), or batch= (a
    ringfeed.BatchInfo: its epoch and seq; seed= and rank= as given).
    Targets are images' dtype, float32 for others.
    """
    _check_batch(images, labels)
    if not images.is_floating_point():
        raise TypeError(f"mixup: images are {images.dtype}; convert them to a floating-point "
                        "dtype first (e.g. images.float().div_(255))")
    seed, epoch, seq, rank = _batch_of(seed, epoch, seq, rank, loader, batch)
    lam, perm = mixup_params(images.shape[0], alpha, seed=seed, epoch=epoch, seq=seq, rank=rank)
    perm = perm.to(images.device)
    y = _targets(labels.to(images.device), num_classes, images.dtype, label_smoothing)
    x = images.mul(lam).add_(images.index_select(0, perm), alpha=1.0 - lam)
    y = y.mul(lam).add_(y.index_select(0, perm), alpha=1.0 - lam)
    return x, y


def cutmix(images, labels, num_classes, alpha=1.0, *, seed=None, epoch=None, seq=None, rank=None,
           loader=None, batch=None, layout=None, label_smoothing=0.0):
    """CutMix: images with images[perm]'s box pasted in, and the soft
    targets mixed with lambda corrected to the box's area, as new tensors on
    images' device; lam, perm, box = cutmix_params(...).

    images: (N, C, H, W) for layout="chw" (the default), (N, H, W, C) for
    "hwc" (loader= gives its stream's layout when layout is None); any dtype,
    uint8 included (pixels are copied, not blended).  labels and the batch's
    identity as for mixup.  Targets are images' dtype when it is floating
    point, float32 otherwise.
    """
    torch = _torch()
    _check_batch(images, labels)
    if layout is None:
        layout = getattr(loader, "_info", {}).get("layout", "chw") if loader is not None else "chw"
    if layout not in ("chw", "hwc"):
        raise ValueError(f'layout={layout!r}: use "chw" or "hwc"')
    seed, epoch, seq, rank = _batch_of(seed, epoch, seq, rank, loader, batch)
    hw = (images.shape[2], images.shape[3]) if layout == "chw" else (images.shape[1], images.shape[2])
    lam, perm, (y1, y2, x1, x2) = cutmix_params(images.shape[0], hw[0], hw[1], alpha, seed=seed,
                                                epoch=epoch, seq=seq, rank=rank)
    perm = perm.to(images.device)
    dtype = images.dtype if images.is_floating_point() else torch.float32
    y = _targets(labels.to(images.device), num_classes, dtype, label_smoothing)
    x = images.clone()
    if layout == "chw":
        x[:, :, y1:y2, x1:x2] = images[:, :, y1:y2, x1:x2].index_select(0, perm)
    else:
        x[:, y1:y2, x1:x2, :] = images[:, y1:y2, x1:x2, :].index_select(0, perm)
    y = y.mul(lam).add_(y.index_select(0, perm), alpha=1.0 - lam)
    return x, y
