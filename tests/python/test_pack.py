"""layoutkit.pack / pack_shard / write_packed_index / unpack on checkpoints written in the test
with the `safetensors` package (and an ONNX model with `onnx`): every packed tensor equals
layoutkit.convert of its source, the Python reports equal `layoutkit --json pack`, a checkpoint
packed shard by shard equals one packed whole, round trips are bit-exact, errors are clear."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import layoutkit as lk

st = pytest.importorskip("safetensors.numpy")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tensors(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "conv.weight": rng.standard_normal((32, 16, 3, 3), dtype=np.float32),
        "conv.bias": rng.standard_normal(32, dtype=np.float32),
        "dw.weight": rng.standard_normal((32, 1, 3, 3), dtype=np.float32),
        "fc.weight": rng.standard_normal((10, 32), dtype=np.float32),
        "fc.bias": rng.standard_normal(10, dtype=np.float32),
    }


RULES = {"dw.weight": "depthwise"}


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "model.safetensors"
    st.save_file(tensors(), str(path))
    return path


def sharded(tmp_path, shards=3):
    """A sharded checkpoint: tensors spread over `shards` files and an index."""
    ts = tensors(1)
    names = sorted(ts)
    weight_map = {}
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: ts[n] for i, n in enumerate(names) if i % shards == k}
        st.save_file(part, str(tmp_path / file))
        weight_map.update({n: file for n in part})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return index, ts


def test_pack_onednn_every_tensor_equals_convert(checkpoint, tmp_path):
    out = tmp_path / "packed.safetensors"
    report = lk.pack(checkpoint, out, "onednn-avx512", rules=RULES)
    assert report["profile"] == "onednn-avx512" and not report["dry_run"]
    rows = {t["name"]: t for t in report["shards"][0]["tensors"]}
    packed = st.load_file(str(out))
    src = tensors()
    conv = rows["conv.weight"]
    assert conv["role"] == "conv" or "conv" in conv["role"]
    want = lk.convert(src["conv.weight"], conv["source_layout"], conv["target_layout"],
                      dims=conv["dims"])
    np.testing.assert_array_equal(packed["conv.weight"].reshape(-1), want.reshape(-1))
    assert list(packed["conv.weight"].shape) == conv["dst_shape"]
    dw = rows["dw.weight"]
    assert dw["origin"].startswith("rule")
    want = lk.convert(src["dw.weight"], dw["source_layout"], dw["target_layout"], dims=dw["dims"])
    np.testing.assert_array_equal(packed["dw.weight"].reshape(-1), want.reshape(-1))
    for kept in ("conv.bias", "fc.bias"):
        np.testing.assert_array_equal(packed[kept], src[kept])


def test_report_equals_the_command_line(checkpoint, tmp_path):
    from conftest import layoutkit_binary
    exe = layoutkit_binary()
    py = lk.pack(checkpoint, tmp_path / "a.safetensors", "mace-gpu", dtype="f16", rules=RULES,
                 dry_run=True)
    cli = json.loads(subprocess.run(
        [exe, "--json", "pack", str(checkpoint), "-o", str(tmp_path / "a.safetensors"),
         "--target", "mace-gpu", "--dtype", "f16", "--rule", "dw.weight=depthwise", "--dry-run"],
        check=True, capture_output=True, text=True).stdout)
    py.pop("seconds"), cli.pop("seconds")
    assert py == cli
    assert not (tmp_path / "a.safetensors").exists(), "a dry run writes nothing"


def test_unpack_round_trip_is_bit_exact(checkpoint, tmp_path):
    out = tmp_path / "packed.safetensors"
    lk.pack(checkpoint, out, "cudnn-nhwc", rules=RULES, threads=2)
    back = tmp_path / "back.safetensors"
    report = lk.unpack(out, back)
    assert report["files"][0]["tensors"] == 5
    restored = st.load_file(str(back))
    for name, t in tensors().items():
        np.testing.assert_array_equal(restored[name], t)


def test_sharded_checkpoint_packed_shard_by_shard_equals_packed_whole(tmp_path):
    index, _ = sharded(tmp_path)
    whole = tmp_path / "whole"
    report = lk.pack(index, whole, "onednn-avx2", rules=RULES)
    assert len(report["shards"]) == 3 and report["index"]
    parts = tmp_path / "parts"
    parts.mkdir()
    shards = lk.checkpoint_shards(index)
    assert [os.path.basename(s) for s in shards] == [
        f"model-{k:05d}-of-00003.safetensors" for k in (1, 2, 3)]
    for s in shards:
        r = lk.pack_shard(s, parts / os.path.basename(s), "onednn-avx2", rules=RULES)
        assert r["output"] and r["tensors"]
    written = lk.write_packed_index(index, parts)
    assert os.path.basename(written) == "model.safetensors.index.json"
    for s in shards:
        name = os.path.basename(s)
        assert (whole / name).read_bytes() == (parts / name).read_bytes(), name
    assert json.loads((whole / "model.safetensors.index.json").read_text()) == \
        json.loads((parts / "model.safetensors.index.json").read_text())


def test_write_packed_index_refuses_missing_and_mixed_shards(tmp_path):
    index, _ = sharded(tmp_path, shards=2)
    parts = tmp_path / "parts"
    parts.mkdir()
    shards = lk.checkpoint_shards(index)
    lk.pack_shard(shards[0], parts / os.path.basename(shards[0]), "onednn-avx2", rules=RULES)
    with pytest.raises(OSError, match="00002"):
        lk.write_packed_index(index, parts)
    lk.pack_shard(shards[1], parts / os.path.basename(shards[1]), "cudnn-nhwc", rules=RULES)
    with pytest.raises(ValueError, match="packed for"):
        lk.write_packed_index(index, parts)
    assert not (parts / "model.safetensors.index.json").exists()


def test_progress_reaches_the_total(checkpoint, tmp_path):
    seen = []
    lk.pack(checkpoint, tmp_path / "p.safetensors", "onednn-avx512", rules=RULES,
            progress=lambda *a: seen.append(a))
    # One call per tensor, from the worker threads (so not necessarily in order).
    assert sorted(s[0] for s in seen) == [1, 2, 3, 4, 5]
    assert {s[1] for s in seen} == {5}
    assert max(s[2] for s in seen) == seen[0][3] > 0


def test_onnx_roles_come_from_the_graph(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 4, 3, 3), dtype=np.float32)
    dw = rng.standard_normal((8, 1, 3, 3), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["y", "dw"], ["z"], group=8, pads=[1, 1, 1, 1])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8, 8, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(dw, "dw")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    report = lk.pack(path, tmp_path / "m.safetensors", "onednn-avx512")
    rows = {t["name"]: t for t in report["shards"][0]["tensors"]}
    assert rows["w"]["origin"].startswith("graph") and rows["dw"]["origin"].startswith("graph")
    assert rows["dw"]["role"] != rows["w"]["role"]
    packed = st.load_file(str(tmp_path / "m.safetensors"))
    want = lk.convert(dw, rows["dw"]["source_layout"], rows["dw"]["target_layout"],
                      dims=rows["dw"]["dims"])
    np.testing.assert_array_equal(packed["dw"].reshape(-1), want.reshape(-1))


def test_errors_are_clear(checkpoint, tmp_path):
    out = tmp_path / "out.safetensors"
    with pytest.raises(ValueError, match="unknown profile"):
        lk.pack(checkpoint, out, "tensorflow")
    with pytest.raises(ValueError, match="dw.weight=depthwise"):
        lk.pack(checkpoint, out, "onednn-avx512")
    with pytest.raises(OSError, match="cannot read"):
        lk.pack(tmp_path / "missing.safetensors", out, "onednn-avx512")
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(checkpoint.read_bytes()[:200])
    with pytest.raises(ValueError):
        lk.pack(truncated, out, "onednn-avx512", rules=RULES)
    with pytest.raises(TypeError, match="rule"):
        lk.pack(checkpoint, out, "onednn-avx512", rules=[3])
    with pytest.raises(ValueError, match="threads"):
        lk.pack(checkpoint, out, "onednn-avx512", rules=RULES, threads=0)
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".layoutkit-")]


def test_ray_example_packs_a_checkpoint_as_tasks(tmp_path):
    pytest.importorskip("ray")
    index, src = sharded(tmp_path, shards=4)
    out = tmp_path / "packed"
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "ray_pack.py"), str(index), str(out),
         "--target", "onednn-avx512", "--rule", "dw.weight=depthwise", "--num-cpus", "2"],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    whole = tmp_path / "whole"
    lk.pack(index, whole, "onednn-avx512", rules=RULES)
    for name in os.listdir(whole):
        assert (whole / name).read_bytes() == (out / name).read_bytes(), name
