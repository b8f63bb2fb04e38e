"""Model packing: a model's weights in the layouts an inference engine wants, and back.

The work is `layoutkit-model`'s (the same code as `layoutkit pack` / `unpack`); these functions
release the GIL while they run and return the command line's JSON reports as dicts.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _native

PathLike = Union[str, "os.PathLike[str]"]
Rules = Union[None, str, Sequence[str], Mapping[str, str]]
ProgressFn = Callable[[int, int, int, int], Any]

__all__ = ["pack", "pack_shard", "write_packed_index", "checkpoint_shards", "unpack"]

PROFILES = ("mace-gpu", "onednn-avx2", "onednn-avx512", "cudnn-nhwc", "tensorrt-int8",
            "layoutkit-cuda")


def _rules(rules: Rules) -> List[str]:
    """Rules as `"GLOB=LAYOUT"` strings, from a list of such strings or a dict {glob: layout}."""
    if rules is None:
        return []
    if isinstance(rules, str):
        return [rules]
    if isinstance(rules, dict):
        return [f"{k}={v}" for k, v in rules.items()]
    out = []
    for r in rules:
        if not isinstance(r, str):
            raise TypeError(f"a rule is a string 'NAME_GLOB=LAYOUT', not {type(r).__name__}")
        out.append(r)
    return out


def _dtype(dtype: Any) -> Optional[str]:
    return None if dtype is None else _native.dtype_name(dtype)


def _threads(threads: Optional[int]) -> int:
    if threads is None:
        return 0
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int or None (all cores), not {threads!r}")
    return threads


def pack(model: PathLike, output: PathLike, target: str, *, dtype: Any = None,
         winograd: Optional[int] = None, rules: Rules = None, threads: Optional[int] = None,
         sync: bool = True, dry_run: bool = False,
         progress: Optional[ProgressFn] = None) -> Dict[str, Any]:
    """Packs a model's weights into the layouts of an engine's profile.

    Args:
        model: an ONNX file (``.onnx``), a ``.safetensors`` file, or a sharded checkpoint's
            ``*.safetensors.index.json``.
        output: the packed ``.safetensors`` file, or for a sharded checkpoint a folder that
            receives one packed shard per input shard and an index of the same name. Written
            as every layoutkit output is: atomically for a regular file, nothing left on
            failure.
        target: the profile: ``"mace-gpu"``, ``"onednn-avx2"``, ``"onednn-avx512"``,
            ``"cudnn-nhwc"``, ``"tensorrt-int8"`` or ``"layoutkit-cuda"``.
        dtype: element type of the packed filters and weights (``"f32"``, ``"f16"``,
            ``"bf16"``, ``"i8"``, or a numpy/torch dtype); ``None`` keeps the profile's default.
        winograd: 2 or 4 for MACE's Winograd filters of eligible 3x3 convolutions
            (``mace-gpu`` only).
        rules: per-tensor overrides, first match wins: a list of ``"NAME_GLOB=LAYOUT_OR_ROLE"``
            strings or a dict ``{glob: layout_or_role}`` (e.g. ``{"*.dw.weight": "depthwise"}``).
        threads: worker threads (``None``: all cores).
        sync: sync each output to disk before renaming it into place.
        dry_run: plan only and write nothing (the report lists every tensor's role and layout).
        progress: a callable ``f(tensors_done, tensors_total, bytes_done, bytes_total)``,
            called once per tensor from the worker threads (calls from different threads
            may arrive out of order; an exception in it is printed and the pack goes on).

    Returns:
        The report as a dict (what ``layoutkit --json pack`` prints): ``model``, ``profile``,
        ``dry_run``, ``seconds``, ``index`` and ``shards``, each shard with its ``tensors``
        (name, role, origin, source and target layouts, dims, dtypes, shapes, bytes, scale).

    Raises:
        ValueError: an unknown profile, a malformed model, a tensor whose role is ambiguous
            (the message says which rule would decide it), options that do not fit.
        OSError: a file that cannot be read or an output that cannot be written.

    Example:
        >>> report = layoutkit.pack("resnet.onnx", "resnet.onednn.safetensors", "onednn-avx512")
        >>> {t["name"]: t["target_layout"] for t in report["shards"][0]["tensors"]}["conv1.weight"]
        'OIhw16i16o'
    """
    text = _native.pack(os.fspath(model), os.fspath(output), target, _dtype(dtype), winograd,
                        _rules(rules), _threads(threads), bool(sync), bool(dry_run), progress)
    return json.loads(text)


def pack_shard(shard: PathLike, output: PathLike, target: str, *, dtype: Any = None,
               winograd: Optional[int] = None, rules: Rules = None, threads: Optional[int] = None,
               sync: bool = True, dry_run: bool = False,
               progress: Optional[ProgressFn] = None) -> Dict[str, Any]:
    """Packs one model file, or one shard of a sharded checkpoint, into the file ``output``.

    The unit of work a distributed engine runs per task: pack every shard of
    ``checkpoint_shards(index)`` (on any machines that see the files), each into
    ``out_dir/<shard's file name>``, then call ``write_packed_index(index, out_dir)`` once.
    Arguments as for :func:`pack`. Returns the shard's report (one entry of ``pack``'s
    ``shards``).
    """
    text = _native.pack_shard(os.fspath(shard), os.fspath(output), target, _dtype(dtype),
                              winograd, _rules(rules), _threads(threads), bool(sync),
                              bool(dry_run), progress)
    return json.loads(text)


def write_packed_index(index: PathLike, out_dir: PathLike, *, sync: bool = True) -> str:
    """Writes the index of a checkpoint packed shard by shard (see :func:`pack_shard`).

    Reads the packed shards in ``out_dir`` (one per shard of the source index ``index``, under
    the same file names), checks that each was packed by layoutkit, all for one profile, and
    holds every tensor the source index puts in it, and writes ``out_dir/<index's name>``
    mapping every packed tensor (scale tensors included). Returns the index's path.
    """
    return _native.write_packed_index(os.fspath(index), os.fspath(out_dir), bool(sync))


def checkpoint_shards(index: PathLike) -> List[str]:
    """The shard files of a sharded checkpoint (its ``*.safetensors.index.json``), in order."""
    return _native.checkpoint_shards(os.fspath(index))


def unpack(packed: PathLike, output: PathLike, *, threads: Optional[int] = None,
           sync: bool = True) -> Dict[str, Any]:
    """Restores the source tensors of a packed file (or a packed checkpoint's folder or index).

    Bit-exact where packing applied no cast, quantisation or Winograd transform; within their
    rounding otherwise. Returns the report as a dict (what ``layoutkit --json unpack`` prints).
    """
    text = _native.unpack(os.fspath(packed), os.fspath(output), _threads(threads), bool(sync))
    return json.loads(text)
