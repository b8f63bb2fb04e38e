"""`layoutkit.convert`: any array or tensor from one memory layout to another, on its device."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from . import _arrays, _native

_SIZES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i8": 1, "u8": 1, "i32": 4}
_plans: dict = {}
_PLANS_KEPT = 512
# numpy calls seen before: (src, dst, shape, byte strides, numpy dtype, dims, dtype, fill, scale,
# zero point) -> (plan, output shape, output numpy dtype); the small-array path.
_numpy_plans: dict = {}
_np_ndarray = __import__("numpy").ndarray
_np_empty = __import__("numpy").empty


_CORES = os.cpu_count() or 1


def _threads(threads: Optional[int]) -> int:
    if threads is None:
        return _CORES
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, not {threads!r}")
    return threads


def _dims_key(dims):
    if dims is None or isinstance(dims, str):
        return dims
    if isinstance(dims, dict):
        return tuple(dims.items())
    raise TypeError(f'dims must be a dict like {{"N": 1, "C": 3}} or a string like "N=1,C=3", not {type(dims).__name__}')


def _plan(src, dst, i, dims, dtype, fill, scale, zero_point):
    to = None if dtype is None else _arrays.dtype_name(dtype)
    key = (src, dst, i.shape, i.strides, i.dtype, _dims_key(dims), to, float(fill), float(scale), int(zero_point))
    p = _plans.get(key)
    if p is None:
        p = _native.prepare(src, dst, list(i.shape), list(i.strides), i.dtype, dims, to, float(fill),
                            float(scale), int(zero_point))
        if len(_plans) >= _PLANS_KEPT:
            _plans.clear()
        _plans[key] = p
    return p


def convert(x: Any, src: str, dst: str, *, dims: Union[None, str, Dict[str, int]] = None,
            dtype: Any = None, scale: float = 1.0, zero_point: int = 0, fill: float = 0, out: Any = None,
            threads: Optional[int] = None) -> Any:
    """Converts `x`, whose memory holds layout `src`, into a new array in layout `dst`.

    `x` is a numpy array or a torch, cupy or jax array (anything with `__dlpack__`), in CPU
    memory or on a CUDA device. The result is of `x`'s kind on `x`'s device: numpy in, numpy
    out; torch in, torch out. CPU data runs on the fast CPU engine (`threads` threads, the GIL
    released); CUDA data runs on layoutkit's CUDA kernels in device memory, with no host copy,
    queued on the caller's current stream (torch/cupy) without any synchronisation.

    `src` describes the order of `x`'s elements *in memory*. A row-major array, or a slice of
    one, is read as indexed; a permuted view (a transposed array, a PyTorch `channels_last`
    tensor) is read in memory order, so a `channels_last` tensor of shape (N, C, H, W) is
    `src="NHWC"`. Strided inputs are read in place, never copied.

    Args:
        x: the input array.
        src, dst: layout names (`layoutkit.formats()` lists them): "NCHW", "NHWC",
            "NC/32HW32", "kHWC8", "OIHW16i16o", "mace:in_out_channel", ...
        dims: the logical dims, `{"N": 1, "C": 3, "H": 224, "W": 224}` or "N=1,C=3,H=224,W=224";
            inferred from `x`'s shape when not given (needed for images and to drop padding).
        dtype: the output element type (default: `x`'s): "f16", np.float16, torch.bfloat16, ...
        scale, zero_point: quantisation for float <-> integer casts: q = round(x / scale) + zp.
        fill: the value written to the destination's padding.
        out: a preallocated, row-major array of the result's shape, type and device to write.
        threads: CPU threads (default: all cores).

    Returns:
        The converted array (`out` when given).

    Raises:
        ValueError: bad layout names, dims, dtypes or shapes, or an unusable `out`.
        TypeError: `x` or `out` is not an array layoutkit reads.
        RuntimeError: a CUDA failure (no driver, no device, a launch error).

    Example:
        >>> import numpy as np, layoutkit as lk
        >>> x = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
        >>> y = lk.convert(x, "NCHW", "NHWC")
        >>> bool((y == x.transpose(0, 2, 3, 1)).all())
        True
        >>> lk.convert(x, "NCHW", "kHWC8").shape      # C padded to 8 with `fill`
        (2, 4, 4, 1, 8)
    """
    if out is None and type(x) is _np_ndarray:
        # A numpy array converted before with this shape, strides and type: one dictionary
        # lookup, one allocation, one native call (small arrays are dominated by call time).
        try:
            key = (src, dst, x.shape, x.strides, x.dtype, dims if dims is None or type(dims) is str
                   else _dims_key(dims), dtype, fill, scale, zero_point)
            known = _numpy_plans.get(key)
        except TypeError:  # an unhashable argument: the general path reports it
            known, key = None, None
        if known is not None:
            plan, shape, np_dtype = known
            y = _np_empty(shape, np_dtype) if plan.dst_bytes < _arrays.ALIGNED_FROM_BYTES \
                else _arrays.numpy_empty(shape, np_dtype)
            if plan.run_numpy(x, y, _threads(threads)):
                return y
    else:
        key = None
    i = _arrays.info(x)
    plan = _plan(src, dst, i, dims, dtype, fill, scale, zero_point)
    if key is not None and i.kind == "numpy" and i.back is None:
        if len(_numpy_plans) >= _PLANS_KEPT:
            _numpy_plans.clear()
        _numpy_plans[key] = (plan, tuple(plan.out_shape), _arrays.numpy_dtype(plan.out_dtype))
    shape, out_dtype = plan.out_shape, plan.out_dtype
    if out is None:
        y = _arrays.empty_like_kind(i, shape, out_dtype)
        address = _arrays.info(y).address
        nbytes = plan.dst_bytes
    else:
        o = _arrays.info(out, "out")
        _arrays.check_out(o, shape, out_dtype, i.device)
        y, address = out, o.address
        nbytes = _SIZES[out_dtype]
        for n in o.shape:
            nbytes *= n
    if i.device is None:
        plan.run_cpu(i.address, address, nbytes, _threads(threads))
    else:
        plan.run_cuda(i.device, i.address, address, nbytes, _arrays.cuda_stream(i))
    if out is None and i.back is not None:
        return i.back(y)
    return y
