"""ringfeed.Writer and ringfeed.pack: datasets written from Python.

    import ringfeed

    ringfeed.pack(torchvision.datasets.CIFAR10("data", download=True), "cifar-train",
                  {"image": ringfeed.Image(), "label": ringfeed.Scalar("int64")}, jobs=4)

    with ringfeed.Writer("det", {"image": ringfeed.Image(max_side=512),
                                 "mask": ringfeed.Image(mask="image"),
                                 "boxes": ringfeed.Ragged("float32", (4,), boxes="image"),
                                 "caption": ringfeed.Bytes(),
                                 "label": ringfeed.Scalar("int64")}) as w:
        for img, mask, boxes, text, label in samples:
            w.write((img, mask, boxes, text, label))

One implementation: the records, shards and MANIFEST are written by the C
writer ringfeed-pack uses (proto/dataset_writer.h: a hidden temporary
folder beside the destination, renamed into place complete and synced),
the field lines are parsed and checked by proto/schema.c, a record is
made of its fields' parts in C (DatasetWriter.record) and split and checked
by the writer, and each RGB image becomes what ``ringfeed-pack
imagefolder`` makes of it (tools/imagefile.h, through the extension's
ImageEncoder).  This file only turns Python values into bytes and checks
them.

LAYOUTS.  Two field sets write the dataset kinds every ringfeedd and client
reads, byte for byte as before fields existed (field names are free):

* ``{name: Image(), label: Scalar("int64")}``: a jpeg-kind dataset, what
  ``ringfeed-pack imagefolder`` writes (the label is the shard entry's);
* ``{name: Tensor(dtype, shape), label: Scalar("int64")}`` with dtype one of
  uint8 int8 int16 int32 float32 float64: a tensor-kind dataset, records
  zstd-compressed.

Both need ``classes``.  Any other field set (up to 16 fields, names of
A-Z a-z 0-9 _ not starting with a digit) writes a kind-fields dataset
(proto/schema.h): the MANIFEST has one "field" line per field and a record
is each field's part in order, a 4-byte little-endian length then its
bytes.  Its records are zstd-compressed (stored as they are when zstd does
not shrink them) unless ``raw_codec="none"``; ``classes`` is optional (the
MANIFEST's class names; a Scalar("int64") field named "label" is then
checked against it).  An image field whose images all have one size (as
stored) gets shape=HxW in the MANIFEST (transform none needs it).

FIELDS.
* ``Image(mode, quality, smart_pixels, max_side, raw_codec, mask, channels,
  dtype)``: one image per sample, any size.  An RGB image (channels=3) is
    - a PIL image, converted with ``.convert("RGB")`` (torchvision's loader);
    - a numpy uint8 array HxWx3, or HxW (or HxWx1) grayscale, made R=G=B;
    - a torch uint8 tensor CHW (3xHxW, what ``PILToTensor`` gives) or HWC
      (HxWx3), or HxW grayscale; one that reads both ways (3x..x3) is
      refused, as are float tensors (``ToTensor``'s) and other dtypes;
    - the bytes of an image file: a JPEG is stored as the CLI stores one
      (re-encoded losslessly with restart markers: the same pixels), a PNG,
      WebP, TIFF, BMP or PPM/PGM is decoded by ringfeed-pack's decoders
      (which follow Pillow's ``convert("RGB")``) and stored as pixels.
  Pixels are stored by ``mode`` as the CLI's ``--image-mode``: ``"raw"`` an
  RFPX record of the exact pixels, ``"jpeg"`` a JPEG at ``quality``
  (lossy), ``"smart"`` raw up to ``smart_pixels`` pixels and JPEG above;
  each defaults to the Writer's argument of that name (image_mode for
  mode).  ``max_side=N`` (16..65535) is the CLI's ``--max-side``: an image
  whose longer side exceeds N is shrunk to a longer side of N (the other
  rounded half up) by an exact box (area) average, as Pillow's
  ``resize(size, Image.BOX)`` does, and stored by ``mode`` (a JPEG file's
  bytes are decoded, shrunk and re-encoded at ``quality``); a jpeg layout
  records it in the MANIFEST (max_side, max_side_quality).
  ``channels=1`` is one plane of ``dtype`` uint8 or uint16 (a numpy or
  torch HxW / HxWx1 / 1xHxW integer array, a PIL image of mode L, P, I;16
  or I, or a PNG's bytes read by Pillow), always stored as a one-channel
  RFPX record of the exact values (mode, quality and max_side are for RGB
  images).  ``mask="F"`` makes it the mask of the earlier image field F
  (channels=1 by default): per sample it must be F's size as given, and
  when F was shrunk by max_side it is resized to F's stored size by
  Pillow's ``resize(size, Image.NEAREST)`` itself (mode L for uint8, I for
  uint16: the rule the workers follow for masks, daemon/worker/targets.h),
  so class indices stay class indices.
* ``Tensor(dtype, shape)``: a fixed shape of uint8 int8 int16 int32 int64
  float16 bfloat16 float32 float64 (or uint16).  Values (numpy arrays,
  torch tensors incl. torch.bfloat16, nested lists) are converted exactly:
  a value that would change (a float into an integer field, an integer out
  of the field's range, a float64 that float32, float16 or bfloat16 cannot
  hold exactly) is refused, never rounded.
* ``Ragged(dtype, shape=(), max=None, cap=None, boxes=None)``: rows of a
  fixed tail ``shape`` whose number varies per sample (0 allowed): an array
  (rows, *shape) converted exactly as a Tensor's.  ``max``: rows per sample
  at most (a sample over it is refused; the MANIFEST records the most rows
  written); ``cap``: rows one batch holds at most (a sample over it is
  refused).  ``boxes="F"``: boxes x0, y0, x1, y1 in the pixels of image
  field F as given (float32, shape (4,); any float or integer values,
  rounded to float32; not finite or x1 < x0 or y1 < y0 refused), scaled
  with F when max_side shrinks it.  ``rows="B"``: one row per box of the
  earlier boxes field B (its class, score or id), so a sample has as many
  rows as B (else refused) and a crop that drops a box drops its row.
* ``Bytes(max=None, cap=None)``: bytes, bytearray, memoryview or str
  (stored as UTF-8); max and cap count bytes as Ragged's count rows.
* ``Scalar(dtype="int64")``: one int64 (an integer; bool refused) or
  float64 (a float or an integer) per sample.

A sample is a dict ``{field: value}`` or a tuple/list in the fields' order
(torchvision's ``(img, label)``).  Every bad value raises
ringfeed.SampleError (a ValueError) naming the sample index and the field,
before anything of that sample is written.
"""
import collections
import collections.abc
import io
import math
import multiprocessing
import operator
import os
import re
import struct
import sys
import time

from . import _ringfeed

__all__ = ["Image", "Tensor", "Scalar", "Bytes", "Ragged", "SampleError", "Writer", "pack",
           "split"]

# numpy's dtype names -> the MANIFEST's (proto/dataset_types.h); bfloat16 is
# no numpy dtype: its values travel as uint16 bit patterns
_DTYPES = {"uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
           "uint16": "u16", "float16": "f16", "bfloat16": "bf16", "float32": "f32",
           "float64": "f64"}
_SHORT = {v: k for k, v in _DTYPES.items()}
_SIZES = {"uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2,
          "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_LEGACY_TENSOR = ("uint8", "int8", "int16", "int32", "float32", "float64")
_LAYOUTS = ('ringfeedd serves two sample layouts: {image: ringfeed.Image(), label: '
            'ringfeed.Scalar("int64")} (a jpeg dataset) and {x: ringfeed.Tensor(dtype, '
            'shape), label: ringfeed.Scalar("int64")} (a tensor dataset)')
_MODES = ("raw", "jpeg", "smart")
_RECORD_MAX = 1 << 30                    # DATASET_RECORD_MAX
_MAX_FIELDS = 16                         # SCHEMA_MAX_FIELDS
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,30}\Z")


def _np():
    import numpy
    return numpy


def _dtype_name(dtype):
    """The numpy name of dtype (a string, numpy dtype or type, torch dtype;
    "bfloat16" / "bf16" / torch.bfloat16 as "bfloat16"; the MANIFEST's short
    names too)."""
    text = str(dtype)
    if text.startswith("torch."):
        dtype = text = text[len("torch."):]
    if isinstance(dtype, str) and dtype in _SHORT:
        return _SHORT[dtype]
    if text == "bfloat16":
        return "bfloat16"
    try:
        return _np().dtype(dtype).name
    except TypeError:
        raise TypeError(f"ringfeed: dtype {dtype!r} is not a numpy dtype") from None


def _count(value, what, low=1, high=None):
    """An int option: None or low..high."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"ringfeed: {what}={value!r}: an integer")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"ringfeed: {what}={value!r}: an integer") from None
    if v < low or (high is not None and v > high):
        raise ValueError(f"ringfeed: {what}={v}: use {low} to {high}" if high is not None
                         else f"ringfeed: {what}={v}: at least {low}")
    return v


def _shape(shape, what, allow_empty=False):
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"ringfeed: {what} shape {shape!r}: a tuple of ints") from None
    if not (allow_empty or shape) or len(shape) > 8 or any(d < 1 for d in shape):
        raise ValueError(f"ringfeed: {what} shape {shape}: "
                         f"{'0' if allow_empty else '1'} to 8 dimensions, each >= 1")
    return shape


# ---- field specs ------------------------------------------------------------

class Field:
    """A field of a sample.  Subclasses describe what it holds (see the
    module's help)."""

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self):
        return hash((type(self).__name__,) + tuple(sorted(vars(self).items())))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v is not None)
        return f"{type(self).__name__}({args})"


class Image(Field):
    """An image per sample: RGB (channels=3) from a PIL image, an HxWx3 /
    HxW uint8 numpy array, a CHW or HWC uint8 torch tensor, or an image
    file's bytes; or one plane (channels=1, uint8 or uint16), e.g. a mask
    of another image field (mask="image")."""

    def __init__(self, mode=None, quality=None, smart_pixels=None, max_side=None,
                 raw_codec=None, mask=None, channels=None, dtype="uint8"):
        if mode is not None and mode not in _MODES:
            raise ValueError(f"ringfeed: Image mode={mode!r}: use \"raw\", \"jpeg\" or \"smart\"")
        self.mode = mode
        self.quality = _count(quality, "quality", 1, 100)
        self.smart_pixels = _count(smart_pixels, "smart_pixels")
        self.max_side = _count(max_side, "max_side", 16, 65535)
        if raw_codec not in (None, "zstd", "none"):
            raise ValueError(f"ringfeed: raw_codec={raw_codec!r}: use \"zstd\" or \"none\"")
        self.raw_codec = raw_codec
        if mask is not None and not isinstance(mask, str):
            raise TypeError(f"ringfeed: Image mask={mask!r}: the name of an image field")
        self.mask = mask
        if channels is None:
            channels = 1 if mask is not None else 3
        if channels not in (1, 3):
            raise ValueError(f"ringfeed: Image channels={channels!r}: 1 or 3")
        self.channels = channels
        self.dtype = _dtype_name(dtype)
        if self.dtype not in ("uint8", "uint16") or (self.dtype == "uint16" and channels != 1):
            raise ValueError(f"ringfeed: Image dtype {self.dtype}: uint8, or uint16 with "
                             "channels=1")
        if mask is not None and channels != 1:
            raise ValueError(f"ringfeed: Image(mask={mask!r}) has channels=1")
        if channels == 1 and ((mode not in (None, "raw")) or max_side is not None):
            raise ValueError("ringfeed: Image(channels=1) is stored as its exact values: mode, "
                             "quality and max_side are for RGB images (a mask follows its "
                             "image's max_side, nearest neighbour)")

    @property
    def legacy(self):
        return self.channels == 3


class Tensor(Field):
    """A fixed-shape array of dtype (uint8 int8 int16 int32 int64 float16
    bfloat16 float32 float64, or uint16)."""

    def __init__(self, dtype, shape):
        name = _dtype_name(dtype)
        if name not in _DTYPES:
            raise ValueError(f"ringfeed: Tensor dtype {name}: use one of "
                             f"{' '.join(_DTYPES)}")
        self.dtype = name
        self.shape = _shape(shape, "Tensor")

    def __repr__(self):
        return f"Tensor({self.dtype!r}, {self.shape})"


class Scalar(Field):
    """One number per sample: Scalar("int64") (a class label) or
    Scalar("float64")."""

    def __init__(self, dtype="int64"):
        name = _dtype_name(dtype)
        if name not in ("int64", "float64"):
            raise ValueError(f"ringfeed: Scalar dtype {name}: use int64 or float64")
        self.dtype = name

    def __repr__(self):
        return f"Scalar({self.dtype!r})"


class Ragged(Field):
    """Rows of dtype and tail shape whose number varies per sample (0
    allowed); max= rows per sample, cap= rows per batch, boxes="F": xyxy
    boxes of image field F (float32, shape (4,)); rows="B": one row per
    box of boxes field B, dropped with its box by a crop."""

    def __init__(self, dtype, shape=(), max=None, cap=None, boxes=None, rows=None):
        name = _dtype_name(dtype)
        if name not in _DTYPES:
            raise ValueError(f"ringfeed: Ragged dtype {name}: use one of {' '.join(_DTYPES)}")
        self.dtype = name
        self.shape = _shape(shape, "Ragged", allow_empty=True)
        self.max = _count(max, "max", 1, _RECORD_MAX)
        self.cap = _count(cap, "cap", 1, _RECORD_MAX)
        if self.max and self.cap and self.cap < self.max:
            raise ValueError(f"ringfeed: Ragged cap={self.cap} is less than max={self.max}: "
                             "one sample would not fit a batch")
        if boxes is not None and not isinstance(boxes, str):
            raise TypeError(f"ringfeed: Ragged boxes={boxes!r}: the name of an image field")
        if boxes is not None and (name != "float32" or self.shape != (4,)):
            raise ValueError(f"ringfeed: Ragged(boxes={boxes!r}) is Ragged(\"float32\", (4,), "
                             f"boxes=...), not dtype {name} shape {self.shape}")
        self.boxes = boxes
        if rows is not None and not isinstance(rows, str):
            raise TypeError(f"ringfeed: Ragged rows={rows!r}: the name of a boxes field")
        if rows is not None and boxes is not None:
            raise ValueError("ringfeed: a Ragged field is boxes= or rows=, not both")
        self.rows = rows

    @property
    def row_bytes(self):
        return _SIZES[self.dtype] * math.prod(self.shape)


class Bytes(Field):
    """Bytes (or a str, stored as UTF-8) of any length per sample; max= and
    cap= bound the bytes of a sample and of a batch."""

    def __init__(self, max=None, cap=None):
        self.max = _count(max, "max", 1, _RECORD_MAX)
        self.cap = _count(cap, "cap", 1, _RECORD_MAX)
        if self.max and self.cap and self.cap < self.max:
            raise ValueError(f"ringfeed: Bytes cap={self.cap} is less than max={self.max}: "
                             "one sample would not fit a batch")

    row_bytes = 1


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

def _check_specs(fields):
    if not isinstance(fields, collections.abc.Mapping):
        raise TypeError("ringfeed: fields is a dict {name: ringfeed.Image() | Tensor(...) | "
                        "Ragged(...) | Bytes() | Scalar(...)}")
    if not fields:
        raise ValueError("ringfeed: fields is empty")
    for name, spec in fields.items():
        if not isinstance(name, str):
            raise TypeError(f"ringfeed: field name {name!r}: a str")
        if not isinstance(spec, Field):
            raise TypeError(f"ringfeed: field {name!r}: {spec!r} is not a field spec "
                            "(ringfeed.Image(), Tensor(dtype, shape), Ragged(dtype), Bytes(), "
                            "Scalar(dtype))")


class _Layout:
    """A field set: kind "jpeg" or "tensor" (the data field's name and spec,
    the label's name) when it is one of the two older layouts, else kind
    "fields" (the field lines for the MANIFEST); names in order."""

    def __init__(self, fields):
        _check_specs(fields)
        self.names = list(fields)
        self.specs = dict(fields)
        data = [n for n in self.names if (isinstance(fields[n], Image) and fields[n].legacy)
                or (isinstance(fields[n], Tensor) and fields[n].dtype in _LEGACY_TENSOR)]
        labels = [n for n in self.names if fields[n] == Scalar("int64")]
        if len(self.names) == 2 and len(data) == 1 and len(labels) == 1:
            self.data, self.label = data[0], labels[0]
            self.spec = fields[self.data]
            self.kind = "jpeg" if isinstance(self.spec, Image) else "tensor"
            self.lines = None
            return
        self.kind, self.data, self.label, self.spec = "fields", None, None, None
        if len(self.names) > _MAX_FIELDS:
            raise ValueError(f"ringfeed: {len(self.names)} fields: at most {_MAX_FIELDS}")
        for n in self.names:
            if not _NAME.match(n):
                raise ValueError(f"ringfeed: field name {n!r}: 1 to 31 of A-Z a-z 0-9 _, not "
                                 "starting with a digit")
        self.lines = [self._line(n, fields[n]) for n in self.names]
        self.masks = {n: s.mask for n, s in fields.items()
                      if isinstance(s, Image) and s.mask is not None}
        self.boxes = {n: s.boxes for n, s in fields.items()
                      if isinstance(s, Ragged) and s.boxes is not None}

    @staticmethod
    def _line(name, spec):
        """The field's MANIFEST line after "field" (proto/schema.h)."""
        if isinstance(spec, Image):
            words = [name, "image"]
            if spec.channels != 3:
                words.append(f"channels={spec.channels}")
            if spec.dtype != "uint8":
                words.append(f"dtype={_DTYPES[spec.dtype]}")
            if spec.mask is not None:
                words.append(f"mask={spec.mask}")
            return " ".join(words)
        if isinstance(spec, Tensor):
            return f"{name} tensor dtype={_DTYPES[spec.dtype]} shape=" + \
                "x".join(map(str, spec.shape))
        if isinstance(spec, Scalar):
            return f"{name} scalar" + (" dtype=f64" if spec.dtype == "float64" else "")
        # ragged, bytes: max= bounds a record while writing (the MANIFEST
        # gets the most rows written); without one, as many as a record holds
        most = spec.max or spec.cap or (_RECORD_MAX // spec.row_bytes)
        if isinstance(spec, Bytes):
            words = [name, "bytes"]
        else:
            words = [name, "ragged", f"dtype={_DTYPES[spec.dtype]}"]
            if spec.shape:
                words.append("shape=" + "x".join(map(str, spec.shape)))
        words.append(f"max={most}")
        if spec.cap:
            words.append(f"cap={spec.cap}")
        if isinstance(spec, Ragged) and spec.boxes is not None:
            words.append(f"boxes={spec.boxes}")
        if isinstance(spec, Ragged) and spec.rows is not None:
            words.append(f"rows={spec.rows}")
        return " ".join(words)


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
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()              # exact: bfloat16 is a float32 prefix
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


def _encoded_size(data):
    """(height, width) of an image file's bytes, read by Pillow from its
    header (what a mask or boxes given with it are measured against)."""
    from PIL import Image as PILImage
    try:
        with PILImage.open(io.BytesIO(bytes(data))) as im:
            return im.size[1], im.size[0]
    except Exception as e:        # Pillow raises many kinds for a bad file
        raise ValueError(f"an image file Pillow cannot read ({e})") from None


def _exact(a, want, what="value", shown=None):
    """The number array a as numpy dtype want (not bfloat16), exactly:
    ValueError naming the first value that would change (and the field's
    dtype as shown, default want)."""
    np = _np()
    want = np.dtype(want)
    shown = shown or want
    if a.dtype.kind not in "biuf":
        raise TypeError(f"a {a.dtype} array: numbers are needed")
    if a.dtype == want or np.can_cast(a.dtype, want, "safe"):
        return a.astype(want, copy=False)
    if a.dtype.kind == "f" and want.kind in "iub":
        raise ValueError(f"{a.dtype} values into a {shown} field: a float is not "
                         "converted to an integer (cast it yourself)")
    with np.errstate(all="ignore"):
        b = a.astype(want)
        back = b.astype(a.dtype)
    same = back == a
    if a.dtype.kind == "f":
        same |= np.isnan(a) & np.isnan(back)
    if not same.all():
        at = tuple(int(i) for i in np.argwhere(~same)[0])
        raise ValueError(f"{a.dtype} {what} {a[at]!r} at {at} does not fit a {shown} "
                         "field exactly")
    return b


def _array(value, dtype, what="value"):
    """value (numpy, torch, nested lists) as a C-contiguous little-endian
    array of dtype, exactly; bfloat16 as its uint16 bit patterns."""
    np = _np()
    if _is_torch(value):
        if dtype == "bfloat16" and str(value.dtype) == "torch.bfloat16":
            import torch
            return np.ascontiguousarray(value.detach().cpu().contiguous().view(torch.int16)
                                        .numpy().view(np.uint16), dtype="<u2")
        a = _from_torch(value, "tensor")
    elif isinstance(value, np.ndarray):
        a = value
    else:
        try:
            a = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise ValueError(f"not an array ({e})") from None
        if a.dtype == object:
            raise ValueError("not an array (rows of different lengths?)")
        if a.size == 0:
            a = a.astype(np.uint8)             # [] holds no value to convert
    if a.dtype.kind not in "biuf":
        raise TypeError(f"a {type(value).__name__} of {a.dtype}: a number array is needed")
    if dtype == "bfloat16":
        f = _exact(a, "float32", what, "bfloat16")
        bits = np.ascontiguousarray(f).view(np.uint32)
        lost = ((bits & 0xFFFF) != 0) & ~np.isnan(f)
        if lost.any():
            at = tuple(int(i) for i in np.argwhere(lost)[0])
            raise ValueError(f"{a.dtype} {what} {a[at]!r} at {at} does not fit a bfloat16 "
                             "field exactly")
        out = (bits >> 16).astype(np.uint16)
        out[np.isnan(f)] = 0x7FC0
        return np.ascontiguousarray(out, dtype="<u2")
    b = _exact(a, dtype, what)
    return np.ascontiguousarray(b, dtype=np.dtype(dtype).newbyteorder("<"))


def _tensor_bytes(value, dtype, shape):
    """value as the little-endian bytes of a dtype array of shape, exactly;
    ValueError or TypeError otherwise."""
    a = _array(value, dtype)
    if tuple(a.shape) != shape:
        raise ValueError(f"shape {tuple(a.shape)}, the field's is {shape}")
    return a.tobytes()


def _plane(value, dtype):
    """One plane (an HxW uint8 or uint16 array) from a numpy or torch array
    (HxW, HxWx1, 1xHxW), a PIL image (L, P, 1, I;16, I) or an image file's
    bytes (read by Pillow)."""
    np = _np()
    if isinstance(value, (bytes, bytearray, memoryview)):
        from PIL import Image as PILImage
        try:
            value = PILImage.open(io.BytesIO(bytes(value)))
            value.load()
        except Exception as e:
            raise ValueError(f"an image file Pillow cannot read ({e})") from None
    if _is_pil(value):
        if value.mode not in ("L", "P", "1", "I;16", "I"):
            raise ValueError(f"a PIL image of mode {value.mode}: one plane is mode L, P, 1, "
                             "I;16 or I")
        a = np.asarray(value)
        if a.dtype == bool:
            a = a.astype(np.uint8)
    elif _is_torch(value) or isinstance(value, np.ndarray):
        a = _from_torch(value, "tensor") if _is_torch(value) else value
        if a.dtype == bool:
            a = a.astype(np.uint8)
    else:
        raise TypeError(f"a {type(value).__name__}: one plane is a numpy or torch integer "
                        "array HxW, a PIL image of mode L/P/I;16 or an image file's bytes")
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    elif a.ndim == 3 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 2:
        raise ValueError(f"an array of shape {tuple(a.shape)}: one plane is HxW (or HxWx1, "
                         "1xHxW)")
    if a.shape[0] < 1 or a.shape[1] < 1 or max(a.shape) > 65535:
        raise ValueError(f"a plane of {a.shape[1]}x{a.shape[0]} values: sides are 1 to 65535")
    if a.dtype.kind == "f":
        raise ValueError(f"{a.dtype} values: a plane holds integers")
    return np.ascontiguousarray(_exact(a, dtype), dtype=np.dtype(dtype).newbyteorder("<"))


def _nearest(a, h, w):
    """a (HxW uint8 or uint16) resized to h x w by Pillow's NEAREST, as
    the workers resample a mask (daemon/worker/targets.h): mode L for
    uint8, mode I for uint16 (Pillow's I;16 takes another rule)."""
    np = _np()
    from PIL import Image as PILImage
    if a.dtype == np.uint8:
        im = PILImage.fromarray(a, "L")
    else:
        im = PILImage.fromarray(a.astype(np.int32), "I")
    out = np.asarray(im.resize((w, h), PILImage.NEAREST))
    return np.ascontiguousarray(out.astype(a.dtype.newbyteorder("<")))


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
    if classes is not None and not 0 <= v < classes:
        raise ValueError(f"label {v} is outside [0, {classes}) (classes={classes})")
    return v


def _scalar(value, dtype):
    """value as a little-endian int64 or float64's 8 bytes."""
    np = _np()
    if _is_torch(value) or isinstance(value, np.ndarray):
        a = _from_torch(value, "scalar") if _is_torch(value) else value
        if a.size != 1 or a.dtype.kind not in "iubf":
            raise ValueError(f"a scalar is one number, not a {a.dtype} array of shape "
                             f"{tuple(a.shape)}")
        value = a.reshape(()).item()
    if dtype == "int64":
        if isinstance(value, (float, bool)):
            raise TypeError(f"{value!r}: an int64 scalar is an integer, not a "
                            f"{type(value).__name__}")
        try:
            v = operator.index(value)
        except TypeError:
            raise TypeError(f"{value!r}: an int64 scalar is an integer") from None
        if not -(1 << 63) <= v < 1 << 63:
            raise ValueError(f"{v} is outside int64")
        return struct.pack("<q", v)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r}: a float64 scalar is a number")
    return struct.pack("<d", float(value))


def _rows_bytes(value, spec):
    """A Ragged or Bytes field's value as (bytes, rows)."""
    if isinstance(spec, Bytes):
        if isinstance(value, str):
            value = value.encode("utf-8")
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"a {type(value).__name__}: a Bytes field takes bytes or a str")
        data = bytes(value)
        return data, len(data)
    np = _np()
    if spec.boxes is not None:
        a = _from_torch(value, "tensor") if _is_torch(value) else np.asarray(value)
        if a.dtype.kind not in "biuf" and a.size:
            raise TypeError(f"a {a.dtype} array: boxes are numbers")
        a = a.astype(np.float64) if a.size else a.astype(np.float32)
    else:
        a = _array(value, spec.dtype)
    if a.size == 0 and a.ndim <= 1:
        a = a.reshape((0,) + spec.shape)
    if tuple(a.shape[1:]) != spec.shape or a.ndim != 1 + len(spec.shape):
        raise ValueError(f"shape {tuple(a.shape)}: rows of the field's shape {spec.shape} "
                         f"are (rows,{''.join(' ' + str(d) + ',' for d in spec.shape)})")
    return a, int(a.shape[0])


def _check_rows(rows, spec):
    what = "bytes" if isinstance(spec, Bytes) else "rows"
    if spec.max is not None and rows > spec.max:
        raise ValueError(f"{rows} {what}, more than the field's max={spec.max}")
    if spec.cap is not None and rows > spec.cap:
        raise ValueError(f"{rows} {what}, more than the field's cap={spec.cap} (what one "
                         "batch holds)")
    if rows * spec.row_bytes > _RECORD_MAX:
        raise ValueError(f"{rows} {what} of {spec.row_bytes} bytes: over a record's "
                         f"{_RECORD_MAX} bytes")


def _boxes(a, scale):
    """Boxes (n x 4 float64) checked, scaled by scale (sy, sx) and made
    float32 bytes."""
    np = _np()
    if a.shape[0]:
        if not np.isfinite(a).all():
            at = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
            raise ValueError(f"box {at[0]} is {a[at[0]].tolist()}: not finite")
        bad = (a[:, 2] < a[:, 0]) | (a[:, 3] < a[:, 1])
        if bad.any():
            k = int(np.argwhere(bad)[0][0])
            raise ValueError(f"box {k} is {a[k].tolist()}: x1 < x0 or y1 < y0 (boxes are "
                             "x0, y0, x1, y1)")
        sy, sx = scale
        if sy != 1 or sx != 1:
            a = a * np.array([sx, sy, sx, sy])
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(a, dtype="<f4")
    if not np.isfinite(out).all():
        k = int(np.argwhere(~np.isfinite(out))[0][0])
        raise ValueError(f"box {k} is {a[k].tolist()}: beyond float32")
    return out.tobytes()


CODEC_DATASET, CODEC_NONE, CODEC_ZSTD = -1, 0, 1


class _SampleEncoder:
    """A sample (dict or tuple) to the record the writer stores, checked.
    Pickles without its ImageEncoders (made again on first use)."""

    def __init__(self, layout, classes, image_mode, quality, smart_pixels, raw_codec):
        self.layout = layout
        self.classes = classes
        self.image_mode, self.quality, self.smart_pixels = image_mode, quality, smart_pixels
        self.raw_codec = CODEC_ZSTD if raw_codec == "zstd" else CODEC_NONE
        self._images = {}
        # image fields a mask or boxes refer to: their size as given matters
        self._measured = set()
        if layout.kind == "fields":
            self._measured = set(layout.masks.values()) | set(layout.boxes.values())

    def __getstate__(self):
        state = dict(vars(self))
        state["_images"] = {}
        return state

    def image_opts(self, spec):
        """(mode, quality, smart_pixels, max_side) of an Image field: its
        own, else the Writer's."""
        return (spec.mode or self.image_mode, spec.quality or self.quality,
                spec.smart_pixels or self.smart_pixels, spec.max_side or 0)

    def _encoder(self, name, spec):
        enc = self._images.get(name)
        if enc is None:
            enc = self._images[name] = _ringfeed.ImageEncoder(*self.image_opts(spec))
        return enc

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

    def _rgb(self, name, spec, value):
        """An RGB image field's record and its sizes: (record, raw, (h0, w0)
        as given, (h, w) as stored)."""
        how, data = _image_value(value)
        enc = self._encoder(name, spec)
        if how == "pixels":
            rec, raw, h, w = enc.pixels(data, data.shape[1], data.shape[0])
            return rec, raw, data.shape[:2], (h, w)
        rec, raw, h, w = enc.encoded(data)
        given = _encoded_size(data) if name in self._measured else (h, w)
        return rec, raw, given, (h, w)

    def encode(self, index, sample):
        """(record, label, codec, raw, height, width, shapes) for the
        writer (shapes: kind fields' stored (h, w) of each image field, in
        order; else None), or SampleError naming index and field."""
        values = self._fields(index, sample)
        lay = self.layout
        if lay.kind == "fields":
            return self._encode_fields(index, values)
        try:
            label = _label(values[lay.label], self.classes)
        except (TypeError, ValueError) as e:
            raise SampleError(index, lay.label, str(e)) from None
        try:
            if lay.kind == "tensor":
                rec = _tensor_bytes(values[lay.data], lay.spec.dtype, lay.spec.shape)
                return rec, label, CODEC_DATASET, False, 0, 0, None
            rec, raw, _, (h, w) = self._rgb(lay.data, lay.spec, values[lay.data])
        except (TypeError, ValueError) as e:
            raise SampleError(index, lay.data, str(e)) from None
        codec = self.raw_codec
        if lay.spec.raw_codec is not None:
            codec = CODEC_ZSTD if lay.spec.raw_codec == "zstd" else CODEC_NONE
        return rec, label, codec if raw else CODEC_NONE, raw, h, w, None

    def _encode_fields(self, index, values):
        lay = self.layout
        parts = []
        sizes = {}                  # image field -> ((h0, w0) given, (h, w) stored)
        counts = {}                 # ragged field -> its rows in this sample
        for name in lay.names:
            spec, value = lay.specs[name], values[name]
            try:
                if isinstance(spec, Image) and spec.channels == 3:
                    rec, _, given, stored = self._rgb(name, spec, value)
                    sizes[name] = (given, stored)
                    parts.append(rec)
                elif isinstance(spec, Image):
                    a = _plane(value, spec.dtype)
                    if spec.mask is not None:
                        (h0, w0), (h, w) = sizes[spec.mask]
                        if a.shape != (h0, w0):
                            raise ValueError(f"a mask of {a.shape[1]}x{a.shape[0]} (WxH) for "
                                             f"an image of {w0}x{h0}: a mask is its image's "
                                             "size")
                        if (h, w) != (h0, w0):
                            a = _nearest(a, h, w)
                    sizes[name] = (a.shape, a.shape)
                    parts.append(self._encoder(name, spec).plane(a, a.shape[1], a.shape[0],
                                                                 a.itemsize))
                elif isinstance(spec, Tensor):
                    parts.append(_tensor_bytes(value, spec.dtype, spec.shape))
                elif isinstance(spec, Scalar):
                    if name == "label" and self.classes and spec.dtype == "int64":
                        _label(value, self.classes)
                    parts.append(_scalar(value, spec.dtype))
                else:
                    data, rows = _rows_bytes(value, spec)
                    _check_rows(rows, spec)
                    counts[name] = rows
                    if isinstance(spec, Ragged) and spec.rows is not None and \
                            counts.get(spec.rows) != rows:
                        raise ValueError(f"{rows} rows, but its boxes field {spec.rows!r} has "
                                         f"{counts.get(spec.rows)}: one row per box")
                    if isinstance(spec, Ragged) and spec.boxes is not None:
                        (h0, w0), (h, w) = sizes[spec.boxes]
                        data = _boxes(data, (h / h0, w / w0))
                    elif not isinstance(data, bytes):
                        data = data.tobytes()
                    parts.append(data)
            except (TypeError, ValueError) as e:
                raise SampleError(index, name, str(e)) from None
        try:
            rec = _ringfeed.DatasetWriter.record(parts)
        except ValueError as e:
            raise SampleError(index, None, str(e)) from None
        shapes = tuple(tuple(sizes[n][1]) for n in lay.names if n in sizes)
        return rec, None, CODEC_DATASET, False, 0, 0, shapes


# ---- the writer -----------------------------------------------------------

class Writer:
    """A dataset being written at path, sample by sample.

        with ringfeed.Writer("out", {"image": ringfeed.Image(),
                                     "label": ringfeed.Scalar("int64")},
                             classes=["cat", "dog"]) as w:
            for img, label in samples:
                w.write((img, label))

    ``fields``: a dict {name: spec} (the module's help: the two older
    layouts, or kind fields for anything else).  ``classes``: the number of
    classes or the list of their names (required for the older layouts,
    optional for kind fields).  ``image_mode`` ("raw", "jpeg", "smart"),
    ``quality`` (1..100), ``smart_pixels`` and ``raw_codec`` ("zstd", or
    "none": larger, faster to serve small images): how images are stored,
    as ringfeed-pack imagefolder's options of those names, for every Image
    field that does not set its own; for a Tensor and a label, and for
    kind fields, raw_codec is every record's codec.  ``shard_size``: bytes per shard file (default 256 MiB).

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
        if layout.kind == "fields" and classes is None:
            nclasses, names = 0, None
        else:
            nclasses, names = _classes(classes)
        if image_mode not in _MODES:
            raise ValueError(f"ringfeed: image_mode={image_mode!r}: use \"raw\", \"jpeg\" or "
                             "\"smart\"")
        rgb = [n for n, s in layout.specs.items() if isinstance(s, Image) and s.channels == 3]
        if not rgb and image_mode != "raw":
            raise ValueError(f"ringfeed: image_mode={image_mode!r} is for an RGB Image field; "
                             f"the fields are {fields!r}")
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
        if layout.kind == "fields":
            own = {s.raw_codec for s in layout.specs.values()
                   if isinstance(s, Image) and s.raw_codec is not None}
            if len(own) > 1:
                raise ValueError("ringfeed: Image fields with raw_codec \"zstd\" and \"none\": "
                                 "a kind-fields record has one codec")
            raw_codec = own.pop() if own else raw_codec
        self.path = os.fspath(path)
        self.fields = dict(fields)
        self.classes = names
        self.kind = layout.kind
        self._enc = _SampleEncoder(layout, nclasses, image_mode, quality, smart_pixels,
                                   raw_codec)
        kw = {}
        if layout.kind == "tensor":
            kw = {"dtype": _DTYPES[layout.spec.dtype], "shape": layout.spec.shape,
                  "codec": raw_codec}
        elif layout.kind == "jpeg":
            kw = {"jpeg_restart": True}
            if layout.spec.max_side:
                kw["max_side"] = layout.spec.max_side
                kw["max_side_quality"] = self._enc.image_opts(layout.spec)[1]
        else:
            kw = {"fields": layout.lines, "codec": raw_codec}
        if not hasattr(_ringfeed, "DatasetWriter"):
            raise RuntimeError("ringfeed: this build of the extension has no dataset writer "
                               "(built with RINGFEED_EXT_NO_WRITER, as scripts/gpu-check builds "
                               "it on a machine without ringfeed-pack's libraries); write "
                               "datasets with a full build (meson, scripts/install-deps)")
        self._w = _ringfeed.DatasetWriter(self.path, layout.kind, nclasses, names,
                                          shard_bytes=shard, **kw)
        self.samples = 0         # written so far: the next sample's index
        self.raw_images = 0      # RFPX records among them
        self.stored_bytes = 0    # the records' bytes as given to the writer
        self._shape = None       # (h, w) of every image so far; False: mixed
                                 # (kind fields: a list, one per image field)

    def write(self, sample):
        """Writes one sample (a dict or a tuple in the fields' order);
        SampleError naming its index and field when a value is refused."""
        self._add(self._enc.encode(self.samples, sample))

    def _add(self, enc):
        rec, label, codec, raw, h, w, shapes = enc
        self._w.add(rec, label, codec)
        self.samples += 1
        self.raw_images += bool(raw)
        self.stored_bytes += len(rec)
        if shapes is not None:
            if self._shape is None:
                self._shape = list(shapes)
            else:
                self._shape = [a if a == b else False for a, b in zip(self._shape, shapes)]
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
        as ringfeed-pack imagefolder sets them; for kind fields, shape=HxW
        on each image field whose images all had one size as stored),
        fsync, rename to path.  Returns the final figures (records,
        decoded_bytes, stored_bytes, file_bytes, shards, raw_images, and
        image_shape, or for kind fields image_shapes: {field: (h, w) or
        None}).  On failure nothing is left at path.  A writer with no
        sample is refused (aborted)."""
        if self._w.closed:
            raise ValueError("ringfeed: the writer is closed")
        if self.samples == 0:
            self._w.abort()
            raise ValueError(f"ringfeed: no sample written: nothing made at {self.path}")
        lay = self._enc.layout
        try:
            if lay.kind == "jpeg":
                self._w.set_raw_images(self.raw_images)
                if self._shape:
                    self._w.set_image_shape(*self._shape)
            elif lay.kind == "fields":
                images = [i for i, n in enumerate(lay.names) if isinstance(lay.specs[n], Image)]
                for i, shape in zip(images, self._shape):
                    if shape:
                        self._w.set_field_shape(i, *shape)
        except BaseException:
            self._w.abort()
            raise
        st = self._w.finish()
        st["raw_images"] = self.raw_images
        if lay.kind == "fields":
            st["image_shapes"] = {n: tuple(s) if s else None for n, s in
                                  zip([n for n in lay.names
                                       if isinstance(lay.specs[n], Image)], self._shape)}
        else:
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

    def submit_one():
        for fn, a, b in todo:
            pending.append(ex.submit(fn, a, b))
            return True
        return False

    try:
        # A worker's death breaks the pool: the next result() raises, and
        # so does the next submit() once the pool has noticed; either way
        # the same refusal.
        try:
            while len(pending) < 4 * jobs and submit_one():
                pass
            while pending:
                done = pending.popleft().result()
                submit_one()
                for enc in done:
                    yield index, enc
                    index += 1
        except BrokenProcessPool as e:
            raise RuntimeError(f"ringfeed.pack: an encoding worker died ({e}) near "
                               f"sample {index}: nothing written") from None
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
    smart_pixels, shard_size, raw_codec) are Writer's; ``classes`` defaults
    to ``dataset.classes`` (torchvision's datasets have it; kind fields
    need none).

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
        if classes is None and _Layout(fields).kind == "fields":
            writer_opts.pop("classes", None)       # optional for kind fields
        elif classes is None:
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


def split(path, val=0.1, *, stratify=False, seed=0, names=("train", "val"), force=False):
    """Records a train/validation split in the packed dataset at path: two
    named index sets, every sample in exactly one, that a Loader draws from
    with ``subset="train"`` / ``subset="val"`` (on a running daemon too, no
    restart).  What ``ringfeed-pack split`` does, by the same C function,
    so both write the same bytes for the same arguments.

    val: a float in (0, 1), the validation share (ceil(val * samples), as
      scikit-learn's train_test_split test_size), or an int, a count.
    stratify: keep each class's share in both sets (per class its share
      of the request rounded, the total exactly the request).
    seed: the split's seed; the sets are the same on every machine.
    names: (complement, validation), 1..32 of A-Z a-z 0-9 _ -, a letter
      first.  force: replace sets of those names (else ringfeed.Error
      EEXIST).

    Returns {names[0]: count, names[1]: count, "train_file": file,
    "val_file": file, "replaced": sets replaced}.  The records are not
    touched: the set files and the MANIFEST are written beside them (temp
    and rename), docs/design.md "Subsets"."""
    if isinstance(val, bool) or not isinstance(val, (int, float)):
        raise TypeError(f"ringfeed.split: val={val!r}: a float in (0, 1) or an int count")
    if isinstance(val, float):
        if not 0.0 < val < 1.0:
            raise ValueError(f"ringfeed.split: val={val!r}: a fraction must be in (0, 1)")
        frac, count = val, 0
    else:
        if val < 1:
            raise ValueError(f"ringfeed.split: val={val!r}: a count must be at least 1")
        frac, count = 0.0, operator.index(val)
    try:
        a, b = names
    except (TypeError, ValueError):
        raise ValueError(f"ringfeed.split: names={names!r}: two names, "
                         "(complement, validation)") from None
    if not isinstance(a, str) or not isinstance(b, str):
        raise TypeError(f"ringfeed.split: names={names!r}: two str")
    return _ringfeed.split(os.fspath(path), frac, count, bool(stratify),
                           operator.index(seed), a, b, bool(force))
