"""Layouts: the catalogue, describe/shapes/strides/locate, against the command line's JSON."""

import json

import numpy as np
import pytest

import layoutkit as lk
from conftest import run_cli


def test_formats_cover_every_family_and_parse():
    entries = lk.formats()
    families = {e["family"] for e in entries}
    assert {"canonical", "cudnn", "tensorrt", "onednn", "pytorch"} <= families, families
    for e in entries:
        assert set(e) == {"name", "canonical", "meaning", "family"}
        assert lk.Layout(e["name"]).canonical == e["canonical"]


@pytest.mark.parametrize("name,dims,dtype", [
    ("kHWC8", "N=16,C=3,H=224,W=224", "f16"),
    ("NC/32HW32", "N=2,C=40,H=7,W=7", "int8"),
    ("OIHW4i16o4i", "O=20,I=20,H=3,W=3", "float32"),
    ("mace:in_out_channel", "N=1,H=3,W=5,C=6", "f32"),
    ("mace:conv2d_filter", "O=5,I=7,H=3,W=3", "f16"),
])
def test_describe_equals_the_command_line(name, dims, dtype):
    cli = json.loads(run_cli("describe", name, "--dims", dims, "--dtype", dtype, "--json"))
    got = lk.Layout(name).describe(dims, dtype)
    assert got == cli


def test_dims_as_dict_or_string_and_dtype_spellings():
    L = lk.Layout("NCHW8c")
    d = {"N": 1, "C": 10, "H": 2, "W": 3}
    assert L.physical_shape(d) == L.physical_shape("N=1,C=10,H=2,W=3") == [1, 2, 2, 3, 8]
    assert L.strides(d) == [96, 48, 24, 8, 1]
    for t in ("f16", "float16", np.float16, np.dtype("float16")):
        assert L.describe(d, t)["dtype"] == "f16"
    pytest.importorskip("ml_dtypes")
    import ml_dtypes
    assert L.describe(d, ml_dtypes.bfloat16)["dtype"] == "bf16"


def test_offset_and_coord_agree_with_locate():
    L = lk.Layout("NC/32HW32")
    dims = "N=2,C=40,H=7,W=7"
    cli = json.loads(run_cli("locate", "NC/32HW32", "--dims", dims, "--coord", "N=1,C=35,H=2,W=3", "--json"))
    assert L.offset(dims, {"N": 1, "C": 35, "H": 2, "W": 3}) == cli["offset"]
    assert L.coord(dims, cli["offset"]) == {"N": 1, "C": 35, "H": 2, "W": 3}
    # C = 40..63 of the second block is padding.
    pad = L.offset(dims, "N=0,C=39,H=6,W=6") + 1
    assert L.coord(dims, pad) is None


def test_properties_and_errors():
    L = lk.Layout("kHWC8")
    assert (L.name, L.canonical, L.axes, L.is_image) == ("kHWC8", "NHWC8c", ["N", "H", "W", "C"], False)
    assert lk.Layout("mace:in_out_channel").is_image
    with pytest.raises(ValueError, match="cannot parse format"):
        lk.Layout("NC@W")
    with pytest.raises(ValueError, match="dims"):
        L.physical_shape("N=1,C=3")
    with pytest.raises(TypeError, match="dims must be"):
        L.physical_shape(3)
    with pytest.raises(TypeError, match="element type"):
        L.describe("N=1,C=3,H=2,W=2", "complex64")
    with pytest.raises(ValueError, match="outside"):
        L.offset("N=1,C=3,H=2,W=2", "N=0,C=3,H=0,W=0")
