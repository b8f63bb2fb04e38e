"""`layoutkit.conv2d`: 2-D convolution directly on arrays in any layout."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _arrays, _native


def _pair(v, what):
    if isinstance(v, int):
        return (v, v)
    try:
        a, b = v
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an int or a pair of ints, not {v!r}") from None


def conv2d(x: Any, w: Any, *, bias=None, stride=1, padding=0, dilation=1, groups: int = 1, relu: bool = False,
           input_format: str = "NCHW", filter_format: str = "OIHW", output_format: Optional[str] = None,
           out_dtype=None, threads: Optional[int] = None):
    """Convolves activations `x` with filters `w`, both read in place in their own layouts.

    `x` has axes N, C, H, W in `input_format` (NCHW, NHWC, NC/8HW8, kHWC8, ... any layout of
    them, as `convert` reads it); `w` has O, I, H, W in `filter_format` (OIHW, OHWI, HWIO,
    OIHW16i16o, ...), with I = C / groups. The output has `output_format` (default: the
    input's) and `out_dtype` (default: the input's for floats, int32 for int8). `bias` holds
    one value per output channel; `relu` clamps the result at 0. f32 NCHW/NHWC/NCHW<x>c
    activations run the implicit-GEMM engine on `threads` threads, everything else the f64
    reference; the GIL is released.

    Example:
        >>> import numpy as np, layoutkit as lk
        >>> x = np.ones((1, 8, 5, 5), np.float32); w = np.ones((4, 8, 3, 3), np.float32)
        >>> y = lk.conv2d(x, w, padding=1)
        >>> y.shape, float(y[0, 0, 2, 2]), float(y[0, 0, 0, 0])
        ((1, 4, 5, 5), 72.0, 32.0)
    """
    xi, wi = _arrays.info(x, "x"), _arrays.info(w, "w")
    if xi.device is not None or wi.device is not None:
        raise ValueError("conv2d runs on CPU arrays in this version; CUDA tensors are not supported yet")
    if xi.kind != "numpy" or wi.kind != "numpy":
        raise TypeError("conv2d takes numpy arrays (or CPU arrays with __dlpack__)")
    args = dict(stride=_pair(stride, "stride"), padding=_pair(padding, "padding"),
                dilation=_pair(dilation, "dilation"), groups=int(groups))
    xo = (input_format, list(xi.shape), list(xi.strides), xi.dtype, xi.address)
    wo = (filter_format, list(wi.shape), list(wi.strides), wi.dtype, wi.address)
    to = None if out_dtype is None else _native.dtype_name(out_dtype)
    shape, dtype = _native.conv2d_output(xo, wo, output_format=output_format, out_dtype=to, **args)
    b = None
    if bias is not None:
        b = np.asarray(bias, dtype=np.float64).reshape(-1).tolist()
    y = np.empty(shape, _arrays.numpy_dtype(dtype))
    from ._convert import _threads
    _native.conv2d_cpu(xo, wo, b, y.ctypes.data, y.nbytes, relu=bool(relu), output_format=output_format,
                       out_dtype=to, threads=_threads(threads), **args)
    return xi.back(y) if xi.back is not None else y
