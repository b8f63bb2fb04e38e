"""CUDA tensors converted in place (torch, and cupy where it is installed): bit-identical to the
CPU engine, on the caller's stream, out=, strided views, a new process loading kernels from the
disk cache. Skipped without a CUDA device (run on the GPU machine)."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import layoutkit as lk

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

CASES = [
    ("NCHW", "NHWC", (4, 37, 9, 11)),
    ("NHWC", "NCHW", (4, 9, 11, 37)),
    ("NCHW", "NC/32HW32", (2, 70, 7, 7)),
    ("NCHW", "kHWC8", (3, 250, 8, 8)),
    ("OIHW", "OIHW16i16o", (40, 35, 3, 3)),
    ("NHWC", "mace:in_out_channel", (1, 6, 5, 250)),
]


@pytest.mark.parametrize("src,dst,shape", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8])
def test_bit_identical_to_the_cpu_engine(src, dst, shape, dtype):
    x = (torch.randn(shape) * 50).to(dtype)
    want = lk.convert(x, src, dst)  # torch CPU tensor in, torch CPU out
    got = lk.convert(x.cuda(), src, dst)
    assert got.is_cuda and got.dtype == dtype and tuple(got.shape) == tuple(want.shape)
    assert torch.equal(got.cpu().view(torch.uint8) if dtype != torch.int8 else got.cpu(),
                       want.view(torch.uint8) if dtype != torch.int8 else want)


def test_casts_match_the_cpu_engine():
    x = torch.randn(2, 70, 7, 7)
    for kw in ({"dtype": torch.float16}, {"dtype": "i8", "scale": 0.02, "zero_point": -3},
               {"dtype": torch.bfloat16}):
        want = lk.convert(x, "NCHW", "NC/32HW32", **kw)
        got = lk.convert(x.cuda(), "NCHW", "NC/32HW32", **kw)
        assert torch.equal(got.cpu(), want), kw


def test_strided_cuda_views_and_channels_last():
    big = torch.randn(6, 40, 12, 12, device="cuda")
    for view, src in [(big[1:4], "NCHW"), (big[:, 3:30], "NCHW"), (big[:, :, 2:9, ::2], "NCHW")]:
        got = lk.convert(view, src, "NHWC")
        assert torch.equal(got, view.permute(0, 2, 3, 1).contiguous())
    cl = big.contiguous(memory_format=torch.channels_last)
    assert torch.equal(lk.convert(cl, "NHWC", "NCHW"), big)
    q = lk.convert(cl, "NHWC", "NC/32HW32", dtype=torch.int8, scale=0.05)
    assert torch.equal(q.cpu(), lk.convert(big.cpu(), "NCHW", "NC/32HW32", dtype=torch.int8, scale=0.05))


def test_out_and_its_checks():
    x = torch.randn(2, 3, 4, 5, device="cuda")
    out = torch.empty(2, 4, 5, 3, device="cuda")
    assert lk.convert(x, "NCHW", "NHWC", out=out) is out
    assert torch.equal(out, x.permute(0, 2, 3, 1))
    with pytest.raises(ValueError, match="CPU memory"):
        lk.convert(x, "NCHW", "NHWC", out=torch.empty(2, 4, 5, 3))
    with pytest.raises(ValueError, match="row-major"):
        lk.convert(x, "NCHW", "NHWC", out=torch.empty(2, 5, 4, 3, device="cuda").transpose(1, 2))


def test_side_stream_then_wait_stream():
    """Queued on a side stream, read on the default stream after wait_stream: correct, and the
    call itself does not wait for the GPU."""
    x = torch.randn(64, 256, 64, 64, device="cuda")
    want = x.permute(0, 2, 3, 1).contiguous()
    lk.convert(x, "NCHW", "NHWC")  # compile (or load) the kernels before timing the call
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # keep the side stream busy
        t0 = time.perf_counter()
        y = lk.convert(x, "NCHW", "NHWC")
        call = time.perf_counter() - t0
        done_at_return = side.query()
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(y, want)
    assert not done_at_return, "the call waited for the side stream's work"
    assert call < 0.05


def test_a_new_process_loads_kernels_from_the_disk_cache(tmp_path):
    env = dict(os.environ, LAYOUTKIT_CACHE_DIR=str(tmp_path))
    code = ("import time, torch, layoutkit as lk; x = torch.randn(2, 20, 7, 7, device='cuda'); "
            "torch.cuda.synchronize(); t = time.perf_counter(); lk.convert(x, 'NCHW', 'kHWC8'); "
            "torch.cuda.synchronize(); print(time.perf_counter() - t)")
    first = float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                 text=True).stdout)
    entries = list((tmp_path / "kernels").iterdir())
    assert entries, "nothing was cached"
    second = float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                  text=True).stdout)
    print(f"first conversion: {first * 1e3:.1f} ms compiling, {second * 1e3:.1f} ms from the disk cache")
    assert second < first
    # A corrupt entry is ignored and rebuilt.
    for e in entries:
        e.write_bytes(b"garbage")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    assert any(e.read_bytes() != b"garbage" for e in (tmp_path / "kernels").iterdir())


def test_cupy_arrays_if_installed():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((2, 37, 5, 5), dtype=cupy.float32)
    y = lk.convert(x, "NCHW", "NHWC")
    assert isinstance(y, cupy.ndarray)
    assert cupy.array_equal(y, x.transpose(0, 2, 3, 1))


def test_jax_cuda_arrays_if_installed():
    jax = pytest.importorskip("jax")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("jax has no GPU backend here")
    import jax.numpy as jnp
    x = jax.device_put(jnp.arange(2 * 37 * 5 * 5, dtype=jnp.float32).reshape(2, 37, 5, 5), gpus[0])
    y = lk.convert(x, "NCHW", "NHWC")
    assert isinstance(y, type(x)) and y.shape == (2, 5, 5, 37)
    assert bool((y == jnp.transpose(x, (0, 2, 3, 1))).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8])
def test_contiguous_regions_with_aligned_and_misaligned_buffers(dtype):
    """Plans whose regions are plain contiguous copies (one channel, 1x1 planes) run 16-byte
    vector kernels; a view starting mid-vector takes the same kernel's element path."""
    for shape, src, dst in [((64, 1, 32, 32), "NCHW", "NHWC"), ((512, 64, 1, 1), "NCHW", "NHWC"),
                            ((64, 32, 32, 1), "NHWC", "NCHW")]:
        n = int(np.prod(shape))
        flat = (torch.randn(n + 1) * 40).to(dtype)
        flat_gpu = flat.cuda()
        for start in (0, 1):
            x = flat[start:start + n].view(shape)
            xg = flat_gpu[start:start + n].view(shape)  # device memory starting mid-vector when 1
            want = lk.convert(x, src, dst)
            got = lk.convert(xg, src, dst)
            assert torch.equal(got.cpu(), want), (shape, start, dtype)
            out = torch.empty(n + 1, dtype=dtype, device="cuda")[1:].view(want.shape)
            lk.convert(xg, src, dst, out=out)
            assert torch.equal(out.cpu(), want), ("out misaligned", shape, start, dtype)


def test_contiguous_regions_with_casts_aligned_and_misaligned():
    """Cast copies of contiguous regions move vectors (four floats in, four halves out) when
    both buffers are aligned, elements otherwise; both equal the CPU engine."""
    shape = (256, 1, 16, 16)
    n = int(np.prod(shape))
    flat = torch.randn(n + 1) * 3
    flat_gpu = flat.cuda()
    for kw in ({"dtype": torch.float16}, {"dtype": torch.bfloat16},
               {"dtype": "i8", "scale": 0.05, "zero_point": 2}):
        for start in (0, 1):
            x = flat[start:start + n].view(shape)
            xg = flat_gpu[start:start + n].view(shape)
            want = lk.convert(x, "NCHW", "NHWC", **kw)
            got = lk.convert(xg, "NCHW", "NHWC", **kw)
            assert torch.equal(got.cpu(), want), (kw, start)
    back = lk.convert(flat_gpu[1:1 + n].view(shape).half(), "NCHW", "NHWC", dtype=torch.float32)
    assert torch.equal(back.cpu(), lk.convert(flat[1:1 + n].view(shape).half(), "NCHW", "NHWC",
                                                   dtype=torch.float32))


MID_VECTOR_CASES = [
    # Tile, word, step and gather kernels, with and without a cast: each reads or writes 16 bytes
    # at a time on aligned buffers and takes kernels made for the view's shift otherwise.
    ("NCHW", "NHWC", (2, 136, 12, 20), torch.float16, None),
    ("NHWC", "NCHW", (2, 10, 12, 200), torch.float16, None),
    ("NCHW", "NHWC", (2, 200, 14, 14), torch.int8, None),
    ("NCHW", "NC/32HW32", (2, 96, 14, 14), torch.int8, None),
    ("NCHW", "NC/32HW32", (2, 250, 7, 7), torch.float32, torch.float16),
    ("NCHW", "kHWC8", (2, 4, 64, 64), torch.float16, None),
    ("OIHW", "OIHW16i16o", (37, 3, 7, 7), torch.float16, None),
    ("OIHW", "OIHW16i16o", (32, 48, 3, 3), torch.float16, None),
    ("NHWC", "mace:in_out_height", (2, 14, 14, 250), torch.float16, None),
]


@pytest.mark.parametrize("src,dst,shape,dtype,to", MID_VECTOR_CASES)
def test_views_starting_mid_vector(src, dst, shape, dtype, to):
    """A source, an `out=`, or both starting one element past a 16-byte boundary (`x[1:]`-style
    views of one buffer) give the CPU engine's result, bit for bit."""
    kw = {} if to is None else {"dtype": to}
    n = int(np.prod(shape))
    for src_start, out_start in [(1, 0), (0, 1), (1, 1)]:
        flat = torch.zeros(n + 1, dtype=dtype)
        flat[src_start:src_start + n] = (torch.randn(n) * 40).to(dtype)
        x = flat[src_start:src_start + n].view(shape)
        want = lk.convert(x, src, dst, **kw)
        xg = flat.cuda()[src_start:src_start + n].view(shape)
        m = want.numel()
        out = torch.empty(m + 1, dtype=want.dtype, device="cuda")[out_start:out_start + m]
        got = lk.convert(xg, src, dst, out=out.view(want.shape), **kw)
        torch.cuda.synchronize()
        assert torch.equal(got.cpu(), want), (src_start, out_start)
