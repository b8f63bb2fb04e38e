"""layoutkit: where every element of a tensor lives, and how to move it.

Layouts (`Layout`, `formats`), conversions between them for numpy arrays and torch, cupy or jax
tensors on the CPU and on CUDA devices (`convert`), convolutions on any layout (`conv2d`) and
AutoTVM loop-nest features for cost models (`features`, `features_flat`, ...), and whole models'
weights packed into an engine's layouts (`pack`, `pack_shard`, `unpack`).

    >>> import numpy as np, layoutkit as lk
    >>> lk.Layout("NC/32HW32").canonical
    'NCHW32c'
    >>> lk.convert(np.zeros((1, 3, 2, 2), np.float32), "NCHW", "NC/32HW32").shape
    (1, 1, 2, 2, 32)
"""

from ._native import Layout, __version__, formats
from ._convert import convert
from ._conv import conv2d
from ._features import features, features_curve, features_flat, features_names
from ._pack import checkpoint_shards, pack, pack_shard, unpack, write_packed_index

__all__ = ["Layout", "formats", "convert", "conv2d", "features", "features_flat", "features_names",
           "features_curve", "pack", "pack_shard", "write_packed_index", "checkpoint_shards",
           "unpack", "__version__"]
