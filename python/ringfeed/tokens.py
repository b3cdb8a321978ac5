"""Token windows for language-model training (docs/design/tokens.md).

    loader = ringfeed.Loader("owt", batch_size=32, transform="tokens", context=1024)
    for w in loader:                 # (32, 1025) of the pack's dtype (u16, i32)
        x, y = ringfeed.shift(w)     # inputs w[:, :-1], targets w[:, 1:], int64
        loss = model(x, y)

Window i is tokens i*L .. i*L+L of the pack's documents one after another;
``loader.last.indices`` are the windows of the batch.
"""


def shift(w):
    """(x, y) of a batch of windows w (B, L+1), a torch tensor or a numpy
    array: x = w[:, :-1] and y = w[:, 1:], as int64 (torch: a long tensor on
    w's device; numpy: int64 arrays), the inputs and next-token targets of
    nanoGPT's get_batch."""
    if getattr(w, "ndim", None) != 2 or w.shape[1] < 2:
        raise ValueError(f"ringfeed.shift: a batch of windows (B, L+1) with L >= 1, not "
                         f"shape {tuple(getattr(w, 'shape', ()))}")
    if hasattr(w, "long"):              # torch
        w = w.long()
    else:
        import numpy as np
        w = np.asarray(w).astype(np.int64)
    return w[:, :-1], w[:, 1:]
