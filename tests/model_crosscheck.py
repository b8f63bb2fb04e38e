#!/usr/bin/env python3
"""Cross-checks `layoutkit pack` and `layoutkit unpack` on real model files made here.

Builds, with the `onnx` and `safetensors` packages (no downloads): a ResNet-style and a
MobileNet-style ONNX network with random weights (convolutions, depthwise with multipliers 1
and 2, grouped, transposed, dense layers through Gemm and MatMul, biases, BatchNorm; weights in
raw_data, float_data and int32_data (fp16), fp16 weights, a Constant node, a weight shared
through an Identity node, initializers also listed as graph inputs, external data), a PyTorch-
style .safetensors file and a sharded checkpoint. Then packs each with every profile and checks
every packed tensor against a numpy computation written here from the layouts' definitions
(pad + reshape + transpose, MACE images as [height, width, 4], G g G^T for Winograd, per-channel
symmetric int8), that the reference engine writes the same bytes, that unpack restores the
source (bit for bit without casts), and that bad inputs fail with a clear error and no output.

Usage: model_crosscheck.py PATH/TO/layoutkit
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_crosscheck import numpy_layout  # noqa: E402  (the independent layout code)

RNG = np.random.default_rng(20261123)

# What each profile makes of each role: (canonical target, source view name). The view says how
# the stored array is read: see view() below.
PROFILES = {
    "mace-gpu": {
        "conv": ("OHW|I|4o", "OIHW"), "depthwise": ("I|MHW|4i", "IMHW"), "grouped": ("OIHW", "OIHW"),
        "deconv": ("OHW|I|4o", "IOHW"), "dense": ("O|HWI|4i", "OIHW"), "dense-io": ("O|HWI|4i", "IOHW"),
        "bias": ("|W|4w", "W"), "vector": ("|W|4w", "W"), "keep": (None, None),
    },
    "onednn-avx2": {
        "conv": ("OIHW8i8o", "OIHW"), "depthwise": ("GOIHW8g", "GOIHW"), "grouped": ("GOIHW8i8o", "GOIHW"),
        "deconv": ("OIHW8i8o", "IOHW"), "dense": ("OI8i8o", "OI"), "dense-io": ("OI8i8o", "IO"),
        "bias": ("W", "W"), "vector": ("W", "W"), "keep": (None, None),
    },
    "onednn-avx512": {
        "conv": ("OIHW16i16o", "OIHW"), "depthwise": ("GOIHW16g", "GOIHW"),
        "grouped": ("GOIHW16i16o", "GOIHW"), "deconv": ("OIHW16i16o", "IOHW"),
        "dense": ("OI16i16o", "OI"), "dense-io": ("OI16i16o", "IO"),
        "bias": ("W", "W"), "vector": ("W", "W"), "keep": (None, None),
    },
    "cudnn-nhwc": {
        "conv": ("OHWI", "OIHW"), "depthwise": ("OHWI", "OIHW"), "grouped": ("OHWI", "OIHW"),
        "deconv": ("IHWO", "IOHW"), "dense": ("OI", "OI"), "dense-io": ("OI", "IO"),
        "bias": ("W", "W"), "vector": ("W", "W"), "keep": (None, None),
    },
    "tensorrt-int8": {
        "conv": ("OIHW32i", "OIHW"), "depthwise": ("OIHW", "OIHW"), "grouped": ("OIHW32i", "OIHW"),
        "deconv": ("IOHW", "IOHW"), "dense": ("OI", "OI"), "dense-io": ("OI", "IO"),
        "bias": ("W", "W"), "vector": ("W", "W"), "keep": (None, None),
    },
    "layoutkit-cuda": {
        "conv": ("OHWI", "OIHW"), "depthwise": ("OHWI", "OIHW"), "grouped": ("OHWI", "OIHW"),
        "deconv": ("IOHW", "IOHW"), "dense": ("OI", "OI"), "dense-io": ("OI", "IO"),
        "bias": ("W", "W"), "vector": ("W", "W"), "keep": (None, None),
    },
}
NP = {"f32": np.float32, "f16": np.float16, "i8": np.int8}

G = {
    2: np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], dtype=np.float64),
    4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                 [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=np.float64),
}


def run(cmd, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise SystemExit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p


def rand(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def base_role(role):
    """`depthwise:2` -> (`depthwise`, 2)."""
    name, _, n = role.partition(":")
    return name, int(n) if n else 1


def view(w, role, axes):
    """The stored array w read as the role's view `axes` (pure reshapes)."""
    name, n = base_role(role)
    if name in ("bias", "vector"):
        return w.reshape(-1)
    if len(w.shape) == 3:
        w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
    if name == "depthwise":
        c = w.shape[0] // n
        if axes == "IMHW":
            return w.reshape(c, n, w.shape[2], w.shape[3])
        if axes == "GOIHW":
            return w.reshape(c, n, 1, w.shape[2], w.shape[3])
        return w
    if name == "grouped" and axes == "GOIHW":
        return w.reshape(n, w.shape[0] // n, *w.shape[1:])
    if name in ("dense", "dense-io") and axes in ("OIHW", "IOHW"):
        return w.reshape(*w.shape, 1, 1)
    return w


def quantise(w, role):
    """Per-output-channel symmetric int8 of the stored array, as the profile defines it."""
    name, n = base_role(role)
    axis = 1 if name in ("deconv", "dense-io") else 0
    moved = np.moveaxis(w.astype(np.float32), axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    scale = (np.abs(flat).max(axis=1).astype(np.float32) / np.float32(127)).astype(np.float32)
    scale[scale == 0] = 1
    q = np.clip(np.rint(flat / scale[:, None]), -128, 127).astype(np.int8)
    return np.moveaxis(q.reshape(moved.shape), 0, axis), scale


def winograd(w, block, dtype):
    g = np.einsum("ta,oiab,sb->tsoi", G[block], w.astype(np.float64), G[block])
    t = block + 2
    u = g.reshape(t * t, w.shape[0], w.shape[1])
    return numpy_layout(u, "TOI", "TO|I|4i").astype(dtype)


def expected(src, role, profile, dtype, wino):
    """(array, scales) the pack should write for source tensor src."""
    if not np.issubdtype(src.dtype, np.floating):
        return src, None
    name, _ = base_role(role)
    canonical, axes = PROFILES[profile][name]
    out_t = NP.get(dtype, src.dtype) if dtype else src.dtype
    quant = out_t == np.int8 and name in ("conv", "depthwise", "grouped", "deconv", "dense", "dense-io")
    if out_t == np.int8 and not quant:
        out_t = src.dtype
    if canonical is None:
        return src.astype(out_t), None
    if wino and name == "conv":
        return winograd(src, wino, out_t), None
    scales = None
    if quant:
        src, scales = quantise(src, role)
    x = view(src, role, axes).astype(out_t)
    if canonical == axes:
        return x.reshape(src.shape), scales
    return numpy_layout(x, axes, canonical), scales


# ---------------------------------------------------------------------------------------------
# Model files


def resnet_onnx(path, external=False):
    """ResNet-style graph; returns {tensor: (array, role, winograd-eligible)}."""
    w = {}
    inits, nodes = [], []

    def init(name, arr, role, wino=False, typed=False):
        w[name] = (arr, role, wino)
        if typed:
            inits.append(helper.make_tensor(name, TensorProto.FLOAT, arr.shape, arr.reshape(-1).tolist()))
        else:
            inits.append(numpy_helper.from_array(arr, name))

    init("conv1.weight", rand((16, 3, 7, 7)), "conv")
    init("conv1.bias", rand(16), "bias")
    nodes.append(helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                                  strides=[2, 2], pads=[3, 3, 3, 3]))
    for k in ("scale", "b", "mean", "var"):
        init(f"bn1.{k}", rand(16), "vector")
    nodes.append(helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.b", "bn1.mean", "bn1.var"], ["b1"], name="bn1"))
    nodes.append(helper.make_node("Relu", ["b1"], ["r1"]))
    init("layer1.conv.weight", rand((16, 16, 3, 3)), "conv", wino=True)
    nodes.append(helper.make_node("Conv", ["r1", "layer1.conv.weight"], ["c2"], name="layer1.conv", pads=[1, 1, 1, 1]))
    # A weight shared by two convolutions, the second through an Identity node.
    init("shared.weight", rand((16, 16, 3, 3)), "conv", wino=True)
    nodes.append(helper.make_node("Identity", ["shared.weight"], ["shared.alias"]))
    nodes.append(helper.make_node("Conv", ["c2", "shared.weight"], ["c3"], name="shared.a", pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Conv", ["c3", "shared.alias"], ["c4"], name="shared.b", pads=[1, 1, 1, 1]))
    init("down.weight", rand((32, 16, 1, 1)), "conv")
    init("down.bias", rand(32), "bias")
    nodes.append(helper.make_node("Conv", ["c4", "down.weight", "down.bias"], ["c5"], name="down", strides=[2, 2]))
    # 3x3 but stride 2: not Winograd-eligible.
    init("stride2.weight", rand((32, 32, 3, 3)), "conv")
    nodes.append(helper.make_node("Conv", ["c5", "stride2.weight"], ["c6"], name="stride2", strides=[2, 2], pads=[1, 1, 1, 1]))
    init("grouped.weight", rand((32, 8, 3, 3)), "grouped:4")
    nodes.append(helper.make_node("Conv", ["c6", "grouped.weight"], ["c7"], name="grouped", group=4, pads=[1, 1, 1, 1]))
    init("up.weight", rand((32, 16, 2, 2)), "deconv")
    init("up.bias", rand(16), "bias")
    nodes.append(helper.make_node("ConvTranspose", ["c7", "up.weight", "up.bias"], ["c8"], name="up", strides=[2, 2]))
    nodes.append(helper.make_node("GlobalAveragePool", ["c8"], ["p"]))
    nodes.append(helper.make_node("Flatten", ["p"], ["f"]))
    init("fc.weight", rand((10, 16)), "dense", typed=True)  # float_data
    init("fc.bias", rand(10), "bias", typed=True)
    nodes.append(helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["g"], name="fc", transB=1))
    # A Constant node holding the head's weight, MatMul + Add for its bias.
    head = rand((10, 12))
    w["head.weight"] = (head, "dense-io", False)
    nodes.append(helper.make_node("Constant", [], ["head.weight"], value=numpy_helper.from_array(head, "head.weight")))
    init("head.bias", rand(12), "bias")
    nodes.append(helper.make_node("MatMul", ["g", "head.weight"], ["m"], name="head"))
    nodes.append(helper.make_node("Add", ["m", "head.bias"], ["a"]))
    init("shape", np.array([1, 12], dtype=np.int64), "keep")
    nodes.append(helper.make_node("Reshape", ["a", "shape"], ["y"]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])]
    # Exporters of IR < 4 list initializers as graph inputs too.
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "resnetish", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    if external:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(path) + ".data", size_threshold=0)
    else:
        onnx.save_model(model, path)
    return w


def mobilenet_onnx(path):
    """MobileNet-style graph with fp16 weights (raw_data and int32_data)."""
    w = {}
    inits, nodes = [], []

    def init(name, arr, role, wino=False, typed=False):
        w[name] = (arr, role, wino)
        if typed:  # fp16 bit patterns in int32_data, as older exporters write them
            t = helper.make_tensor(name, TensorProto.FLOAT16, arr.shape, arr.reshape(-1))
            assert len(t.int32_data) == arr.size and not t.raw_data
            inits.append(t)
        else:
            inits.append(numpy_helper.from_array(arr, name))

    h = np.float16
    init("stem.weight", rand((8, 3, 3, 3), h), "conv")
    nodes.append(helper.make_node("Conv", ["x", "stem.weight"], ["s"], name="stem", strides=[2, 2], pads=[1, 1, 1, 1]))
    init("dw1.weight", rand((8, 1, 3, 3), h), "depthwise", typed=True)
    init("dw1.bias", rand(8, h), "bias", typed=True)
    nodes.append(helper.make_node("Conv", ["s", "dw1.weight", "dw1.bias"], ["d1"], name="dw1", group=8, pads=[1, 1, 1, 1]))
    init("pw1.weight", rand((16, 8, 1, 1), h), "conv")
    nodes.append(helper.make_node("Conv", ["d1", "pw1.weight"], ["p1"], name="pw1"))
    init("dw2.weight", rand((32, 1, 3, 3), h), "depthwise:2")
    nodes.append(helper.make_node("Conv", ["p1", "dw2.weight"], ["d2"], name="dw2", group=16, pads=[1, 1, 1, 1]))
    init("conv3.weight", rand((16, 32, 3, 3), h), "conv", wino=True)
    nodes.append(helper.make_node("Conv", ["d2", "conv3.weight"], ["c3"], name="conv3", pads=[1, 1, 1, 1]))
    init("prelu.slope", rand((16, 1, 1), h), "vector")
    nodes.append(helper.make_node("PRelu", ["c3", "prelu.slope"], ["pr"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["pr"], ["gp"]))
    nodes.append(helper.make_node("Flatten", ["gp"], ["fl"]))
    init("fc.weight", rand((16, 10), h), "dense-io")  # Gemm transB=0: [K, N]
    init("fc.bias", rand((1, 10), h), "bias")  # bias folded into Gemm C as [1, N]
    nodes.append(helper.make_node("Gemm", ["fl", "fc.weight", "fc.bias"], ["y"], name="fc"))
    graph = helper.make_graph(nodes, "mobilenetish",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save_model(model, path)
    return w


def torch_tensors():
    """PyTorch-style state dict: {name: (array, role)}; `dw` needs a rule."""
    return {
        "features.0.weight": (rand((16, 3, 3, 3)), "conv"),
        "features.1.dw.weight": (rand((16, 1, 3, 3)), "depthwise"),
        "features.2.weight": (rand((32, 16, 1, 1)), "conv"),
        "bn.weight": (rand(32), "vector"),
        "bn.bias": (rand(32), "bias"),
        "bn.running_mean": (rand(32), "vector"),
        "classifier.weight": (rand((10, 32)), "dense"),
        "classifier.bias": (rand(10), "bias"),
        "tok.embed.weight": (rand((50, 8)), "keep"),
        "position_ids": (np.arange(7, dtype=np.int64).reshape(1, 7), "keep"),
        "extra.weight": (rand((8, 4), np.float16), "dense"),
    }


RULES = ["--rule", "features.*.dw.weight=depthwise"]


def save_sharded(folder, tensors, shards=3):
    names = sorted(tensors)
    weight_map = {}
    for k in range(shards):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n][0] for n in names[k::shards]}
        save_file(part, os.path.join(folder, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    index = os.path.join(folder, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    return index


# ---------------------------------------------------------------------------------------------
# Checks


def read_meta(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(json.loads(f.read(n))["__metadata__"]["layoutkit"])


def check_packed(packed_files, weights, profile, dtype, wino):
    """Every source tensor against numpy; returns the number of tensors checked."""
    out, meta = {}, {}
    for p in packed_files:
        out.update(load_file(p))
        meta.update(read_meta(p)["tensors"])
    checked = 0
    for name, (src, role, eligible) in weights.items():
        got = out[name]
        m = meta[name]
        assert m["role"] == role, f"{profile} {name}: role {m['role']}, expected {role}"
        assert m["source"]["name"] == name and list(m["source"]["shape"]) == list(src.shape), m
        want, scales = expected(src, role, profile, dtype, wino if eligible and profile == "mace-gpu" else None)
        assert got.dtype == want.dtype, f"{profile} {name}: {got.dtype} vs {want.dtype}"
        assert got.shape == want.shape, f"{profile} {name}: shape {got.shape} vs {want.shape}"
        if wino and eligible and profile == "mace-gpu":
            tol = 1e-3 if want.dtype == np.float16 else 1e-5
            assert np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol), f"{name} winograd"
            assert m["layout"] == f"mace:winograd_filter:{wino}"
        else:
            assert got.tobytes() == want.tobytes(), f"{profile} {dtype} {name}: bytes differ"
        if scales is not None:
            assert m["scale"] == name + ":scale" and m["zero_point"] == 0
            assert out[name + ":scale"].tobytes() == scales.tobytes(), f"{name} scales"
        checked += 1
    return checked


def check_restored(restored, weights, dtype, wino, profile):
    back = {}
    for p in restored:
        back.update(load_file(p))
    assert set(back) == set(weights), (sorted(back), sorted(weights))
    for name, (src, role, eligible) in weights.items():
        got = back[name]
        assert got.dtype == src.dtype and got.shape == src.shape, (name, got.dtype, got.shape)
        exact = (dtype is None or NP[dtype] == src.dtype) and not (wino and eligible and profile == "mace-gpu")
        if not np.issubdtype(src.dtype, np.floating):
            exact = True
        if exact and not (dtype == "i8" and base_role(role)[0] in ("conv", "depthwise", "grouped", "deconv", "dense", "dense-io")):
            assert got.tobytes() == src.tobytes(), f"{name}: round trip not exact"
        else:
            s = np.abs(src.astype(np.float64)).max()
            tol = s / 127 if dtype == "i8" else s * (1e-2 if wino and eligible else 2e-3)
            assert np.abs(got.astype(np.float64) - src.astype(np.float64)).max() <= tol * 1.01 + 1e-6, name


def pack_and_check(exe, tmp, model, weights, tag, extra=(), sharded=False):
    total = 0
    for profile in PROFILES:
        variants = [(None, None)]
        if profile == "mace-gpu":
            variants = [("f16", None), ("f16", 2), ("f32", 4)]
        elif profile == "tensorrt-int8":
            variants = [(None, None), ("f16", None)]
        elif profile == "onednn-avx512":
            variants = [(None, None), ("i8", None)]
        for dtype, wino in variants:
            if profile == "tensorrt-int8" and dtype is None:
                dtype_eff = "i8"
            else:
                dtype_eff = dtype
            out = os.path.join(tmp, f"{tag}.{profile}.{dtype}.{wino}" + ("" if sharded else ".safetensors"))
            cmd = [exe, "pack", model, "-o", out, "--target", profile, *extra]
            if dtype:
                cmd += ["--dtype", dtype]
            if wino:
                cmd += ["--winograd", str(wino)]
            run(cmd)
            files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".safetensors")) if sharded else [out]
            total += check_packed(files, weights, profile, dtype_eff, wino)
            # The reference converter writes the same bytes.
            ref = out + ".ref"
            run(cmd[:4] + [ref] + cmd[5:] + ["--engine", "reference"])
            ref_files = sorted(os.path.join(ref, f) for f in os.listdir(ref) if f.endswith(".safetensors")) if sharded else [ref]
            for a, b in zip(files, ref_files):
                with open(a, "rb") as fa, open(b, "rb") as fb:
                    assert fa.read() == fb.read(), f"fast and reference packs differ: {a}"
            back = out + ".back" + ("" if sharded else ".safetensors")
            run([exe, "unpack", out, "-o", back])
            restored = sorted(os.path.join(back, f) for f in os.listdir(back) if f.endswith(".safetensors")) if sharded else [back]
            check_restored(restored, weights, dtype_eff, wino, profile)
    return total


def expect_error(exe, cmd, needle, out):
    p = run([exe, *cmd], ok=False)
    assert p.returncode == 2, f"{cmd}: exit {p.returncode}\n{p.stderr}"
    line = p.stderr.strip()
    assert line.startswith("error:") and "\n" not in line, line
    assert needle in line, f"`{needle}` not in: {line}"
    assert not os.path.exists(out), f"{out} was left behind"
    leftovers = [f for f in os.listdir(os.path.dirname(out)) if f.startswith(".layoutkit-")]
    assert not leftovers, leftovers
    return line


def main():
    exe = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        checked = 0
        resnet = os.path.join(tmp, "resnet.onnx")
        w = resnet_onnx(resnet)
        checked += pack_and_check(exe, tmp, resnet, w, "resnet")
        print(f"resnet-style ONNX: every profile checked ({checked} tensors)")

        ext = os.path.join(tmp, "resnet_ext.onnx")
        w_ext = resnet_onnx(ext, external=True)
        out = os.path.join(tmp, "ext.safetensors")
        run([exe, "pack", ext, "-o", out, "--target", "onednn-avx512"])
        checked += check_packed([out], w_ext, "onednn-avx512", None, None)
        print("ONNX with external data: checked")

        mobile = os.path.join(tmp, "mobilenet.onnx")
        w = mobilenet_onnx(mobile)
        n = pack_and_check(exe, tmp, mobile, w, "mobilenet")
        checked += n
        print(f"mobilenet-style ONNX (fp16, depthwise x1 and x2): every profile checked ({n} tensors)")

        st = torch_tensors()
        single = os.path.join(tmp, "torch.safetensors")
        save_file({k: v[0] for k, v in st.items()}, single, metadata={"format": "pt"})
        weights = {k: (v[0], v[1], False) for k, v in st.items()}
        n = pack_and_check(exe, tmp, single, weights, "torch", extra=RULES)
        checked += n
        packed = os.path.join(tmp, "torch.onednn-avx512.None.None.safetensors")
        assert load_file(packed)  # readable by the safetensors package
        print(f"safetensors file with rules: every profile checked ({n} tensors)")

        shard_dir = os.path.join(tmp, "ckpt")
        os.mkdir(shard_dir)
        index = save_sharded(shard_dir, st)
        n = pack_and_check(exe, tmp, index, weights, "sharded", extra=RULES, sharded=True)
        checked += n
        packed_dir = os.path.join(tmp, "sharded.cudnn-nhwc.None.None")
        names = sorted(os.listdir(packed_dir))
        assert names == sorted(os.listdir(shard_dir)), names
        idx = json.load(open(os.path.join(packed_dir, "model.safetensors.index.json")))
        assert idx["metadata"]["layoutkit_profile"] == "cudnn-nhwc"
        print(f"sharded checkpoint (3 shards): every profile checked ({n} tensors)")

        # Dry run: the table, nothing written.
        p = run([exe, "pack", resnet, "--target", "mace-gpu", "--dry-run", "--winograd", "2", "--dtype", "f16"])
        assert "layer1.conv.weight" in p.stdout and "mace:winograd_filter:2" in p.stdout, p.stdout
        p = run([exe, "--json", "pack", resnet, "--target", "mace-gpu", "--dry-run"])
        doc = json.loads(p.stdout)
        roles = {t["name"]: t["role"] for t in doc["shards"][0]["tensors"]}
        assert roles["grouped.weight"] == "grouped:4" and roles["head.weight"] == "dense-io", roles

        # Bad inputs.
        bad = os.path.join(tmp, "bad")
        os.mkdir(bad)
        out = os.path.join(bad, "out.safetensors")
        data = open(single, "rb").read()
        cut = os.path.join(bad, "cut.safetensors")
        open(cut, "wb").write(data[: len(data) - 100])
        expect_error(exe, ["pack", cut, "-o", out, "--target", "cudnn-nhwc", *RULES], "truncated", out)
        cut_onnx = os.path.join(bad, "cut.onnx")
        d = open(resnet, "rb").read()
        open(cut_onnx, "wb").write(d[: len(d) // 2])
        expect_error(exe, ["pack", cut_onnx, "-o", out, "--target", "cudnn-nhwc"], "truncated", out)
        expect_error(exe, ["pack", single, "-o", out, "--target", "cudnn-nhwc"],
                     "tensor `features.1.dw.weight`: role is ambiguous", out)
        # A weight used as a convolution filter and as a MatMul operand.
        wt = numpy_helper.from_array(rand((4, 4, 1, 1)), "w")
        g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="c"),
                               helper.make_node("MatMul", ["z", "w"], ["v"], name="m")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 2]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [wt])
        amb = os.path.join(bad, "ambiguous.onnx")
        onnx.save_model(helper.make_model(g), amb)
        line = expect_error(exe, ["pack", amb, "-o", out, "--target", "onednn-avx2"], "role is ambiguous", out)
        assert "Conv node 'c'" in line and "MatMul node 'm'" in line, line
        expect_error(exe, ["pack", single, "-o", out, "--target", "mace"], "unknown profile `mace`", out)
        expect_error(exe, ["pack", single, "-o", out, "--target", "onednn-avx2", "--rule", "x"], "bad rule", out)
        expect_error(exe, ["unpack", single, "-o", out], "no layoutkit metadata", out)
        # A failure in the middle of a pack leaves nothing: int8 Winograd is refused per tensor.
        expect_error(exe, ["pack", resnet, "-o", out, "--target", "mace-gpu", "--winograd", "2", "--dtype", "i8"],
                     "Winograd filters are float", out)
        print("bad inputs: clear errors, exit 2, no output left")
        print(f"model cross-check passed: {checked} packed tensors checked against numpy")


if __name__ == "__main__":
    main()
