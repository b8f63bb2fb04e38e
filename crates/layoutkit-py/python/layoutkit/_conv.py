"""`layoutkit.conv2d`: 2-D convolution directly on arrays in any layout."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

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


IntPair = Union[int, Tuple[int, int]]


def conv2d(x: Any, w: Any, *, bias: Any = None, stride: IntPair = 1, padding: IntPair = 0,
           dilation: IntPair = 1, groups: int = 1, relu: bool = False, input_format: str = "NCHW",
           filter_format: str = "OIHW", output_format: Optional[str] = None, out_dtype: Any = None,
           threads: Optional[int] = None, x_dims: Union[None, str, Dict[str, int]] = None,
           scale: Any = None) -> Any:
    """Convolves activations `x` with filters `w`, both read in place in their own layouts.

    `x` has axes N, C, H, W in `input_format` (NCHW, NHWC, NC/8HW8, kHWC8, ... any layout of
    them, as `convert` reads it); `w` has O, I, H, W in `filter_format` (OIHW, OHWI, HWIO,
    OIHW16i16o, ...), with I = C / groups. The output has `output_format` (default: the
    input's) and `out_dtype` (default: the input's for floats, int32 for int8). `x_dims`
    (``{"N": 2, "C": 48, ...}`` or ``"N=2,C=48,..."``) gives x's logical dims where its layout
    pads them (NC/32HW32 with C = 48 is stored with 64 channels); by default they come from
    x's shape. `bias` holds one value per output channel; `relu` clamps the result at 0.

    `scale` (int8 operands; one value per output channel) requantises: each output is
    ``round(sum * scale + bias)`` (ReLU before the rounding), rounded half to even and
    saturated to `out_dtype` (usually int8), with the exact int32 sum; on CUDA the int8 kernel
    then writes int8 itself (the scale and bias rounded to float32).

    CPU arrays (numpy, or CPU tensors through DLPack): f32 NCHW/NHWC/NCHW<x>c activations run
    the register-blocked engine (AVX-512, AVX2+FMA or portable, chosen at run time; groups it
    does not cover go to the implicit GEMM) on `threads` threads, everything else the f64
    reference; the GIL is released.

    CUDA tensors (torch, cupy, or jax through them): layoutkit's tensor-core kernels (warpgroup
    MMA on Hopper, `mma.sync` elsewhere, a direct kernel for groups and odd channel counts) in
    device memory, queued on the caller's current stream with no host copy and no
    synchronisation. The kernel reads NHWC, NCHW and NC/32HW32 activations in place (NCHW with
    enough work per byte is converted to NHWC first, and the kernel then writes NCHW itself,
    except on a Hopper GPU where the footprint kernel reads it faster in place: stride 1 and
    enough output tiles to fill the GPU);
    other layouts, strided views and other element types are converted first by layoutkit's
    conversion kernels on the same stream (as is the filter, to OHWI), and the output where
    the kernel does not write `output_format` itself. int8 activations and
    filters run the int8 kernel (exact int32 sums) without a bias, or requantised to int8
    (`out_dtype` int8, with `scale` and `bias`); bf16 the bf16 kernel;
    anything else the f16 kernel (operands rounded to f16; f32 sums). The result is of `x`'s
    kind on its device.

    Example:
        >>> import numpy as np, layoutkit as lk
        >>> x = np.ones((1, 8, 5, 5), np.float32); w = np.ones((4, 8, 3, 3), np.float32)
        >>> y = lk.conv2d(x, w, padding=1)
        >>> y.shape, float(y[0, 0, 2, 2]), float(y[0, 0, 0, 0])
        ((1, 4, 5, 5), 72.0, 32.0)
        >>> q = lk.conv2d(np.full((1, 8, 3, 3), 100, np.int8), np.full((2, 8, 1, 1), 3, np.int8),
        ...               scale=[0.01, 0.5], out_dtype=np.int8)
        >>> q[0, :, 0, 0].tolist()    # 2400 * 0.01 = 24; 2400 * 0.5 saturates
        [24, 127]
    """
    xi, wi = _arrays.info(x, "x"), _arrays.info(w, "w")
    args = dict(stride=_pair(stride, "stride"), padding=_pair(padding, "padding"),
                dilation=_pair(dilation, "dilation"), groups=int(groups))
    if xi.device is not None or wi.device is not None:
        return _conv2d_cuda(xi, wi, bias, scale, args, bool(relu), input_format, filter_format,
                            output_format, out_dtype, x_dims)
    if xi.kind != "numpy" or wi.kind != "numpy":
        raise TypeError("conv2d takes numpy arrays (or CPU arrays with __dlpack__)")
    xo = (input_format, list(xi.shape), list(xi.strides), xi.dtype, xi.address)
    wo = (filter_format, list(wi.shape), list(wi.strides), wi.dtype, wi.address)
    to = None if out_dtype is None else _native.dtype_name(out_dtype)
    shape, dtype = _native.conv2d_output(xo, wo, output_format=output_format, out_dtype=to, x_dims=x_dims,
                                         **args)
    values = lambda v: None if v is None else np.asarray(v, dtype=np.float64).reshape(-1).tolist()
    y = np.empty(shape, _arrays.numpy_dtype(dtype))
    from ._convert import _threads
    _native.conv2d_cpu(xo, wo, values(bias), y.ctypes.data, y.nbytes, relu=bool(relu),
                       output_format=output_format, out_dtype=to, threads=_threads(threads), x_dims=x_dims,
                       scale=values(scale), **args)
    return xi.back(y) if xi.back is not None else y


def _dense(i: _arrays.ArrayInfo) -> bool:
    """Whether the array fills one block of memory without gaps, in any axis order (a row-major
    array, or a permuted view of one such as a PyTorch channels_last tensor)."""
    expected = 1
    for stride, n in sorted((s, n) for n, s in zip(i.shape, i.strides) if n > 1):
        if stride != expected:
            return False
        expected *= n
    return True


def _same_layout(a: str, b: str) -> bool:
    return _native.Layout(a).canonical == _native.Layout(b).canonical


def _conv2d_cuda(xi, wi, bias, scale, args, relu, input_format, filter_format, output_format, out_dtype,
                 x_dims):
    """conv2d on CUDA tensors: operands brought to what the kernel reads (on the caller's
    stream, by layoutkit's conversion kernels, only where needed), the kernel queued on the
    same stream, its output converted to `output_format` / `out_dtype` where they differ."""
    from ._convert import convert
    where = lambda d: "CPU memory" if d is None else f"CUDA device {d}"
    if xi.device != wi.device:
        raise ValueError(f"x is in {where(xi.device)} but w is in {where(wi.device)}")
    if xi.kind not in ("torch", "cupy") or wi.kind not in ("torch", "cupy"):
        raise TypeError("conv2d on CUDA memory takes torch or cupy tensors (jax arrays go through them)")
    output_format = output_format or input_format
    if out_dtype is not None:
        final = _native.dtype_name(out_dtype)
    else:
        final = xi.dtype if xi.dtype in ("f32", "f16", "bf16", "f64") else "i32"
    has_bias = bias is not None
    xo = (input_format, list(xi.shape), list(xi.strides), xi.dtype)
    wo = (filter_format, list(wi.shape), list(wi.strides), wi.dtype)
    layout, in_t, k_out, x_dims, y_dims, y_layout = _native.conv2d_cuda_kernel(
        xo, wo, bias=has_bias, relu=relu, out_dtype=final, x_dims=x_dims,
        output_format=output_format, **args)
    x_k = xi.obj
    # `input_format` names x's memory order, so a dense view (channels_last included) in the
    # kernel's layout is read in place; anything else is converted on the stream first.
    if not (_same_layout(input_format, layout) and xi.dtype == in_t and _dense(xi)):
        x_k = convert(xi.obj, input_format, layout, dims=x_dims, dtype=in_t)
    w_k = wi.obj
    if not (_same_layout(filter_format, "OHWI") and wi.dtype == in_t and _dense(wi)):
        w_k = convert(wi.obj, filter_format, "OHWI", dtype=in_t)
    xk, wk = _arrays.info(x_k, "x"), _arrays.info(w_k, "w")
    o = int(y_dims.split(",")[1].split("=")[1])

    def per_channel(v, what, default):
        if v is None:
            return np.full(o, default, np.float32)
        a = np.asarray(v, dtype=np.float32).reshape(-1)
        if a.size != o:
            raise ValueError(f"{what} has {a.size} values; the output has {o} channels")
        return a
    # The kernel's per-channel parameters: the bias; for int8 requantised to int8, the scales
    # then the biases.
    requantised = in_t == "i8" and k_out == "i8"
    if scale is not None and not requantised:
        raise ValueError(f"scale requantises int8 convolutions to int8 (out_dtype=int8); this one is "
                         f"{in_t} -> {k_out}")
    b_values = per_channel(bias, "bias", 0.0)
    if requantised:
        b_values = np.concatenate([per_channel(scale, "scale", 1.0), b_values])
    if xk.kind == "torch":
        import torch
        b_dev = torch.as_tensor(b_values, device=xk.obj.device)
    else:
        import cupy
        with cupy.cuda.Device(xk.device):
            b_dev = cupy.asarray(b_values)
    b_address = _arrays.info(b_dev, "bias").address
    shape = _native.Layout(y_layout).physical_shape(y_dims)
    y_k = _arrays.empty_like_kind(xk, shape, k_out)
    yk = _arrays.info(y_k, "y")
    sizes = {"f32": 4, "f16": 2, "bf16": 2, "i8": 1, "i32": 4}
    nbytes = lambda i: sizes[i.dtype] * int(np.prod(i.shape, dtype=np.int64))
    xo_k = (layout, list(xk.shape), list(xk.strides), xk.dtype)
    wo_k = ("OHWI", list(wk.shape), list(wk.strides), wk.dtype)
    pointers = ((xk.address, nbytes(xk)), (wk.address, nbytes(wk)), b_address, (yk.address, nbytes(yk)))
    _native.conv2d_cuda(xk.device, xo_k, wo_k, args["stride"], args["padding"], args["dilation"],
                        args["groups"], has_bias, relu, final, pointers, _arrays.cuda_stream(xk),
                        x_dims=x_dims, output_format=y_layout)
    y = y_k
    if not _same_layout(output_format, y_layout) or k_out != final:
        y = convert(y_k, y_layout, output_format, dims=y_dims, dtype=final)
    return xi.back(y) if xi.back is not None else y
