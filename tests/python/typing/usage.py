"""Typed use of the public API: `mypy --strict` must accept it (tests/python/test_typing.py)."""

from typing import Any, Dict, List

import numpy as np

import layoutkit as lk

layout: lk.Layout = lk.Layout("NC/32HW32")
canonical: str = layout.canonical
axes: List[str] = layout.axes
shape: List[int] = layout.physical_shape({"N": 1, "C": 3, "H": 4, "W": 4})
offset: int = layout.offset("N=1,C=3,H=4,W=4", "N=0,C=2,H=1,W=1")
where = layout.coord("N=1,C=3,H=4,W=4", offset)
if where is not None:
    channel: int = where["C"]
described: Dict[str, Any] = layout.describe("N=1,C=3,H=4,W=4", dtype="f16")
names: List[str] = [f["name"] for f in lk.formats()]

x = np.zeros((1, 3, 4, 4), np.float32)
y = lk.convert(x, "NCHW", "NHWC", threads=1)
z = lk.conv2d(x, np.ones((2, 3, 3, 3), np.float32), padding=1, relu=True, stride=(1, 1))
rows: List[Dict[str, Any]] = lk.features("for (i, 0, 4) {\n  A[i] = B[i]\n}\n")
flat: np.ndarray = lk.features_flat("for (i, 0, 4) {\n  A[i] = B[i]\n}\n")
report: Dict[str, Any] = lk.pack("m.safetensors", "out.safetensors", "onednn-avx512",
                                 rules={"dw.weight": "depthwise"}, dry_run=True)
shards: List[str] = lk.checkpoint_shards("m.safetensors.index.json")
index_path: str = lk.write_packed_index("m.safetensors.index.json", "packed", sync=False)
