"""ringfeed.Loader: a ringfeedd stream that iterates like torch.utils.data.DataLoader.

Choices a DataLoader user should know (docs/pytorch.md says the same):

* One ``for`` loop is one epoch of this rank's share.  A loop left early
  (``break``, an exception, Ctrl-C) leaves the loader where it stopped: the
  next loop goes on with the rest of that epoch, so no sample is lost or
  repeated.  ``set_epoch(e)`` starts epoch ``e`` from its first batch (as
  DistributedSampler's does) unless the loader already stands inside epoch
  ``e`` (after ``load_state_dict``), where it goes on from there.  Without
  ``set_epoch``, each loop runs the next epoch, each with its own shuffle.
  ``reset()`` (or ``set_epoch(e, restart=True)``) starts the epoch again
  from its first batch even when the loader stands inside it: a notebook
  cell that re-runs a loop calls it first.
* A loader dropped without ``close()`` lets its ring go as soon as the
  last reference to it goes (``with ringfeed.Loader(...) as loader:``
  closes it at once); the daemon refuses more than its max-clients rings,
  and that error says how many loaders this process holds open.
* ``drop_last=True`` means what it means to both DataLoader and
  DistributedSampler: no rank gets wrap-around padding (the tail that does
  not split evenly over the ranks is dropped) and no batch is partial.
* Images are views of the daemon's ring: uint8 (N, C, H, W) for
  ``layout="chw"`` (the default), (N, H, W, C) for ``"hwc"``, and for raw
  tensor datasets the stored element type (uint8, int8, int16, int32,
  float32 or float64, as packed) and shape with a channel axis
  (Fashion-MNIST: uint8 (N, 1, 28, 28), what ``PILToTensor`` gives);
  ``loader.dtype`` names it.  Labels are int64.
* A batch's ring slot goes back to the daemon when the last tensor or
  array viewing it is freed; slots go back in order.  A program may hold up
  to ``depth - 1`` batches at once; asking for more raises ringfeed.Error
  (ENOBUFS) rather than waiting forever.  ``copy=True`` hands out batches
  the program owns (one memcpy each) and frees slots at once.
* A dataset of named fields (MANIFEST kind fields) gives each batch as a
  dict {field name: value} in the schema's order: a fixed-size field (an
  image after its transform, a mask, a tensor, a scalar) a tensor of
  shape (N, *shape), a ragged or bytes field a ringfeed.RaggedBatch whose
  ``values`` (rows, *tail) and ``offsets`` (int64, N + 1) are views of
  the ring too.  Element types: uint8, int8, int16, int32, int64,
  float16, bfloat16, float32, float64 as stored; uint16 (a u16 mask) is
  uint16 for numpy, and int32 (a copy) for a torch that has no uint16
  tensors from numpy;
  bfloat16 for numpy, which has none, is float32 (a copy).  A dataset
  whose fields are just an image (or tensor) and its "label" still gives
  (images, labels), as every older dataset does.  ``loader.fields``
  describes the fields (None from a daemon older than fields), and
  ``loader.last.dropped`` counts the boxes the crop and the geometric
  augmentations dropped in the last batch (they follow both).
* What the dataset is: ``loader.classes`` and ``loader.class_to_idx``
  (ImageFolder's), ``loader.num_samples`` (the whole dataset's, not one
  rank's), ``loader.fields`` and ``loader.source(i)`` (the file sample
  ``i`` was packed from, relative to the folder packed), asked of the
  daemon (its CLASSES and SOURCES verbs).
* The stream is a pure function of (dataset, seed, epoch, rank, world,
  batch, transform): ``state_dict()`` is that cursor, and
  ``load_state_dict()`` continues with the next batch exactly.
* A loader belongs to the process that made it.  A forked child (a
  DataLoader worker, a multiprocessing child) that uses it gets a
  RuntimeError, and hands back none of its parent's batches, at exit or
  ever: a child makes its own Loader.
* Numbers are checked, never wrapped: an argument outside what the
  stream's fields hold raises OverflowError naming it (``seed`` is 0 to
  2**64 - 1; epochs run from 0 to 2**32 - 1, the protocol's).
"""
import array
import bisect
import errno
import operator
import os
import re
import struct
import weakref

from . import _ringfeed
from ._ringfeed import Error
from . import transforms as _transforms
from .ragged import RaggedBatch

_RECORD_DTYPE = None  # numpy dtype of libringfeed's struct rf_sample, made on first use


def _records_dtype():
    global _RECORD_DTYPE
    if _RECORD_DTYPE is None:
        import numpy as np
        _RECORD_DTYPE = np.dtype([("index", "<u8"), ("label", "<i4"), ("flags", "<u4")])
    return _RECORD_DTYPE


def _torch_or_none():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _have_numpy():
    try:
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False


def _bad(msg):
    return Error(errno.EINVAL, msg)


_LOADERS = weakref.WeakSet()  # every Loader made in this process (or a parent before a fork)


def _open_here():
    """How many Loaders this process holds open (not closed, not freed)."""
    pid = os.getpid()
    return sum(1 for l in list(_LOADERS) if l._client is not None and l._pid == pid)


def _with_count(e):
    """The daemon's refusal of one ring too many (max-clients, or the
    memory of the uid's rings) as it was, with this process's open loaders
    counted: those a notebook made and never closed are often the cause."""
    n = _open_here()
    return Error(e.errno, f"{e.strerror}; this process holds {n} ringfeed.Loader"
                 f"{'' if n == 1 else 's'} open: close() those it no longer reads (or "
                 "make them with `with ringfeed.Loader(...) as loader:`)")


def _as_is(a):
    """output="buffer": ringfeed's array itself (the buffer protocol)."""
    return a


_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1
_I32_MIN, _I32_MAX = -2**31, 2**31 - 1
_EPOCH_MAX = _U32_MAX  # the control protocol's ATTACH epoch= is a u32


def _show(v):
    """v for a message (an int too long to print is described)."""
    return str(v) if v.bit_length() <= 256 else f"(a {v.bit_length()}-bit number)"


def _integer(name, value, lo, hi):
    """value as an int in [lo, hi]: TypeError when it is not an integer
    (a float, a string), OverflowError outside the range, each naming the
    argument."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"ringfeed: {name}={value!r}: an integer is required") from None
    if not lo <= v <= hi:
        raise OverflowError(f"ringfeed: {name}={_show(v)} is out of range: use {lo} to {hi}")
    return v


def _millis(name, seconds):
    """seconds (> 0 or >= 0, checked by the caller) in whole ms for an int
    field; OverflowError naming the argument past 2**31 - 1 ms."""
    if seconds * 1000 > _I32_MAX:
        raise OverflowError(f"ringfeed: {name}={seconds!r} is out of range: use at most "
                            f"{_I32_MAX // 1000} seconds")
    return int(seconds * 1000)


_SOURCES_CHUNK = 1024  # source lines asked per SOURCES request (<= CTL_SOURCES_MAX)
_SUBSET_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")  # proto/subset.h's name rule


def _unescape_source(line):
    """A source-list line (proto/sources.h: \\\\ and \\xHH escapes) as the
    path os.scandir would name: os.fsdecode of its bytes."""
    if "\\" not in line:
        return line
    raw, out, i = line.encode(), bytearray(), 0
    while i < len(raw):
        if raw[i] != 0x5C:
            out.append(raw[i])
            i += 1
        elif raw[i + 1:i + 2] == b"\\":
            out.append(0x5C)
            i += 2
        else:  # \xHH: the daemon checked the list, so this is one
            out.append(int(raw[i + 2:i + 4], 16))
            i += 4
    return os.fsdecode(bytes(out))


class BatchInfo:
    """What came with a batch besides its pixels and labels.

    ``epoch``, ``seq`` (batch number within the epoch), ``stream_seq``
    (batch number since the loader attached), ``substituted`` (how many
    samples replaced bad ones), and per sample ``indices`` (dataset index),
    ``labels`` and ``flags`` (ringfeed.SAMPLE_PADDING,
    ringfeed.SAMPLE_SUBSTITUTED) with the masks ``padding`` and
    ``substitutes``; ``dropped``, the boxes the crop or a geometric
    augmentation dropped in this batch (their centre left the image; 0 for
    a dataset without boxes).  Arrays come as
    the loader's output type (array.array for output="buffer").
    """

    __slots__ = ("_recs", "_torch", "_buffer", "_mix", "epoch", "seq", "stream_seq",
                 "substituted", "dropped")

    def __init__(self, recs, epoch, seq, stream_seq, substituted, torch_mod, dropped=0,
                 buffer=False, mix=None):
        self._recs = recs
        self._torch = torch_mod
        self._buffer = buffer
        self._mix = mix  # a mixture's [(source, first index)], else None
        self.epoch = epoch
        self.seq = seq
        self.stream_seq = stream_seq
        self.substituted = substituted
        self.dropped = dropped

    def __len__(self):
        return len(self._recs) // 16

    def _field(self, name, dtype):
        if self._buffer:  # no numpy: struct rf_sample's records unpacked
            col = ("index", "label", "flags").index(name)
            return array.array("q" if dtype == "int64" else "i",
                               (r[col] for r in struct.iter_unpack("<QiI", self._recs)))
        import numpy as np
        a = np.frombuffer(self._recs, dtype=_records_dtype())[name].astype(dtype)
        return self._torch.from_numpy(a) if self._torch else a

    @property
    def indices(self):
        return self._field("index", "int64")

    @property
    def labels(self):
        return self._field("label", "int64")

    def _source_of(self):
        """Each sample's source number and its index in that source."""
        if self._mix is None:
            raise AttributeError("sources: this loader reads one dataset, not a mixture")
        firsts = [f for _, f in self._mix]
        idx = [r[0] for r in struct.iter_unpack("<QiI", self._recs)]
        src = [bisect.bisect_right(firsts, i) - 1 for i in idx]
        return src, [i - firsts[k] for i, k in zip(idx, src)]

    def _ints(self, values):
        if self._buffer:
            return array.array("q", values)
        import numpy as np
        a = np.asarray(values, dtype=np.int64)
        return self._torch.from_numpy(a) if self._torch else a

    @property
    def sources(self):
        """A mixture's batch: each sample's source, numbered as
        ``loader.sources`` lists them."""
        return self._ints(self._source_of()[0])

    @property
    def source_indices(self):
        """A mixture's batch: each sample's index in its own source."""
        return self._ints(self._source_of()[1])

    @property
    def source_counts(self):
        """A mixture's batch: {source name: samples of it in the batch}."""
        counts = {name: 0 for name, _ in self._mix or ()}
        for k in self._source_of()[0]:
            counts[self._mix[k][0]] += 1
        return counts

    @property
    def flags(self):
        return self._field("flags", "int32")

    @property
    def padding(self):
        return self._mask(_ringfeed.SAMPLE_PADDING)

    @property
    def substitutes(self):
        return self._mask(_ringfeed.SAMPLE_SUBSTITUTED)

    def _mask(self, bit):
        if self._buffer:
            return array.array("b", (f & bit != 0 for f in self.flags))
        return (self.flags & bit) != 0

    def __repr__(self):
        return (f"BatchInfo(epoch={self.epoch}, seq={self.seq}, samples={len(self)}, "
                f"substituted={self.substituted}, dropped={self.dropped})")


def _legacy(fields):
    """True for a field table that is an older dataset's (an image or a
    tensor, and its label), whose batches stay (images, labels)."""
    return (len(fields) == 2 and fields[0]["name"] in ("image", "tensor") and
            fields[0]["kind"] == "fixed" and fields[1]["name"] == "label" and
            fields[1]["kind"] == "fixed" and fields[1]["dtype"] == "int64" and
            fields[1]["shape"] == ())


class Loader:
    """Batches of one dataset from the ringfeedd daemon, for this rank.

    dataset: a name from the daemon's catalogue (``ringfeedctl datasets``),
      or a packed dataset's folder (a path with a '/', or an existing
      folder holding a MANIFEST): served by the daemon at the socket when
      its config names it, else by your own daemon, which the library
      starts when none runs (``ringfeedd --user``; it exits when idle).
      A dict ``{"web": 0.7, "books": 0.3}`` of catalogue names and weights
      is a weighted mixture (ATTACH mix=; a config's ``mixture.NAME`` is
      attached by its NAME): every prefix of the stream within one sample
      of the weights, each source shuffled and split across ranks by its
      own sampler; ``loader.sources`` names them and ``loader.last.sources``
      / ``source_counts`` say where each sample came from
      (docs/design/mixtures.md).
    repeat, epoch_of, per_stream: a mixture's.  repeat=True (the default):
      a source that runs out starts its next epoch, and the mixture's epoch
      is one pass over epoch_of (a source's name; None: the first); False:
      the epoch ends where the first source runs out.  per_stream=True
      draws each batch from one source (Streaming's per_stream batching).
    batch_size, shuffle, seed, drop_last: as DataLoader and DistributedSampler.
      shuffle="block" shuffles blocks of consecutive samples (about 4 of
      the pack's shards each) and the samples within each block: for data
      behind a cache smaller than the dataset, at the cost of batches that
      mix few shards (docs/design/determinism.md says which to use when);
      shuffle_block: its block size in samples (None: the daemon's).
    transform: "raw" (tensor datasets as stored, in their own dtype), "train" (RandomResizedCrop
      + RandomHorizontalFlip) or "eval" (Resize + CenterCrop) for JPEGs;
      size: their output side (daemon's default 224); "none" for JPEG
      datasets whose images have one size (MANIFEST image_shape HxW): each
      as it is, (3, H, W), no size; layout: "chw"/"hwc".  "tokens" for
      token datasets (ringfeed-pack tokens): sample i is the window of
      context + 1 tokens from token i * context of the documents one
      after another (context=: 1..65536), batches (B, context + 1) of the
      pack's dtype (u16 as int32 for a torch without uint16); doc_ids=True
      gives a dict {"tokens", "doc_ids"}, doc_ids each token's document
      relative to the window's first (int32).  ringfeed.shift(w) gives
      inputs and targets.  loader.last.indices are the windows.
    rank, world_size: default from RANK/WORLD_SIZE (torchrun), else Open
      MPI's, else 0 and 1.  Under torchrun every loader is split by rank,
      an eval loader too: each rank reads its 1/world_size of the eval
      set (padded to equal shares, the padding in ``loader.last.padding``
      unless drop_last), so the metric must be all-reduced.  For
      validation on rank 0 alone, give ``rank=0, world_size=1`` to that
      loader (made on rank 0 only): it reads the whole set.
    socket: the daemon's control socket (default: $RINGFEED_SOCKET, then
      $XDG_RUNTIME_DIR/ringfeed.sock, then /run/ringfeed/ringfeed.sock).
    depth: ring slots (the daemon's default: 4, or up to 16 for small
      batches): how far the daemon runs ahead, and depth - 1 batches may be
      held at once.
    params: more ATTACH keys, a dict or "key=value ..." (e.g. scale, ratio,
      flip, crop; weight=3 for a larger share of the daemon's workers while
      other trainers wait; share=0 to decode alone even beside an identical
      stream).  name: a label in the daemon's stats.
    output: "torch" (default when torch imports), "numpy" (default when
      only numpy does) or "buffer" (default when neither does): batches as
      ringfeed's own arrays, read through the buffer protocol
      (memoryview(images) has their format and shape; bfloat16 elements
      show as their uint16 bit patterns), and loader.last's arrays as
      array.array.
    dtype: None (default: uint8 images as the workers made them), or
      float32, float16 or bfloat16 (torch dtypes, numpy's or their names;
      bfloat16 for torch only): images scaled to [0, 1] as ToTensor /
      ConvertImageDtype give them, in a new tensor the loader makes (one
      SIMD pass, no Python per sample; the slot goes back at once).
    normalize: None, or (mean, std), one value per channel: images become
      (x / 255 - mean) / std, as torchvision's Normalize after ToTensor
      (within an ulp or two of float32); implies float32 unless dtype says
      otherwise.  Both need uint8 images (train, eval, none, or a uint8
      tensor dataset) delivered as (images, labels).  With device=, the
      conversion runs on the GPU after the one copy: libringfeed copies
      the uint8 batch into a staging buffer on the device and a kernel
      writes the floats into the batch tensor, on the current stream,
      bit for bit the host's values (rf_cuda_convert_release).
    copy: hand out owned copies instead of views of the ring.
    device: "cuda[:N]" copies each batch to that GPU on the current stream
      (the slot goes back when the copy is done); needs torch with CUDA.
      A dict batch has every column copied on that stream (RaggedBatch
      values and offsets both), each copy complete when next() returns.
    timeout: seconds a batch may take before ringfeed.Error(ETIMEDOUT);
      None waits for as long as it takes (still noticing Ctrl-C).
    reconnect_timeout: seconds to keep reconnecting to a daemon that went
      away before failing; the stream resumes exactly where it was.
    subset: the samples to draw from (ATTACH subset=): a set's name from
      ``ringfeed-pack split`` / ``ringfeed.split`` ("train", "val"; the
      pack's sets are ``loader.subsets``), or dataset indices as
      ``(start, stop)``, ``range(start, stop)`` or ``slice(start, stop)``
      (half-open, step 1, bounds from 0; None: that end of the dataset).
      The daemon shuffles, shards and pads within it as it would a whole
      dataset; ``loader.last.indices`` stay dataset indices.  None (the
      default): the whole dataset.
    augment: augmentations the daemon's workers run on each sample after
      the transform, in order: a list of ringfeed.transforms ops
      (torchvision's names and arguments: ``[T.ColorJitter(brightness=0.4),
      T.RandomErasing(p=0.25)]``), a spec string
      (``"RandomCrop:size=32:padding=4,RandomHorizontalFlip"``), or
      ``"@NAME"``, a recipe of the daemon's config (recipe.NAME).  For uint8
      images (train, eval, none, or a uint8 tensor dataset shaped CxHxW,
      HxW or HxWxC).  Each op draws from the sample's own random stream
      after the transform's draws: the same batches for any worker count
      and after a resume, and a train crop the same with or without
      augment.  The daemon refuses an unknown op, argument or value,
      RandomErasing anywhere but last, and an op its build lacks
      (ringfeed.Error, EINVAL).
    """

    def __init__(self, dataset, batch_size=256, *, transform="raw", size=None, seed=0,
                 shuffle=True, drop_last=False, rank=None, world_size=None, socket=None,
                 depth=None, params=None, name=None, output=None, copy=False, device=None,
                 layout=None, timeout=None, reconnect_timeout=30.0, dtype=None,
                 normalize=None, subset=None, augment=None, shuffle_block=None,
                 context=None, doc_ids=False, repeat=True, epoch_of=None, per_stream=False):
        self._client = None
        self._pid = os.getpid()
        self._torch = None
        batch_size = _integer("batch_size", batch_size, 0, _U32_MAX)
        seed = _integer("seed", seed, 0, _U64_MAX)
        size = None if size is None else _integer("size", size, 0, _U32_MAX)
        depth = None if depth is None else _integer("depth", depth, 0, _U32_MAX)
        rank = None if rank is None else _integer("rank", rank, _I32_MIN, _I32_MAX)
        world_size = None if world_size is None else _integer("world_size", world_size,
                                                              _I32_MIN, _I32_MAX)
        if output is None:
            self._torch = _torch_or_none()
            output = "torch" if self._torch else "numpy" if _have_numpy() else "buffer"
        elif output == "torch":
            self._torch = _torch_or_none()
            if self._torch is None:
                raise _bad('output="torch" but torch does not import; use output="numpy"')
        elif output == "numpy":
            if not _have_numpy():
                raise _bad('output="numpy" but numpy does not import; use output="buffer"')
        elif output != "buffer":
            raise _bad(f'output={output!r}: use "torch", "numpy" or "buffer"')
        self.output = output
        self._device = self._check_device(device)
        self._convert = self._check_convert(dtype, normalize)
        self._copy = bool(copy)
        if timeout is not None and not timeout > 0:
            raise _bad(f"timeout={timeout!r}: use a number of seconds > 0, or None")
        self._timeout_ms = -1 if timeout is None else max(1, _millis("timeout", timeout))
        if not reconnect_timeout >= 0:
            raise _bad(f"reconnect_timeout={reconnect_timeout!r}: use seconds >= 0")
        reconnect_ms = _millis("reconnect_timeout", reconnect_timeout)
        self.subset, subset_key = self._subset_param(subset)
        self.augment = _transforms.render(augment)
        shuffle, shuffle_mode = self._shuffle_param(shuffle, shuffle_block)
        self.context, self.doc_ids, tokens_key = self._tokens_param(transform, context, doc_ids)
        dataset, mix_key = self._mix_param(dataset, repeat, epoch_of, per_stream)
        self._params = self._join_params(params, layout, drop_last, subset_key, self.augment,
                                         tokens_key)
        if mix_key:
            self._params = " ".join(filter(None, [mix_key, self._params]))
        if shuffle_block is not None:
            self._params = " ".join(filter(None, [self._params, f"block={shuffle_block}"]))
        self._opts = dict(
            dataset=os.fspath(dataset), batch=batch_size, rank=-1 if rank is None else rank,
            world=-1 if world_size is None else world_size, seed=seed, transform=transform,
            size=size or 0, depth=depth or 0, shuffle=shuffle_mode,
            drop_last=bool(drop_last), params=self._params or None, name=name,
            socket=os.fspath(socket) if socket is not None else None,
            reconnect_ms=reconnect_ms, dlpack=self.output == "torch")
        if self.output == "torch":
            from torch.utils.dlpack import from_dlpack
            self._from = from_dlpack
        elif self.output == "buffer":
            self._from = _as_is
        else:
            import numpy as np
            self._from = np.asarray
        self.dataset = os.fspath(dataset) or mix_key.split(" ")[0][len("mix="):]
        self.sources = None   # a mixture's [(source name, its first index)]
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.shuffle_block = shuffle_block
        self.drop_last = bool(drop_last)
        self.transform = transform
        self.size = size
        self.last = None
        self._classes = None  # metadata, asked of the daemon on first use
        self._sources = {}    # source lines by chunk start
        self._target = None
        self.sampler = _Sampler(self)
        try:
            self._open(0, 0)
        except Error as e:
            if e.errno in (errno.EUSERS, errno.ENOMEM) and "per-client" not in str(e):
                raise _with_count(e) from None
            raise
        _LOADERS.add(self)
        self.rank = self._info["rank"]
        self.world_size = self._info["world"]

    # ---- construction helpers
    def _check_convert(self, dtype, normalize):
        """(output dtype name, mean, std) for dtype= and normalize=, or None."""
        if dtype is None and normalize is None:
            return None
        name = "float32" if dtype is None else str(dtype).replace("torch.", "")
        name = {"float": "float32", "half": "float16", "<class 'numpy.float32'>": "float32",
                "<class 'numpy.float16'>": "float16"}.get(name, name)
        if name == "uint8" and normalize is None:
            return None
        if name not in ("float32", "float16", "bfloat16"):
            raise _bad(f"dtype={dtype!r}: use None (uint8), float32, float16 or bfloat16")
        if self.output == "buffer":
            raise _bad(f'dtype={name} / normalize= make torch tensors or numpy arrays: use '
                       'output="torch" or "numpy" (install one of them)')
        if name == "bfloat16" and self.output != "torch":
            raise _bad('dtype=bfloat16 is for output="torch": numpy has no bfloat16')
        mean = std = None
        if normalize is not None:
            try:
                mean, std = normalize
                mean, std = [float(v) for v in mean], [float(v) for v in std]
            except (TypeError, ValueError):
                raise _bad(f"normalize={normalize!r}: use (mean, std), one number per "
                           "channel each") from None
            if len(mean) != len(std) or not all(v > 0 for v in std):
                raise _bad(f"normalize={normalize!r}: mean and std of one length, std > 0")
        return name, mean, std

    def _check_convert_stream(self):
        """The stream must give uint8 images for dtype=/normalize=."""
        name, mean, std = self._convert
        shape, layout = tuple(self._info["shape"]), self._info["layout"]
        if self._dict or self.dtype != "uint8" or layout not in ("chw", "hwc"):
            raise _bad(f"dtype={name} / normalize= convert uint8 images delivered as "
                       f"(images, labels); this stream gives {self.dtype} {layout} "
                       + ("dict batches" if self._dict else "samples"))
        c = shape[0] if layout == "chw" else shape[2]
        if mean is not None and len(mean) != c:
            raise _bad(f"normalize has {len(mean)} values per channel, the images have {c} "
                       "channels")
        self._conv = (name, c, shape[1] * shape[2] if layout == "chw" else 1,
                      layout == "hwc", mean if mean is not None else [0.0] * c,
                      std if std is not None else [1.0] * c)

    def _converted(self, images):
        """A new float batch of images (the view is let go after)."""
        import numpy as np

        name, c, plane, hwc, mean, std = self._conv
        src = self._from(images)  # a view of the slot (DLPack for torch)
        if self.output == "torch":
            src = src.numpy()
            out = self._torch.empty(src.shape, dtype=getattr(self._torch, name))
            dst = out.numpy() if name == "float32" else out.view(self._torch.int16).numpy()
        else:
            out = dst = np.empty(src.shape, dtype=name)
        _ringfeed.normalize(src, dst, name, c, plane, hwc, mean, std)
        return out

    def _check_device(self, device):
        if device is None:
            return None
        text = str(device)
        if text == "cpu":
            return None
        if not text.startswith("cuda"):
            raise _bad(f'device={device!r}: use None, "cpu" or "cuda[:N]"')
        if self.output != "torch" or not self._torch.cuda.is_available():
            raise Error(errno.ENODEV, f"device={device!r} needs torch with a CUDA device; "
                        "this torch has none (read batches on the host: device=None)")
        return self._torch.device(text)

    @staticmethod
    def _subset_param(subset):
        """(loader.subset, ATTACH's subset= value or None) for subset=."""
        if subset is None:
            return None, None
        if isinstance(subset, str):
            if not _SUBSET_NAME.fullmatch(subset):
                raise _bad(f"subset={subset!r}: a set's name is 1 to 32 of A-Z a-z 0-9 _ -, "
                           "starting with a letter (loader.subsets lists the pack's)")
            return subset, subset
        if isinstance(subset, (range, slice)):
            if subset.step not in (None, 1):
                raise _bad(f"subset={subset!r}: step {subset.step}: a subset is contiguous "
                           "indices (step 1), or a named set")
            bounds = (subset.start, subset.stop)
        elif isinstance(subset, tuple) and len(subset) == 2:
            bounds = subset
        else:
            raise _bad(f"subset={subset!r}: use a set's name, (start, stop), a range or a "
                       "slice")
        start, stop = (None if b is None else _integer("subset", b, -_U64_MAX, _U64_MAX)
                       for b in bounds)
        if (start is not None and start < 0) or (stop is not None and stop < 0):
            raise _bad(f"subset={subset!r}: bounds count from 0 (dataset indices); "
                       "negative ones are not taken")
        if start is not None and stop is not None and start >= stop:
            raise _bad(f"subset={subset!r}: empty: start must be below stop")
        start = start or 0
        if start == 0 and stop is None:
            return None, None  # the whole dataset
        return (start, stop), f"{start}:{'' if stop is None else stop}"

    @staticmethod
    def _shuffle_param(shuffle, block):
        """shuffle= and shuffle_block= as (what self.shuffle keeps, the
        libringfeed RF_SHUFFLE_* number)."""
        if isinstance(shuffle, str):
            if shuffle != "block":
                raise _bad(f'shuffle={shuffle!r}: use True, False or "block"')
            mode = 2
        else:
            shuffle = bool(shuffle)
            mode = int(shuffle)
        if block is not None:
            if mode != 2:
                raise _bad(f'shuffle_block={block!r} is the block size of shuffle="block"; '
                           f"shuffle is {shuffle!r}")
            _integer("shuffle_block", block, 1, 1 << 62)
        return shuffle, mode

    @staticmethod
    def _tokens_param(transform, context, doc_ids):
        """transform="tokens"'s context= and doc_ids=: (context, doc_ids,
        their ATTACH keys or None); refused with any other transform."""
        if transform != "tokens":
            if context is not None or doc_ids:
                raise _bad(f"context= and doc_ids= are transform=\"tokens\"'s, not "
                           f"transform={transform!r}'s")
            return None, False, None
        if context is None:
            raise _bad('transform="tokens" needs context=L: each sample the L+1 tokens '
                       "from token i*L")
        context = _integer("context", context, 1, 65536)
        return context, bool(doc_ids), f"context={context}" + (" doc_ids=1" if doc_ids else "")

    @staticmethod
    def _mix_param(dataset, repeat, epoch_of, per_stream):
        """A mixture's ATTACH keys: (the dataset option, keys or "").  A
        dict of names and weights is mix=; repeat=, epoch_of= and
        per_stream= go with it, or with a name the config makes a mixture
        (the daemon refuses them for a plain dataset)."""
        keys = []
        if isinstance(dataset, dict):
            if len(dataset) < 2:
                raise _bad(f"dataset={dataset!r}: a mixture needs 2 to 16 datasets")
            for name, w in dataset.items():
                if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name):
                    raise _bad(f"dataset: mixture source {name!r} is not a catalogue name")
                if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
                    raise _bad(f"dataset: mixture weight {name}={w!r}: use a number > 0")
            keys.append("mix=" + ",".join(f"{n}:{float(w)!r}" for n, w in dataset.items()))
            dataset = ""
        if repeat is not True:
            keys.append(f"repeat={1 if repeat else 0}")
        if epoch_of is not None:
            keys.append(f"epoch_of={epoch_of}")
        if per_stream:
            keys.append("per_stream=1")
        return dataset, " ".join(keys)

    @staticmethod
    def _join_params(params, layout, drop_last, subset=None, augment=None, tokens=None):
        parts = []
        if tokens is not None:
            parts.append(tokens)
        if subset is not None:
            parts.append(f"subset={subset}")
        if augment is not None:
            parts.append(f"augment={augment}")
        if layout is not None:
            if layout not in ("chw", "hwc"):
                raise _bad(f'layout={layout!r}: use "chw" or "hwc"')
            parts.append(f"layout={layout}")
        if drop_last:
            parts.append("drop_last_batch=1")
        if isinstance(params, dict):
            parts += [f"{k}={v}" for k, v in params.items()]
        elif params:
            if not isinstance(params, str) or "\n" in params:
                raise _bad(f"params={params!r}: use a dict or one line of key=value pairs")
            parts.append(params)
        return " ".join(parts)

    def _open(self, epoch, seq):
        """Attaches anew so that the next batch is (epoch, seq), then lets
        the previous stream go: an attach that fails leaves the loader as it
        was.  Views of batches from the previous stream stay valid until
        freed."""
        client = _ringfeed.Client(start_epoch=epoch, start_seq=seq, **self._opts)
        if self._client is not None:
            self._client.close()
        self._client = client
        text = client.sources()
        self.sources = [(n, int(f)) for n, f in (p.rsplit(":", 1) for p in text.split(","))] \
            if text else None
        self._served = client.where()  # (socket, name): a folder's daemon and name
        self._info = self._client.info()
        self._pos = (self._info["next_epoch"], self._info["next_seq"])
        self._bpe = self._info["batches_per_epoch"]
        self.dtype = self._info["dtype"]  # the images' element type: "uint8", "float32", ...
        # the sample's fields (None: a daemon older than fields); batches
        # are dicts unless they are an older dataset's image and label
        self.fields = self._client.fields()
        self._dict = self.fields is not None and not _legacy(self.fields)
        if self._convert is not None:
            self._check_convert_stream()
        if self._device is not None and not self._dict:
            # the device buffer gets the batch's element type: the copy is
            # byte for byte, so its dtype and shape are what the ring's are
            shape = self._info["shape"]
            if self.dtype is None:
                raise Error(errno.EPROTO, "the stream's element type is unknown to this "
                            "ringfeed module: use one as new as libringfeed")
            self._sample_dtype = getattr(self._torch, self.dtype if self._convert is None
                                         else self._convert[0])
            self._sample_shape = ((shape[0],) if self._info["layout"] == "flat"
                                  else tuple(shape))

    def _live(self):
        if self._client is None:
            raise Error(errno.EBADF, "the loader is closed")
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"ringfeed: this loader was made by process {self._pid} and this is process "
                f"{os.getpid()}, a fork of it (a DataLoader worker or a multiprocessing "
                "child): its ring and batches belong to the process that made it; make a "
                "new ringfeed.Loader in this process instead")
        return self._client

    # ---- the DataLoader surface
    def __len__(self):
        """Batches per epoch for this rank (no side effects)."""
        return self._bpe

    def __iter__(self):
        self._live()
        target = self._target if self._target is not None else self._pos
        if target != self._pos:
            self._open(*target)  # on failure the target stays for the next loop
        self._target = None
        return _Epoch(self, target[0])

    def set_epoch(self, epoch, restart=False):
        """The next loop runs epoch `epoch`: from its first batch unless the
        loader already stands inside it (a loop left early, or after
        load_state_dict), where it goes on; restart=True starts it from its
        first batch in any case."""
        try:
            epoch = operator.index(epoch)
        except TypeError:
            raise TypeError(f"ringfeed: set_epoch({epoch!r}): an integer is required") from None
        if epoch < 0:
            raise _bad(f"set_epoch({epoch}): epochs count from 0")
        if epoch > _EPOCH_MAX:
            raise OverflowError(f"ringfeed: set_epoch({_show(epoch)}): epoch is out of range: "
                                f"use 0 to {_EPOCH_MAX}")
        at = self._target if self._target is not None else self._pos
        self._target = at if at[0] == epoch and not restart else (epoch, 0)

    def reset(self):
        """The next loop starts the current epoch again from its first
        batch: the epoch set_epoch or load_state_dict chose for the next
        loop, else the epoch of the last batch delivered (the loop left
        early, or just finished), else the first.  A notebook cell that
        re-runs ``for x, y in loader`` calls it first."""
        if self._target is not None:
            epoch = self._target[0]
        elif self.last is not None:
            epoch = self.last.epoch
        else:
            epoch = self._pos[0]
        self._target = (epoch, 0)

    def state_dict(self):
        """The exact cursor: where the next batch is, and the stream it is in."""
        epoch, seq = self._target if self._target is not None else self._pos
        return {"epoch": epoch, "seq": seq, **self._identity()}

    def load_state_dict(self, state):
        """Continues from a state_dict(): the next batch is the one after the
        last batch delivered when it was taken.  The stream must be the same."""
        mine = self._identity()
        wrong = [f"{k}={state.get(k)!r} (this loader: {v!r})"
                 for k, v in mine.items() if state.get(k) != v]
        if wrong:
            raise ValueError("ringfeed: the state_dict is of another stream: " + ", ".join(wrong))
        epoch, seq = (self._position(state, k) for k in ("epoch", "seq"))
        if not 0 <= epoch <= _EPOCH_MAX:
            raise ValueError(f"ringfeed: state_dict epoch={_show(epoch)} is out of range: "
                             f"epochs run from 0 to {_EPOCH_MAX}")
        if not 0 <= seq < self._bpe:
            raise ValueError(f"ringfeed: state_dict seq={_show(seq)} is outside an epoch of "
                             f"{self._bpe} batches (0 to {self._bpe - 1})")
        self._target = (epoch, seq)

    @staticmethod
    def _position(state, key):
        try:
            return operator.index(state[key])
        except KeyError:
            raise ValueError(f"ringfeed: the state_dict has no {key}") from None
        except TypeError:
            raise ValueError(f"ringfeed: state_dict {key}={state[key]!r}: an integer is "
                             "required") from None

    def _identity(self):
        return {"dataset": self.dataset, "batch_size": self.batch_size, "seed": self.seed,
                "rank": self.rank, "world_size": self.world_size,
                "transform": self.transform, "size": self.size, "shuffle": self.shuffle,
                "shuffle_block": self.shuffle_block,
                "drop_last": self.drop_last, "params": self._params,
                "subset": self.subset, "augment": self.augment}

    # ---- metadata: what the dataset is (CLASSES and SOURCES, from the daemon)
    @property
    def num_samples(self):
        """The samples the loader draws from: the subset's (subset=), else
        the whole dataset's (the MANIFEST's samples), whatever this rank's
        share; not DistributedSampler.num_samples, which is one rank's:
        that is about len(self) * batch_size."""
        return self._info["dataset_samples"]

    @property
    def subsets(self):
        """{name: samples} of the named index sets the dataset's pack has
        now (ringfeed-pack split, ringfeed.split), asked of the daemon (its
        SUBSETS verb) on every call; {} without any."""
        return {name: int(n) for name, n in
                (line.split(" ") for line in self._ctl(f"SUBSETS {self.dataset}")[1])
                if name != "*"}

    def _dataset_samples(self):
        """The whole dataset's samples (num_samples is the subset's)."""
        if self.subset is None:
            return self.num_samples
        last = self._ctl(f"SUBSETS {self.dataset}")[1][-1].split(" ")
        if last[0] != "*":
            raise Error(errno.EPROTO, f"SUBSETS {self.dataset}: no '* SAMPLES' line")
        return int(last[1])

    @property
    def classes(self):
        """The class names, class i at index i: the MANIFEST's class lines
        (for ringfeed-pack imagefolder, torchvision ImageFolder's
        ``classes``); [] for a dataset without classes.  Asked of the
        daemon once (its CLASSES verb)."""
        if self._classes is None:
            self._classes = self._ctl(f"CLASSES {self._served[1]}")[1]
        return list(self._classes)

    @property
    def class_to_idx(self):
        """{class name: label}, as torchvision ImageFolder's; {} without
        classes."""
        return {name: i for i, name in enumerate(self.classes)}

    def source(self, index):
        """The file dataset sample `index` was packed from, relative to the
        folder packed (ringfeed-pack imagefolder: ImageFolder's
        ``samples[index][0]`` relative to its root, skipped files
        accounted for).  A negative index counts from the end, as a list's.
        IndexError out of range; ringfeed.Error (ENOENT) naming why when the
        dataset has no source list (packed with --no-sources, before source
        lists, or by ringfeed.Writer, which records none).  Lines come from
        the daemon's SOURCES verb, _SOURCES_CHUNK at a time, and are kept."""
        try:
            i = operator.index(index)
        except TypeError:
            raise TypeError(f"ringfeed: source({index!r}): an integer is required") from None
        n = self._dataset_samples()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"ringfeed: source({index}): the dataset has {n} samples")
        start = i - i % _SOURCES_CHUNK
        if start not in self._sources:
            got = []
            while start + len(got) < min(n, start + _SOURCES_CHUNK):
                at = start + len(got)
                lines = self._ctl(f"SOURCES {self._served[1]} {at} "
                                  f"{min(n, start + _SOURCES_CHUNK) - at}")[1]
                if not lines:
                    raise Error(errno.EPROTO, f"the daemon sent no source line for {at}")
                got += lines
            self._sources[start] = got
        return _unescape_source(self._sources[start][i - start])

    def _ctl(self, request):
        if not hasattr(_ringfeed, "ctl"):
            raise Error(errno.ENOTSUP, "this build of the ringfeed extension has no control "
                        "requests (scripts/gpu-check builds the reading half only): classes, "
                        "class_to_idx and source(i) need the package built with meson")
        return _ringfeed.ctl(request, self._served[0])

    def stats(self):
        """libringfeed's counters: batches, samples, wait_seconds (inside
        next, waiting), between_seconds (the program's time between
        batches), reconnects, pinned and pin_note, held, views."""
        c = self._live()
        return dict(c.stats(), epoch=self._pos[0], seq=self._pos[1])

    def ring(self):
        """(base address, bytes) of the ring mapping the views point into."""
        return self._live().ring()

    def close(self):
        """Detaches from the daemon now; a batch still viewed keeps its
        memory (not the attachment) until freed."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()

    def __repr__(self):
        return (f"ringfeed.Loader({self.dataset!r}, batch_size={self.batch_size}, "
                f"rank={self.rank}/{self.world_size}, epoch={self._pos[0]}, "
                f"seq={self._pos[1]}/{self._bpe})")

    # ---- one batch
    def _next(self):
        c = self._live()
        if self._dict and self.context is not None and not self.doc_ids:
            # transform tokens: the windows alone, (B, context + 1)
            return next(iter(self._next_dict(c).values()))
        if self._dict:
            return self._next_dict(c)
        if self._device is not None:
            return self._next_device(c)
        images, labels, recs, epoch, seq, sseq, sub = c.next(self._timeout_ms, self._copy)
        self._advance(recs, epoch, seq, sseq, sub)
        if self._convert is not None:
            return self._converted(images), self._from(labels)
        return self._from(images), self._from(labels)

    def _next_device(self, c):
        torch = self._torch
        buf = torch.empty((self.batch_size,) + self._sample_shape, dtype=self._sample_dtype,
                          device=self._device)
        stream = torch.cuda.current_stream(self._device)
        # with dtype=/normalize=, libringfeed stages the uint8 batch on the
        # device and its kernel writes the floats into buf, on this stream
        conv = None if self._convert is None else (self._conv[0], self._conv[4], self._conv[5])
        with torch.cuda.device(self._device):  # the copy runs on this device's stream
            count, labels, recs, epoch, seq, sseq, sub = c.next_cuda(
                buf.data_ptr(), stream.cuda_stream, self._timeout_ms, conv)
        self._advance(recs, epoch, seq, sseq, sub)
        return buf[:count], self._from(labels).to(self._device, non_blocking=True)

    def _next_dict(self, c):
        # with a device, host views are taken and copied (each column on
        # the current stream, the copy complete before the views go, so the
        # slot goes back once this returns)
        cols, labels, recs, epoch, seq, sseq, sub, dropped = c.next_fields(
            self._timeout_ms, self._copy)
        out = {}
        for f, col in zip(self.fields, cols):
            if f["kind"] == "ragged":
                out[f["name"]] = RaggedBatch(self._column(col[0]), self._column(col[1]),
                                             f["name"])
            else:
                out[f["name"]] = self._column(col)
        del cols
        if self._device is not None:
            with self._torch.cuda.device(self._device):  # this device's current stream
                out = {k: v.to(self._device) for k, v in out.items()}
        self._advance(recs, epoch, seq, sseq, sub, dropped)
        return out

    def _column(self, a):
        """One column's Array as the loader's output type: a zero-copy view
        but for the element types an output lacks (see the module's help)."""
        if self.output == "buffer":
            return a
        if self.output == "numpy":
            import numpy as np
            if a.dtype == "bfloat16":  # the bit patterns, widened to float32
                bits = np.asarray(a)
                return (bits.astype(np.uint32) << 16).view(np.float32)
            return np.asarray(a)
        if a.dtype == "uint16":  # DLPack's kDLUInt 16 is refused by many torches
            import numpy as np
            bits = np.asarray(a)
            if hasattr(self._torch, "uint16"):
                try:
                    return self._torch.from_numpy(bits)  # a view
                except TypeError:
                    pass
            return self._torch.from_numpy(bits.astype(np.int32))
        return self._from(a)

    def _advance(self, recs, epoch, seq, sseq, sub, dropped=0):
        self.last = BatchInfo(recs, epoch, seq, sseq, sub, self._torch, dropped,
                              buffer=self.output == "buffer", mix=self.sources)
        self._pos = (epoch + 1, 0) if seq + 1 >= self._bpe else (epoch, seq + 1)


class _Sampler:
    """loader.sampler: what DDP scripts call on a DataLoader's
    DistributedSampler (``loader.sampler.set_epoch(e)``), here the loader's
    own set_epoch; the split itself is the daemon's."""

    __slots__ = ("_loader",)

    def __init__(self, loader):
        # a weak reference: a loader and its sampler in a cycle would keep
        # a dropped loader's ring until the cycle collector ran
        self._loader = weakref.ref(loader)

    def set_epoch(self, epoch):
        loader = self._loader()
        if loader is None:
            raise Error(errno.EBADF, "the loader of this sampler was freed")
        loader.set_epoch(epoch)


class _Epoch:
    """The iterator of one `for` loop: the rest of one epoch."""

    __slots__ = ("_loader", "_epoch")

    def __init__(self, loader, epoch):
        self._loader = loader
        self._epoch = epoch

    def __iter__(self):
        return self

    def __len__(self):
        pos = self._loader._pos
        return self._loader._bpe - pos[1] if pos[0] == self._epoch else 0

    def __next__(self):
        if self._loader._pos[0] != self._epoch:
            raise StopIteration
        return self._loader._next()
