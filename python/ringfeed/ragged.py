"""ringfeed.RaggedBatch: one batch of a ragged field (boxes, tokens, captions).

A ragged field gives each sample its own number of rows of a fixed tail
shape (a box is a row of 4 float32, a token a row of one int32, a caption
byte a row of one uint8).  A batch of one carries them as the ring does:

* ``values``: every sample's rows one after the other, shape
  ``(rows, *tail)``;
* ``offsets``: int64, ``count + 1`` entries; sample ``i``'s rows are
  ``values[offsets[i]:offsets[i + 1]]``, ``offsets[0] == 0`` and
  ``offsets[-1] == rows``.

Both are zero-copy views of the daemon's ring unless the loader was asked to
copy (``copy=True``) or to move batches to a device.  ``values`` and
``offsets`` are torch tensors or numpy arrays, as the loader's ``output``
says; every method here works on either and returns the same kind.
"""

__all__ = ["RaggedBatch"]


def _is_torch(x):
    return type(x).__module__.startswith("torch")


class RaggedBatch:
    """A batch of a ragged field: ``values`` and ``offsets`` (see the module's
    help).  ``len()`` is the number of samples; ``batch[i]`` sample ``i``'s
    rows (a view); ``lengths`` the rows of each; ``split()`` every sample's
    rows; ``pad(value)`` a padded block and the lengths, as
    ``torch.nn.utils.rnn.pad_sequence(..., batch_first=True)`` gives."""

    __slots__ = ("values", "offsets", "name")

    def __init__(self, values, offsets, name=None):
        if len(offsets) < 1:
            raise ValueError("ringfeed.RaggedBatch: offsets needs count + 1 entries (>= 1)")
        first, last = int(offsets[0]), int(offsets[-1])
        if first != 0 or last != len(values):
            raise ValueError(f"ringfeed.RaggedBatch: offsets run from {first} to {last}, "
                             f"not from 0 to the {len(values)} rows of values")
        lengths = offsets[1:] - offsets[:-1]
        if len(lengths) and int(lengths.min()) < 0:
            raise ValueError("ringfeed.RaggedBatch: offsets decrease")
        self.values = values
        self.offsets = offsets
        self.name = name

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, i):
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"ringfeed.RaggedBatch: sample {i} of {n}")
        i %= n
        return self.values[int(self.offsets[i]):int(self.offsets[i + 1])]

    def __iter__(self):
        return iter(self.split())

    @property
    def rows(self):
        """Rows of the whole batch (``len(values)``)."""
        return len(self.values)

    @property
    def tail(self):
        """The shape of one row: ``()`` for one value per row."""
        return tuple(self.values.shape[1:])

    @property
    def lengths(self):
        """Rows of each sample: int64, ``count`` entries."""
        return self.offsets[1:] - self.offsets[:-1]

    def _bounds(self):
        off = self.offsets.tolist()
        return list(zip(off[:-1], off[1:]))

    def split(self):
        """Every sample's rows, a list of ``count`` views of ``values``
        (shape ``(rows_i, *tail)``; samples without rows give empty ones)."""
        v = self.values
        return [v[a:b] for a, b in self._bounds()]

    def pad(self, value=0):
        """``(padded, lengths)``: padded has shape ``(count, max_rows, *tail)``
        (``max_rows`` 0 when no sample has a row), sample ``i``'s rows first
        and ``value`` after them; lengths as ``self.lengths``.  A copy."""
        n, v, lengths = len(self), self.values, self.lengths
        longest = int(lengths.max()) if n else 0
        shape = (n, longest) + tuple(v.shape[1:])
        if _is_torch(v):
            import torch
            out = torch.full(shape, value, dtype=v.dtype, device=v.device)
        else:
            import numpy as np
            out = np.full(shape, value, dtype=v.dtype)
        for i, (a, b) in enumerate(self._bounds()):
            if b > a:
                out[i, :b - a] = v[a:b]
        return out, lengths

    def tolist(self):
        """Every sample's rows as nested Python lists."""
        return [s.tolist() for s in self.split()]

    def strings(self, encoding=None):
        """For a bytes field (uint8 rows of one value): each sample's bytes,
        decoded with ``encoding`` when one is given."""
        if self.values.ndim != 1 or str(self.values.dtype) not in ("uint8", "torch.uint8"):
            raise TypeError(f"ringfeed.RaggedBatch.strings: values are {self.values.dtype} "
                            f"of shape {tuple(self.values.shape)}, not the uint8 bytes of a "
                            "bytes field")
        v = self.values
        if _is_torch(v):
            v = v.cpu().numpy()
        out = [bytes(v[a:b]) for a, b in self._bounds()]
        return [b.decode(encoding) for b in out] if encoding else out

    def to(self, *args, **kwargs):
        """A RaggedBatch of ``values.to(...)`` and ``offsets.to(...)``
        (torch only; a device, ``non_blocking``, ...)."""
        return RaggedBatch(self.values.to(*args, **kwargs), self.offsets.to(*args, **kwargs),
                           self.name)

    def __repr__(self):
        name = f"{self.name!r}, " if self.name else ""
        return (f"RaggedBatch({name}samples={len(self)}, rows={self.rows}, "
                f"tail={self.tail}, dtype={self.values.dtype})")
