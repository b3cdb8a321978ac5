"""ringfeed.transforms - augmentations the daemon's workers run, named as
torchvision names them.

Each class takes torchvision's arguments (positional in torchvision's
order, or by name) and renders its fragment of the daemon's augmentation
spec (``str(op)``, proto/aug_spec.h's grammar)::

    import ringfeed
    from ringfeed import transforms as T

    loader = ringfeed.Loader("imagenet", transform="train", augment=[
        T.ColorJitter(brightness=0.4, contrast=0.4),
        T.RandomGrayscale(p=0.2),
        T.RandomErasing(p=0.25)])

An argument torchvision does not take is a TypeError naming it, at
construction.  The values are checked by the daemon at ATTACH (the ranges
in ``ringfeedd.conf(5)`` / proto/aug_spec.h's table): a value out of range
or an op this daemon's build lacks is a ringfeed.Error naming it.  The ops
run in the workers after the transform (crop, resize), in the order given,
each drawing from the sample's own random stream: the batches are the same
for any worker count and after a resume.

``T.Plugin(name, params)`` names an op of the operator's own, a plugin the
daemon's config loads (``plugin.NAME`` in ``ringfeedd.conf(5)``): params is
its text (no blanks, ',' or ':'), or a dict rendered ``key=value;...``::

    augment=[T.RandomHorizontalFlip(), T.Plugin("sepia", {"strength": 60})]
"""

import numbers

__all__ = ["ColorJitter", "RandomGrayscale", "GaussianBlur", "RandomPosterize",
           "RandomSolarize", "RandomAdjustSharpness", "RandomAutocontrast", "RandomEqualize",
           "RandomInvert", "RandomAffine", "RandomRotation", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomCrop", "TrivialAugmentWide", "RandAugment",
           "AutoAugment", "RandomErasing", "Plugin", "render"]

# torchvision's arguments of each op, in its order (the daemon's table in
# proto/aug_spec.h holds their kinds, defaults and ranges).
_ARGS = {
    "ColorJitter": ("brightness", "contrast", "saturation", "hue"),
    "RandomGrayscale": ("p",),
    "GaussianBlur": ("kernel_size", "sigma"),
    "RandomPosterize": ("bits", "p"),
    "RandomSolarize": ("threshold", "p"),
    "RandomAdjustSharpness": ("sharpness_factor", "p"),
    "RandomAutocontrast": ("p",),
    "RandomEqualize": ("p",),
    "RandomInvert": ("p",),
    "RandomAffine": ("degrees", "translate", "scale", "shear", "interpolation", "fill",
                     "center"),
    "RandomRotation": ("degrees", "interpolation", "center", "fill"),
    "RandomHorizontalFlip": ("p",),
    "RandomVerticalFlip": ("p",),
    "RandomCrop": ("size", "padding", "pad_if_needed", "fill", "padding_mode"),
    "TrivialAugmentWide": ("num_magnitude_bins", "interpolation", "fill"),
    "RandAugment": ("num_ops", "magnitude", "num_magnitude_bins", "interpolation", "fill"),
    "AutoAugment": ("policy", "interpolation", "fill"),
    "RandomErasing": ("p", "scale", "ratio", "value"),
    "Plugin": ("name", "params"),  # not torchvision's: the operator's own op
}
# torchvision's required arguments (no default there)
_REQUIRED = {
    "GaussianBlur": ("kernel_size",), "RandomPosterize": ("bits",),
    "RandomSolarize": ("threshold",), "RandomAdjustSharpness": ("sharpness_factor",),
    "RandomAffine": ("degrees",), "RandomRotation": ("degrees",), "RandomCrop": ("size",),
    "Plugin": ("name",),
}


def _item(name, v):
    """One value of the spec: a number, a word, or a/b/... for a sequence."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if isinstance(v, str):
        return v
    if isinstance(v, dict):  # Plugin's params: key=value;key=value
        return ";".join(f"{k}={_item(name, x)}" for k, x in v.items())
    value = getattr(v, "value", None)  # an enum: torchvision's InterpolationMode, AutoAugmentPolicy
    if isinstance(value, str):
        return value
    try:
        items = list(v)
    except TypeError:
        raise TypeError(f"{name}={v!r}: use a number, a sequence of numbers or a word") from None
    if not items:
        raise ValueError(f"{name}={v!r}: an empty sequence")
    return "/".join(_item(name, x) for x in items)


class _Op:
    """One op: its torchvision name and the arguments given (None: not given,
    as torchvision's None)."""

    def __init__(self, *args, **kwargs):
        op = type(self).__name__
        names = _ARGS[op]
        if len(args) > len(names):
            raise TypeError(f"{op}() takes at most {len(names)} positional arguments "
                            f"({', '.join(names)}); {len(args)} given")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{op}() got an unexpected argument {k!r}; its arguments: "
                                f"{', '.join(names)}")
            if k in given:
                raise TypeError(f"{op}() got {k!r} twice")
            given[k] = v
        missing = [k for k in _REQUIRED.get(op, ()) if given.get(k) is None]
        if missing:
            raise TypeError(f"{op}() needs {', '.join(missing)}")
        self.args = {k: given[k] for k in names if given.get(k) is not None}
        self._spec = op + "".join(f":{k}={_item(f'{op}({k})', v)}"
                                  for k, v in self.args.items())

    def __str__(self):
        return self._spec

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"ringfeed.transforms.{type(self).__name__}({inner})"

    def __eq__(self, other):
        return isinstance(other, _Op) and str(self) == str(other)

    def __hash__(self):
        return hash(self._spec)


# one class per op of the table, named as torchvision's
for _name in _ARGS:
    globals()[_name] = type(_name, (_Op,), {
        "__doc__": f"torchvision.transforms.{_name}({', '.join(_ARGS[_name])}), run by the "
                   "daemon's workers",
        "__module__": __name__})
del _name


def render(augment):
    """The spec text for Loader(augment=): a list (or tuple) of these ops, a
    spec string (``"RandomInvert:p=1,RandomVerticalFlip"``), or ``"@NAME"``
    for a recipe of the daemon's config.  None or an empty list: None."""
    if augment is None:
        return None
    if isinstance(augment, str):
        text = augment
    elif isinstance(augment, _Op):
        text = str(augment)
    else:
        try:
            ops = list(augment)
        except TypeError:
            raise TypeError(f"augment={augment!r}: use a list of ringfeed.transforms ops, a "
                            "spec string or \"@recipe\"") from None
        for op in ops:
            if not isinstance(op, _Op):
                raise TypeError(f"augment: {op!r} is not a ringfeed.transforms op (the daemon "
                                "runs those only; apply other transforms in the trainer)")
        text = ",".join(str(op) for op in ops)
    if not text:
        return None
    if any(c.isspace() for c in text):
        raise ValueError(f"augment={text!r}: a spec holds no blanks")
    return text
