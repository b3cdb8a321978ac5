"""ringfeed.Writer and ringfeed.pack: datasets written from Python.

    import ringfeed

    ringfeed.pack(torchvision.datasets.CIFAR10("data", download=True), "cifar-train",
                  {"image": ringfeed.Image(), "label": ringfeed.Scalar("int64")}, jobs=4)

    with ringfeed.Writer("noise", {"x": ringfeed.Tensor("float32", (16,)),
                                   "y": ringfeed.Scalar("int64")}, classes=2) as w:
        for k in range(100):
            w.write({"x": np.random.rand(16).astype(np.float32), "y": k % 2})

One implementation: the records, shards and MANIFEST are written by the C
writer ringfeed-pack uses (proto/dataset_writer.h: a hidden temporary
folder beside the destination, renamed into place complete and synced),
and each image becomes what ``ringfeed-pack imagefolder`` makes of it
(tools/imagefile.h, through the extension's ImageEncoder).  This file only
turns Python values into bytes and checks them.

The daemon serves two sample layouts today, so a Writer takes exactly these
field sets (field names are free; their order is a tuple sample's order):

* ``{name: Image(), label: Scalar("int64")}``: a jpeg-kind dataset, what
  ``ringfeed-pack imagefolder`` writes.  An image is
    - a PIL image, converted with ``.convert("RGB")`` (torchvision's loader);
    - a numpy uint8 array HxWx3, or HxW (or HxWx1) grayscale, made R=G=B;
    - a torch uint8 tensor CHW (3xHxW, what ``PILToTensor`` gives) or HWC
      (HxWx3), or HxW grayscale; one that reads both ways (3x..x3) is
      refused, as are float tensors (``ToTensor``'s) and other dtypes;
    - the bytes of an image file: a JPEG is stored as the CLI stores one
      (re-encoded losslessly with restart markers: the same pixels), a PNG,
      WebP, TIFF, BMP or PPM/PGM is decoded by ringfeed-pack's decoders
      (which follow Pillow's ``convert("RGB")``) and stored as pixels.
  Pixels are stored by ``image_mode`` as the CLI's ``--image-mode``:
  ``"raw"`` an RFPX record of the exact pixels (zstd), ``"jpeg"`` a JPEG at
  ``quality`` (lossy), ``"smart"`` raw up to ``smart_pixels`` pixels and
  JPEG above.  The MANIFEST counts the raw records (raw_images) and, when
  every image has one size, records it (image_shape, for transform="none").
* ``{name: Tensor(dtype, shape), label: Scalar("int64")}``: a tensor-kind
  dataset of one of the dtypes uint8 int8 int16 int32 float32 float64 and
  that shape, records zstd-compressed.  Values (numpy arrays, torch tensors,
  nested lists) are converted exactly: a value that would change (a float
  into an integer field, an integer out of the field's range, a float64
  that float32 cannot hold exactly) is refused, never rounded.

A sample is a dict ``{field: value}`` or a tuple/list in the fields' order
(torchvision's ``(img, label)``).  Labels are integers in ``[0, classes)``;
``classes`` is their number or the list of their names (the MANIFEST's
class lines).  Every bad value raises ringfeed.SampleError (a ValueError)
naming the sample index and the field, before anything of that sample is
written.
"""
import collections
import collections.abc
import multiprocessing
import operator
import os
import sys
import time

from . import _ringfeed

__all__ = ["Image", "Tensor", "Scalar", "Bytes", "Ragged", "SampleError", "Writer", "pack"]

# numpy's dtype names -> the MANIFEST's (proto/dataset_types.h)
_DTYPES = {"uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32",
           "float32": "f32", "float64": "f64"}
_LAYOUTS = ('ringfeedd serves two sample layouts: {image: ringfeed.Image(), label: '
            'ringfeed.Scalar("int64")} (a jpeg dataset) and {x: ringfeed.Tensor(dtype, '
            'shape), label: ringfeed.Scalar("int64")} (a tensor dataset)')
_MODES = ("raw", "jpeg", "smart")


def _np():
    import numpy
    return numpy


def _dtype_name(dtype):
    """The numpy name of dtype (a string, numpy dtype or type, torch dtype)."""
    text = str(dtype)
    if text.startswith("torch."):
        dtype = text[len("torch."):]
    try:
        return _np().dtype(dtype).name
    except TypeError:
        raise TypeError(f"ringfeed: dtype {dtype!r} is not a numpy dtype") from None


# ---- field specs ------------------------------------------------------------

class Field:
    """A field of a sample.  Subclasses describe what it holds; a Writer
    accepts the combinations ringfeedd serves (see the module's help)."""

    served = True

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self):
        return hash((type(self).__name__,) + tuple(sorted(vars(self).items())))


class Image(Field):
    """An RGB image of any size: a PIL image, an HxWx3 / HxW uint8 numpy
    array, a CHW or HWC uint8 torch tensor, or an image file's bytes."""

    def __repr__(self):
        return "Image()"


class Tensor(Field):
    """A fixed-shape array of dtype (uint8 int8 int16 int32 float32 float64)."""

    def __init__(self, dtype, shape):
        name = _dtype_name(dtype)
        if name not in _DTYPES:
            raise ValueError(f"ringfeed: Tensor dtype {name}: use one of "
                             f"{' '.join(_DTYPES)}")
        if isinstance(shape, int):
            shape = (shape,)
        try:
            shape = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise TypeError(f"ringfeed: Tensor shape {shape!r}: a tuple of ints") from None
        if not 1 <= len(shape) <= 8 or any(d < 1 for d in shape):
            raise ValueError(f"ringfeed: Tensor shape {shape}: 1 to 8 dimensions, each >= 1")
        self.dtype = name
        self.shape = shape

    def __repr__(self):
        return f"Tensor({self.dtype!r}, {self.shape})"


class Scalar(Field):
    """One number per sample; Scalar("int64") is a class label."""

    def __init__(self, dtype="int64"):
        self.dtype = _dtype_name(dtype)

    def __repr__(self):
        return f"Scalar({self.dtype!r})"


class Bytes(Field):
    """Opaque bytes of any length per sample (not served yet: a Writer
    refuses it)."""

    served = False

    def __repr__(self):
        return "Bytes()"


class Ragged(Field):
    """A 1-d array of dtype whose length varies per sample (not served yet:
    a Writer refuses it)."""

    served = False

    def __init__(self, dtype):
        self.dtype = _dtype_name(dtype)

    def __repr__(self):
        return f"Ragged({self.dtype!r})"


class SampleError(ValueError):
    """A sample's value refused: ``index`` is the sample's, ``field`` the
    field's name (None when the sample as a whole is wrong)."""

    def __init__(self, index, field, msg):
        self.index, self.field, self.msg = index, field, msg
        where = f"sample {index}" + (f", field {field!r}" if field is not None else "")
        super().__init__(f"ringfeed: {where}: {msg}")

    def __reduce__(self):
        return (SampleError, (self.index, self.field, self.msg))


# ---- layouts --------------------------------------------------------------

class _Layout:
    """Which of the served layouts fields is: kind ("jpeg" or "tensor"),
    the data field's name and spec, the label's name, the names in order."""

    def __init__(self, fields):
        if not isinstance(fields, collections.abc.Mapping):
            raise TypeError("ringfeed: fields is a dict {name: ringfeed.Image() | "
                            "ringfeed.Tensor(...) | ringfeed.Scalar(...)}; " + _LAYOUTS)
        for name, spec in fields.items():
            if not isinstance(name, str):
                raise TypeError(f"ringfeed: field name {name!r}: a str")
            if not isinstance(spec, Field):
                raise TypeError(f"ringfeed: field {name!r}: {spec!r} is not a field spec "
                                "(ringfeed.Image(), Tensor(dtype, shape), Scalar(dtype))")
            if not spec.served:
                raise ValueError(f"ringfeed: field {name!r}: {spec!r} is not served yet; "
                                 + _LAYOUTS)
        self.names = list(fields)
        data = [n for n in self.names if isinstance(fields[n], (Image, Tensor))]
        labels = [n for n in self.names if isinstance(fields[n], Scalar)]
        if len(self.names) != 2 or len(data) != 1 or len(labels) != 1:
            shown = "{" + ", ".join(f"{n}: {s!r}" for n, s in fields.items()) + "}"
            raise ValueError(f"ringfeed: fields {shown} are not a layout ringfeedd serves; "
                             + _LAYOUTS)
        self.data, self.label = data[0], labels[0]
        self.spec = fields[self.data]
        if fields[self.label].dtype != "int64":
            raise ValueError(f"ringfeed: field {self.label!r}: the label is "
                             f"Scalar(\"int64\"), not {fields[self.label]!r}; " + _LAYOUTS)
        self.kind = "jpeg" if isinstance(self.spec, Image) else "tensor"


def _classes(classes):
    """(count, names) from classes= (an int or a list of names)."""
    if classes is None:
        raise ValueError("ringfeed: classes= is required: the number of classes or the list "
                         "of their names (ringfeed.pack takes dataset.classes when the "
                         "dataset has it)")
    if isinstance(classes, str):
        raise TypeError("ringfeed: classes= is an int or a list of names, not a str")
    try:
        n = operator.index(classes)
    except TypeError:
        names = [str(c) for c in classes]
        if not names:
            raise ValueError("ringfeed: classes= is an empty list") from None
        return len(names), names
    if not 1 <= n <= 1 << 20:
        raise ValueError(f"ringfeed: classes={n}: use 1 to {1 << 20}")
    return n, [str(k) for k in range(n)]      # ringfeed-pack idx's names without --class-names


# ---- values -> bytes --------------------------------------------------------

def _is_torch(value):
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "numpy")


def _is_pil(value):
    return type(value).__module__.split(".")[0] == "PIL" and hasattr(value, "convert")


def _from_torch(value, what):
    try:
        return value.detach().cpu().numpy()
    except (TypeError, RuntimeError) as e:
        raise ValueError(f"a torch {value.dtype} {what} numpy cannot hold ({e})") from None


def _image_value(value):
    """("pixels", HxWx3 uint8 C-contiguous array) or ("encoded", bytes-like);
    ValueError or TypeError saying what is wrong."""
    np = _np()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "encoded", value
    if _is_pil(value):
        return "pixels", np.ascontiguousarray(np.asarray(value.convert("RGB")))
    if _is_torch(value):
        if str(value.dtype) != "torch.uint8":
            raise ValueError(f"a torch {value.dtype} tensor: images are uint8 (PILToTensor "
                             "gives one; ToTensor's floats in [0, 1] are not accepted)")
        a = _from_torch(value, "tensor")
        if a.ndim == 3:
            chw, hwc = a.shape[0] in (1, 3), a.shape[2] in (1, 3)
            if chw and hwc:
                raise ValueError(f"a tensor of shape {tuple(a.shape)} reads as CHW and as "
                                 "HWC: give a PIL image or a numpy HxWx3 array")
            if chw:
                a = a.transpose(1, 2, 0)
            elif not hwc:
                raise ValueError(f"a tensor of shape {tuple(a.shape)}: use 3xHxW (CHW), "
                                 "HxWx3 (HWC) or HxW")
    elif isinstance(value, np.ndarray):
        a = value
        if a.dtype != np.uint8:
            raise ValueError(f"a numpy {a.dtype} array: images are uint8")
        if a.ndim == 3 and a.shape[2] not in (1, 3):
            raise ValueError(f"a numpy array of shape {a.shape}: numpy images are HxWx3 "
                             "(or HxW); transpose a CHW array with .transpose(1, 2, 0)")
    else:
        raise TypeError(f"a {type(value).__name__}: an image is a PIL image, a numpy or "
                        "torch uint8 array, or an image file's bytes")
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)       # gray: R = G = B
    if a.ndim != 3:
        raise ValueError(f"an array of {a.ndim} dimensions: an image is HxWx3 or HxW")
    if a.shape[0] < 1 or a.shape[1] < 1 or max(a.shape[:2]) > 65535:
        raise ValueError(f"an image of {a.shape[1]}x{a.shape[0]} pixels: sides are 1 to "
                         "65535")
    return "pixels", np.ascontiguousarray(a)


def _tensor_bytes(value, dtype, shape):
    """value as the little-endian bytes of a dtype array of shape, exactly;
    ValueError or TypeError otherwise."""
    np = _np()
    if _is_torch(value):
        a = _from_torch(value, "tensor")
    elif isinstance(value, np.ndarray):
        a = value
    else:
        try:
            a = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise ValueError(f"not an array ({e})") from None
    if a.dtype.kind not in "biuf":
        raise TypeError(f"a {type(value).__name__} of {a.dtype}: a number array is needed")
    if tuple(a.shape) != shape:
        raise ValueError(f"shape {tuple(a.shape)}, the field's is {shape}")
    want = np.dtype(dtype)
    if a.dtype != want and not np.can_cast(a.dtype, want, "safe"):
        if a.dtype.kind == "f" and want.kind in "iu":
            raise ValueError(f"{a.dtype} values into a {dtype} field: a float is not "
                             "converted to an integer (cast it yourself)")
        b = a.astype(want)
        back = b.astype(a.dtype)
        same = back == a
        if a.dtype.kind == "f":
            same |= np.isnan(a) & np.isnan(back)
        if not same.all():
            at = tuple(int(i) for i in np.argwhere(~same)[0])
            raise ValueError(f"{a.dtype} value {a[at]!r} at {at} does not fit a {dtype} "
                             "field exactly")
        a = b
    return np.ascontiguousarray(a, dtype=want.newbyteorder("<")).tobytes()


def _label(value, classes):
    np = _np()
    if _is_torch(value) or isinstance(value, np.ndarray):
        a = _from_torch(value, "label") if _is_torch(value) else value
        if a.size != 1 or a.dtype.kind not in "iub":
            raise ValueError(f"a label is one integer, not a {a.dtype} array of shape "
                             f"{tuple(a.shape)}")
        value = a.reshape(()).item()
    if isinstance(value, float):
        raise TypeError(f"label {value!r}: a label is an integer, not a float")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"label {value!r}: a label is an integer") from None
    if not 0 <= v < classes:
        raise ValueError(f"label {v} is outside [0, {classes}) (classes={classes})")
    return v


CODEC_DATASET, CODEC_NONE, CODEC_ZSTD = -1, 0, 1


class _SampleEncoder:
    """A sample (dict or tuple) to the record the writer stores, checked.
    Pickles without its ImageEncoder (made again on first use)."""

    def __init__(self, layout, classes, image_mode, quality, smart_pixels, raw_codec):
        self.layout = layout
        self.classes = classes
        self.image_mode, self.quality, self.smart_pixels = image_mode, quality, smart_pixels
        self.raw_codec = CODEC_ZSTD if raw_codec == "zstd" else CODEC_NONE
        self._images = None

    def __getstate__(self):
        state = dict(vars(self))
        state["_images"] = None
        return state

    def _fields(self, index, sample):
        names = self.layout.names
        if isinstance(sample, collections.abc.Mapping):
            missing = [n for n in names if n not in sample]
            extra = [k for k in sample if k not in names]
            if missing or extra:
                raise SampleError(index, None, f"a dict with fields {list(sample)}; the writer's "
                                  f"are {names}")
            return sample
        if isinstance(sample, (tuple, list)):
            if len(sample) != len(names):
                raise SampleError(index, None, f"a {type(sample).__name__} of {len(sample)} "
                                  f"values; the fields are {names} (in that order)")
            return dict(zip(names, sample))
        raise SampleError(index, None, f"a {type(sample).__name__}: a sample is a dict "
                          f"{{field: value}} or a tuple in the fields' order {names}")

    def encode(self, index, sample):
        """(record, label, codec, raw, height, width) for the writer, or
        SampleError naming index and field."""
        values = self._fields(index, sample)
        lay = self.layout
        try:
            label = _label(values[lay.label], self.classes)
        except (TypeError, ValueError) as e:
            raise SampleError(index, lay.label, str(e)) from None
        try:
            if lay.kind == "tensor":
                rec = _tensor_bytes(values[lay.data], lay.spec.dtype, lay.spec.shape)
                return rec, label, CODEC_DATASET, False, 0, 0
            how, data = _image_value(values[lay.data])
            if self._images is None:
                self._images = _ringfeed.ImageEncoder(self.image_mode, self.quality,
                                                      self.smart_pixels)
            if how == "pixels":
                rec, raw, h, w = self._images.pixels(data, data.shape[1], data.shape[0])
            else:
                rec, raw, h, w = self._images.encoded(data)
        except (TypeError, ValueError) as e:
            raise SampleError(index, lay.data, str(e)) from None
        return rec, label, self.raw_codec if raw else CODEC_NONE, raw, h, w


# ---- the writer -----------------------------------------------------------

class Writer:
    """A dataset being written at path, sample by sample.

        with ringfeed.Writer("out", {"image": ringfeed.Image(),
                                     "label": ringfeed.Scalar("int64")},
                             classes=["cat", "dog"]) as w:
            for img, label in samples:
                w.write((img, label))

    ``fields``: a dict {name: spec}, one of the layouts ringfeedd serves
    (the module's help).  ``classes``: the number of classes or the list of
    their names (required).  ``image_mode`` ("raw", "jpeg", "smart"),
    ``quality`` (1..100), ``smart_pixels`` and ``raw_codec`` ("zstd", or
    "none": larger, faster to serve small images): how images are stored,
    as ringfeed-pack imagefolder's options of those names.  ``shard_size``:
    bytes per shard file (default 256 MiB).

    The dataset is written into a hidden temporary folder beside path
    (which must not exist) and appears at path only when ``close()``
    completes (leaving a ``with`` block normally closes).  ``abort()``, or
    an exception leaving the ``with`` block, removes it: nothing is left
    at path.  A value that ``write()`` refuses raises SampleError and
    writes nothing of that sample; the writer stays usable.
    """

    def __init__(self, path, fields, classes=None, image_mode="raw", quality=90,
                 smart_pixels=65536, shard_size=None, raw_codec="zstd"):
        layout = _Layout(fields)
        nclasses, names = _classes(classes)
        if image_mode not in _MODES:
            raise ValueError(f"ringfeed: image_mode={image_mode!r}: use \"raw\", \"jpeg\" or "
                             "\"smart\"")
        if layout.kind == "tensor" and image_mode != "raw":
            raise ValueError(f"ringfeed: image_mode={image_mode!r} is for an Image field; "
                             f"{layout.data!r} is {layout.spec!r}")
        quality = operator.index(quality)
        if not 1 <= quality <= 100:
            raise ValueError(f"ringfeed: quality={quality}: use 1 to 100")
        if raw_codec not in ("zstd", "none"):
            raise ValueError(f"ringfeed: raw_codec={raw_codec!r}: use \"zstd\" or \"none\"")
        smart_pixels = operator.index(smart_pixels)
        if smart_pixels < 1:
            raise ValueError(f"ringfeed: smart_pixels={smart_pixels}: at least 1")
        shard = 0 if shard_size is None else operator.index(shard_size)
        if shard < 0:
            raise ValueError(f"ringfeed: shard_size={shard}: a number of bytes")
        self.path = os.fspath(path)
        self.fields = dict(fields)
        self.classes = names
        self._enc = _SampleEncoder(layout, nclasses, image_mode, quality, smart_pixels,
                                   raw_codec)
        kw = {}
        if layout.kind == "tensor":
            kw = {"dtype": _DTYPES[layout.spec.dtype], "shape": layout.spec.shape}
        if not hasattr(_ringfeed, "DatasetWriter"):
            raise RuntimeError("ringfeed: this build of the extension has no dataset writer "
                               "(built with RINGFEED_EXT_NO_WRITER, as scripts/gpu-check builds "
                               "it on a machine without ringfeed-pack's libraries); write "
                               "datasets with a full build (meson, scripts/install-deps)")
        self._w = _ringfeed.DatasetWriter(self.path, layout.kind, nclasses, names,
                                          shard_bytes=shard,
                                          jpeg_restart=layout.kind == "jpeg", **kw)
        self.samples = 0         # written so far: the next sample's index
        self.raw_images = 0      # RFPX records among them
        self.stored_bytes = 0    # the records' bytes as given to the writer
        self._shape = None       # (h, w) of every image so far; False: mixed

    def write(self, sample):
        """Writes one sample (a dict or a tuple in the fields' order);
        SampleError naming its index and field when a value is refused."""
        self._add(self._enc.encode(self.samples, sample))

    def _add(self, enc):
        rec, label, codec, raw, h, w = enc
        self._w.add(rec, label, codec)
        self.samples += 1
        self.raw_images += bool(raw)
        self.stored_bytes += len(rec)
        if self._enc.layout.kind == "jpeg":
            if not w or (self._shape is not None and self._shape != (h, w)):
                self._shape = False
            elif self._shape is None:
                self._shape = (h, w)

    @property
    def closed(self):
        return self._w.closed

    def close(self):
        """Completes the dataset: MANIFEST (with raw_images and image_shape
        as ringfeed-pack imagefolder sets them), fsync, rename to path.
        Returns the final figures (records, decoded_bytes, stored_bytes,
        file_bytes, shards, raw_images, image_shape).  On failure nothing is
        left at path.  A writer with no sample is refused (aborted)."""
        if self._w.closed:
            raise ValueError("ringfeed: the writer is closed")
        if self.samples == 0:
            self._w.abort()
            raise ValueError(f"ringfeed: no sample written: nothing made at {self.path}")
        try:
            if self._enc.layout.kind == "jpeg":
                self._w.set_raw_images(self.raw_images)
                if self._shape:
                    self._w.set_image_shape(*self._shape)
        except BaseException:
            self._w.abort()
            raise
        st = self._w.finish()
        st["raw_images"] = self.raw_images
        st["image_shape"] = self._shape or None
        return st

    def abort(self):
        """Removes what was written: nothing is left at path.  A closed
        writer is left as it is."""
        self._w.abort()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            if not self._w.closed:
                self.close()
        else:
            self.abort()
        return False

    def __repr__(self):
        state = "closed" if self._w.closed else f"{self.samples} samples"
        return f"<ringfeed.Writer {self.path!r} {state}>"


# ---- pack -------------------------------------------------------------------

class _Progress:
    """One line on stderr, redrawn at most 5 times a second."""

    def __init__(self, enabled, total):
        self.enabled, self.total = enabled, total
        self.t0 = self.last = time.monotonic()
        self.drawn = False

    def update(self, n, nbytes, force=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.2:
            return
        self.last = now
        rate = n / (now - self.t0) if now > self.t0 else 0.0
        of = f"/{self.total} ({100 * n // self.total}%)" if self.total else ""
        sys.stderr.write(f"\rringfeed.pack: {n}{of} samples, {nbytes / 1e6:.1f} MB, "
                         f"{rate:.0f} samples/s ")
        sys.stderr.flush()
        self.drawn = True

    def end(self):
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


_WORKER = None   # (dataset or None, encoder) in a pack worker process


def _worker_init(dataset, encoder):
    global _WORKER
    _WORKER = (dataset, encoder)


def _read(dataset, index):
    """dataset[index], an exception noting which sample it came from."""
    try:
        return dataset[index]
    except BaseException as e:
        if hasattr(e, "add_note") and not isinstance(e, SampleError):
            e.add_note(f"ringfeed.pack: while reading sample {index}")
        raise


def _worker_range(start, stop):
    dataset, encoder = _WORKER
    return [encoder.encode(i, _read(dataset, i)) for i in range(start, stop)]


def _worker_samples(first, samples):
    _, encoder = _WORKER
    return [encoder.encode(first + k, s) for k, s in enumerate(samples)]


def _serial(dataset, encoder, mapped, total):
    if mapped:
        for i in range(total):
            yield i, encoder.encode(i, _read(dataset, i))
    else:
        for i, s in enumerate(dataset):
            yield i, encoder.encode(i, s)


def _parallel(dataset, encoder, mapped, total, jobs):
    """(index, encoded) in index order, encoded on jobs worker processes
    (forked on Linux, so the dataset is not pickled; spawned elsewhere),
    at most 4 * jobs chunks in flight."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    chunk = max(1, min(64, total // (jobs * 8))) if mapped else 16
    ex = ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_worker_init,
                             initargs=(dataset if mapped else None, encoder))

    def tasks():
        if mapped:
            for start in range(0, total, chunk):
                yield _worker_range, start, min(total, start + chunk)
        else:
            it, first = iter(dataset), 0
            while True:
                part = [s for _, s in zip(range(chunk), it)]
                if not part:
                    return
                yield _worker_samples, first, part
                first += len(part)

    pending = collections.deque()
    todo = tasks()
    index = 0
    try:
        for fn, a, b in todo:
            pending.append(ex.submit(fn, a, b))
            if len(pending) >= 4 * jobs:
                break
        while pending:
            try:
                done = pending.popleft().result()
            except BrokenProcessPool as e:
                raise RuntimeError(f"ringfeed.pack: an encoding worker died ({e}) near "
                                   f"sample {index}: nothing written") from None
            for fn, a, b in todo:
                pending.append(ex.submit(fn, a, b))
                break
            for enc in done:
                yield index, enc
                index += 1
    finally:
        for f in pending:
            f.cancel()
        # The chunks running finish (each at most 64 samples) before the
        # workers go: one killed while it sends its result would leave half
        # a message in the pool's pipe, and the thread reading it, and so
        # the interpreter's exit, blocked for good (a CI run hung so).
        ex.shutdown(wait=True, cancel_futures=True)


def pack(dataset, path, fields, jobs=1, progress=None, **writer_opts):
    """Writes every sample of dataset to a new dataset at path; returns
    Writer.close()'s figures.

    ``dataset``: map-style (``len`` and ``dataset[i]``, as torchvision's)
    or any iterable of samples (dicts, or tuples in the fields' order).
    ``fields`` and ``writer_opts`` (classes, image_mode, quality,
    smart_pixels, shard_size) are Writer's; ``classes`` defaults to
    ``dataset.classes`` (torchvision's datasets have it).

    ``jobs=N`` reads and encodes samples on N worker processes (forked on
    Linux, so the dataset is not pickled) while this process writes them
    strictly in order: the dataset is byte for byte the same for every N.
    ``progress``: a line on stderr (default: when stderr is a terminal).

    Anything that stops the pack (a refused value: SampleError naming the
    sample and field; an exception from the dataset; KeyboardInterrupt; a
    worker that dies) leaves nothing at path.
    """
    jobs = operator.index(jobs)
    if jobs < 1:
        raise ValueError(f"ringfeed: jobs={jobs}: at least 1")
    if writer_opts.get("classes") is None:
        classes = getattr(dataset, "classes", None)
        if classes is None:
            raise ValueError("ringfeed.pack: classes= is required (the dataset has no "
                             ".classes): the number of classes or their names")
        writer_opts["classes"] = classes
    mapped = hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__") and \
        not isinstance(dataset, collections.abc.Mapping)
    total = len(dataset) if hasattr(dataset, "__len__") else None
    if progress is None:
        progress = sys.stderr is not None and sys.stderr.isatty()
    bar = _Progress(bool(progress), total)
    with Writer(path, fields, **writer_opts) as w:
        if jobs == 1 or (mapped and total < 2):
            stream = _serial(dataset, w._enc, mapped, total)
        else:
            stream = _parallel(dataset, w._enc, mapped, total, jobs)
        try:
            for _, enc in stream:
                w._add(enc)
                bar.update(w.samples, w.stored_bytes)
        finally:
            stream.close()
            bar.update(w.samples, w.stored_bytes, force=True)
            bar.end()
        return w.close()
