"""What the package needs to know of an array or tensor a caller passes: its kind (numpy,
torch, cupy, another DLPack producer), device, address, shape, strides and element type; and
how to make a new one of the same kind on the same device. No layout logic lives here."""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from . import _native

# DLPack device types.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


class ArrayInfo(NamedTuple):
    kind: str  # "numpy", "torch", "cupy"
    obj: Any  # the array the address belongs to (kept alive by the caller)
    address: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # in elements
    dtype: str  # our short name
    device: Optional[int]  # CUDA ordinal, None for CPU memory
    readonly: bool
    back: Any  # converts a result of `kind` back into the caller's own kind (or None)


def _module_root(obj: Any) -> str:
    return type(obj).__module__.split(".", 1)[0]


def _elements(strides_bytes, itemsize: int, what: str) -> Tuple[int, ...]:
    out = []
    for s in strides_bytes:
        if s % itemsize:
            raise ValueError(f"{what} has a stride of {s} bytes, not a multiple of its {itemsize}-byte elements")
        out.append(s // itemsize)
    return tuple(out)


_dtype_names: dict = {}


def dtype_name(dtype) -> str:
    """Our short name of a numpy/torch dtype (memoised: this is on every call's path)."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = _native.dtype_name(dtype)
    return name


def _numpy(x: np.ndarray, back=None) -> ArrayInfo:
    fast = _native.array_struct(x)  # numpy's C-level interface: one attribute, no dictionary
    if fast is not None:
        address, shape, strides, dtype, readonly = fast
        return ArrayInfo("numpy", x, address, shape, strides, dtype, None, readonly, back)
    address, readonly = x.__array_interface__["data"]
    itemsize = x.itemsize
    strides = x.strides
    if all(s % itemsize == 0 for s in strides):
        strides = tuple(s // itemsize for s in strides)
    else:
        strides = _elements(strides, itemsize, "the array")
    return ArrayInfo("numpy", x, address, x.shape, strides, dtype_name(x.dtype), None, readonly, back)


def _torch(x) -> ArrayInfo:
    dev = x.device
    if dev.type not in ("cpu", "cuda"):
        raise TypeError(f"torch tensors on {dev.type} are not supported (CPU and CUDA are)")
    if x.is_sparse or x.layout != __import__("torch").strided:
        raise TypeError("only dense (strided) torch tensors are supported")
    return ArrayInfo("torch", x, x.data_ptr(), tuple(x.shape), tuple(x.stride()), dtype_name(x.dtype),
                     dev.index if dev.type == "cuda" else None, False, None)


def _cupy(x) -> ArrayInfo:
    return ArrayInfo("cupy", x, x.data.ptr, x.shape, _elements(x.strides, x.itemsize, "the array"),
                     dtype_name(x.dtype), x.device.id, False, None)


def _from_dlpack_back(x):
    """The caller's framework's `from_dlpack`, to hand results back in its kind."""
    root = _module_root(x)
    for name in ("jax.numpy",) if root in ("jax", "jaxlib") else (root,):
        try:
            f = getattr(importlib.import_module(name), "from_dlpack", None)
        except ImportError:
            f = None
        if f is not None:
            return f
    return None


def info(x: Any, what: str = "x") -> ArrayInfo:
    """Describes `x`: a numpy array, a torch or cupy array, or any object with `__dlpack__`."""
    if type(x) is np.ndarray or isinstance(x, np.ndarray):
        return _numpy(x)
    root = _module_root(x)
    if root == "torch" and hasattr(x, "data_ptr"):
        return _torch(x)
    if root == "cupy" and hasattr(x, "data"):
        return _cupy(x)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        device_type, _ = x.__dlpack_device__()
        back = _from_dlpack_back(x)
        if device_type in (_DL_CPU, _DL_CUDA_HOST):
            # A zero-copy numpy view of host memory (the producer's DLPack capsule).
            return _numpy(np.from_dlpack(x), back)
        if device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
            # Device memory through a framework that speaks the DLPack stream protocol: it asks
            # the producer to order its work before that framework's current stream.
            for lib in ("torch", "cupy"):
                try:
                    mod = importlib.import_module(lib)
                except ImportError:
                    continue
                view = mod.from_dlpack(x)
                i = _torch(view) if lib == "torch" else _cupy(view)
                return i._replace(back=back)
            raise TypeError(f"{what} is CUDA memory of a {type(x).__name__}; converting it in place needs torch or cupy installed")
        raise TypeError(f"{what} lives on DLPack device type {device_type}; only CPU and CUDA memory are supported")
    raise TypeError(f"{what} must be a numpy array, a torch/cupy/jax array or any object with __dlpack__, not {type(x).__name__}")


_NUMPY_NAMES = {"f32": "float32", "f16": "float16", "f64": "float64", "i8": "int8", "u8": "uint8", "i32": "int32"}


_numpy_dtypes: dict = {}


def numpy_dtype(name: str):
    d = _numpy_dtypes.get(name)
    if d is None:
        d = _numpy_dtypes[name] = _make_numpy_dtype(name)
    return d


def _make_numpy_dtype(name: str):
    if name == "bf16":
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError("bf16 numpy arrays need the ml_dtypes package (pip install ml_dtypes)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_NUMPY_NAMES[name])


def torch_dtype(name: str):
    import torch
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
            "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32}[name]


ALIGNED_FROM_BYTES = 1 << 16


def numpy_empty(shape, dtype) -> np.ndarray:
    """A new row-major numpy array whose data starts on a 64-byte boundary when it holds
    ALIGNED_FROM_BYTES or more (numpy's own allocations are 16-byte aligned, and the CPU engine
    writes whole cache lines with streaming stores only into line-aligned outputs: 3-4x faster
    on large tensors). Smaller arrays are plain `np.empty` (their call time matters more)."""
    dtype = np.dtype(dtype)
    count = 1
    for n in shape:
        count *= n
    nbytes = count * dtype.itemsize
    if nbytes < ALIGNED_FROM_BYTES:
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def empty_like_kind(x: ArrayInfo, shape, dtype: str):
    """A new row-major array of `shape` and `dtype` of `x`'s kind, on `x`'s device."""
    if x.kind == "numpy":
        return numpy_empty(shape, numpy_dtype(dtype))
    if x.kind == "torch":
        return __import__("torch").empty(tuple(shape), dtype=torch_dtype(dtype), device=x.obj.device)
    if x.kind == "cupy":
        import cupy
        with cupy.cuda.Device(x.device):
            return cupy.empty(tuple(shape), dtype=numpy_dtype(dtype))
    raise TypeError(f"cannot make arrays of kind {x.kind}")


def cuda_stream(x: ArrayInfo) -> int:
    """The raw stream the caller's framework queues work on now (its current stream)."""
    if x.kind == "torch":
        import torch
        return torch.cuda.current_stream(x.obj.device).cuda_stream
    if x.kind == "cupy":
        import cupy
        with cupy.cuda.Device(x.device):
            return cupy.cuda.get_current_stream().ptr
    return 0


def check_out(out: ArrayInfo, shape, dtype: str, device: Optional[int], what: str = "out") -> None:
    """`out` must be a writable row-major array of `shape` and `dtype` on `device`."""
    if out.device != device:
        where = lambda d: "CPU memory" if d is None else f"CUDA device {d}"
        raise ValueError(f"{what} is in {where(out.device)} but the result is in {where(device)}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{what} has shape {tuple(out.shape)}; the result has shape {tuple(shape)}")
    if out.dtype != dtype:
        raise ValueError(f"{what} has element type {out.dtype}; the result has {dtype}")
    if out.readonly:
        raise ValueError(f"{what} is read-only")
    expected = 1
    for n, s in zip(reversed(out.shape), reversed(out.strides)):
        if n > 1 and s != expected:
            raise ValueError(f"{what} is not a row-major (C-contiguous) array: strides {out.strides}")
        expected *= n
