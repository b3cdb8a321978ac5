"""ringfeed: batches from a ringfeedd daemon, as a drop-in for PyTorch's DataLoader.

    import ringfeed

    loader = ringfeed.Loader("fmnist-train", batch_size=256, seed=0)
    for epoch in range(10):
        loader.set_epoch(epoch)
        for images, labels in loader:     # uint8 (N,1,28,28) viewing the ring, int64 (N,)
            ...

Datasets are written from Python by the same C code as ringfeed-pack:

    ringfeed.pack(torchvision_dataset, "out", {"image": ringfeed.Image(),
                                               "label": ringfeed.Scalar("int64")}, jobs=4)

(ringfeed.Writer writes sample by sample; see ringfeed.writer's help.)

ringfeed.mixup and ringfeed.cutmix mix a batch on its device, the same
for the same (seed, epoch, seq) so a resumed run mixes as the first did
(see ringfeed.mix's help).

A token dataset (ringfeed-pack tokens) gives windows of context + 1
tokens: Loader(name, transform="tokens", context=1024) yields (B, 1025)
batches, and ringfeed.shift(w) their inputs and targets (see
ringfeed.tokens' help).

A dataset of named fields (an image with boxes, a mask, a caption, ...)
gives each batch as a dict {field name: value}: a tensor per fixed-size
field, a ringfeed.RaggedBatch (values, offsets; split(), pad()) per ragged
or bytes field.  A dataset of images or tensors with labels gives
(images, labels).

Images are zero-copy views of the daemon's shared-memory ring; a batch's
slot goes back to the daemon when the last tensor or array viewing it is
freed, in the order batches came.  Rank and world size come from
torchrun's RANK/WORLD_SIZE (or Open MPI's) unless given.  Failures raise
ringfeed.Error, an OSError carrying libringfeed's full message.
"""
from ._ringfeed import Error, SAMPLE_PADDING, SAMPLE_SUBSTITUTED, __version__
from .loader import BatchInfo, Loader
from .mix import cutmix, mixup
from . import transforms
from .ragged import RaggedBatch
from .tokens import shift
from .writer import Bytes, Image, Ragged, SampleError, Scalar, Tensor, Writer, pack, split

__all__ = ["__version__", "Loader", "BatchInfo", "RaggedBatch", "Error", "SAMPLE_PADDING",
           "SAMPLE_SUBSTITUTED",
           "Writer", "pack", "split", "Image", "Tensor", "Scalar", "Bytes", "Ragged",
           "SampleError", "mixup", "cutmix", "transforms", "shift"]
