"""layoutkit.conv2d on CUDA tensors (torch, and cupy where installed): our kernels in device
memory on the caller's stream, checked against the CPU engines (f32 sums, exact int8,
requantised int8) and against PyTorch's own convolution. Skipped without a CUDA device (run on the GPU machine)."""

import numpy as np
import pytest

import layoutkit as lk

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def cpu_reference(x, w, **kw):
    """The CPU conv2d (f32 numpy operands holding the same values) in f32 NCHW."""
    xf = x.detach().float().cpu().numpy()
    wf = w.detach().float().cpu().numpy()
    return torch.from_numpy(np.asarray(lk.conv2d(xf, wf, **kw)))


def close(got, want, rtol=2e-3, atol=2e-3):
    got = got.float().cpu()
    assert got.shape == want.shape, (got.shape, want.shape)
    err = (got - want).abs()
    assert bool((err <= atol + rtol * want.abs()).all()), f"max error {float(err.max())}"


@pytest.mark.parametrize("c,o,k,stride,pad", [(64, 64, 3, 1, 1), (64, 128, 1, 1, 0), (128, 64, 3, 2, 1),
                                              (32, 96, 3, 1, 1), (3, 64, 7, 2, 3), (37, 20, 3, 1, 1)])
def test_f16_nchw_against_the_cpu_engine(c, o, k, stride, pad):
    g = torch.Generator().manual_seed(c * 1000 + o)
    x = torch.randn(2, c, 14, 14, generator=g).half().cuda()
    w = (torch.randn(o, c, k, k, generator=g) / (c * k * k) ** 0.5).half().cuda()
    bias = torch.randn(o, generator=g)
    got = lk.conv2d(x, w, bias=bias.numpy(), stride=stride, padding=pad, relu=True, out_dtype="f32")
    assert got.is_cuda and got.dtype == torch.float32
    want = cpu_reference(x, w, bias=bias.numpy(), stride=stride, padding=pad, relu=True)
    close(got, want, rtol=1e-4, atol=1e-4)


def test_f16_default_output_is_f16_in_the_input_layout_and_matches_torch():
    x = torch.randn(4, 64, 28, 28, device="cuda", dtype=torch.float16)
    w = torch.randn(128, 64, 3, 3, device="cuda", dtype=torch.float16) / 24
    y = lk.conv2d(x, w, padding=1)
    assert y.dtype == torch.float16 and tuple(y.shape) == (4, 128, 28, 28)
    want = torch.nn.functional.conv2d(x.float(), w.float(), padding=1)
    close(y, want.cpu(), rtol=2e-3, atol=2e-3)


def test_channels_last_read_in_place_and_nhwc_output():
    x = torch.randn(2, 64, 16, 16, device="cuda", dtype=torch.float16)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16) / 24
    cl = x.contiguous(memory_format=torch.channels_last)
    y = lk.conv2d(cl, w, padding=1, input_format="NHWC", out_dtype="f32")
    assert tuple(y.shape) == (2, 16, 16, 64)
    want = cpu_reference(x, w, padding=1)
    close(y.permute(0, 3, 1, 2), want, rtol=1e-4, atol=1e-4)


def test_other_layouts_and_strided_views_are_converted_first():
    x = torch.randn(3, 48, 10, 10, device="cuda", dtype=torch.float16)
    w = torch.randn(40, 48, 3, 3, device="cuda", dtype=torch.float16) / 20
    want = cpu_reference(x[1:], w, padding=1)
    # a slice of a batch (strided), an OHWI filter, NC/32HW32 and kHWC8 activations
    close(lk.conv2d(x[1:], w, padding=1, out_dtype="f32"), want, rtol=1e-4, atol=1e-4)
    w_ohwi = lk.convert(w, "OIHW", "OHWI")
    close(lk.conv2d(x[1:], w_ohwi, padding=1, filter_format="OHWI", out_dtype="f32"), want, rtol=1e-4, atol=1e-4)
    for fmt in ("NC/32HW32", "kHWC8"):
        xf = lk.convert(x[1:], "NCHW", fmt)
        y = lk.conv2d(xf, w, padding=1, input_format=fmt, output_format="NCHW", out_dtype="f32",
                      x_dims="N=2,C=48,H=10,W=10")
        close(y, want, rtol=1e-4, atol=1e-4)


def test_f32_operands_are_rounded_to_f16():
    x = torch.randn(2, 32, 9, 9, device="cuda")
    w = torch.randn(32, 32, 3, 3, device="cuda") / 17
    y = lk.conv2d(x, w, padding=1)
    assert y.dtype == torch.float32
    close(y, cpu_reference(x.half(), w.half(), padding=1), rtol=1e-4, atol=1e-4)


def test_bf16_kernel():
    x = torch.randn(2, 64, 8, 8, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16) / 24
    y = lk.conv2d(x, w, padding=1, out_dtype="f32")
    close(y, cpu_reference(x, w, padding=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmt", ["NHWC", "NC/32HW32"])
def test_int8_is_exact(fmt):
    g = torch.Generator().manual_seed(7)
    x = torch.randint(-128, 128, (2, 64, 12, 12), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (64, 64, 3, 3), generator=g, dtype=torch.int8)
    want = lk.conv2d(x.numpy(), w.numpy(), padding=1)  # CPU: exact int32
    xf = lk.convert(x.cuda(), "NCHW", fmt)
    y = lk.conv2d(xf, w.cuda(), padding=1, input_format=fmt, output_format="NCHW", relu=False)
    assert y.dtype == torch.int32
    assert torch.equal(y.cpu(), torch.from_numpy(np.asarray(want)))


@pytest.mark.parametrize("fmt", ["NHWC", "NC/32HW32"])
def test_int8_requantised_to_int8_equals_the_cpu_engine(fmt):
    g = torch.Generator().manual_seed(11)
    x = torch.randint(-128, 128, (2, 96, 10, 10), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (64, 96, 3, 3), generator=g, dtype=torch.int8)
    scale = (torch.rand(64, generator=g) * 4e-4).numpy()
    bias = (torch.randn(64, generator=g) * 8).numpy()
    want = lk.conv2d(x.numpy(), w.numpy(), padding=1, scale=scale, bias=bias, relu=True, out_dtype=np.int8)
    xf = lk.convert(x.cuda(), "NCHW", fmt)
    y = lk.conv2d(xf, w.cuda(), padding=1, input_format=fmt, output_format="NCHW", scale=scale, bias=bias,
                  relu=True, out_dtype=torch.int8)
    assert y.dtype == torch.int8
    assert torch.equal(y.cpu(), torch.from_numpy(np.asarray(want)))
    with pytest.raises(ValueError, match="scale requantises"):
        lk.conv2d(xf, w.cuda(), padding=1, input_format=fmt, scale=scale)


def test_grouped_and_depthwise_run_the_direct_kernel():
    x = torch.randn(2, 32, 10, 10, device="cuda", dtype=torch.float16)
    for groups, i in ((32, 1), (4, 8)):
        w = torch.randn(32, i, 3, 3, device="cuda", dtype=torch.float16) / 3
        y = lk.conv2d(x, w, padding=1, groups=groups, out_dtype="f32")
        close(y, cpu_reference(x, w, padding=1, groups=groups), rtol=1e-4, atol=1e-4)


def test_queued_on_the_current_stream():
    x = torch.randn(8, 64, 28, 28, device="cuda", dtype=torch.float16)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16) / 24
    want = lk.conv2d(x, w, padding=1, out_dtype="f32")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = lk.conv2d(x, w, padding=1, out_dtype="f32")
        y2 = y * 2  # queued after the convolution on the same stream
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(y2, want * 2)


def test_small_grids_split_k_on_two_streams_at_once():
    """Batch 1 on 7x7 planes with 512 channels: the Hopper kernel divides K among blocks and a
    second kernel adds the splits (each stream has its own workspace); the result equals the
    CPU engine's on both streams, run concurrently, and twice in a row on one."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 512, 7, 7, generator=g).half().cuda()
    w = (torch.randn(512, 512, 3, 3, generator=g) / 68).half().cuda()
    bias = torch.randn(512, generator=g)
    want = cpu_reference(x, w, bias=bias.numpy(), padding=1, relu=True)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = []
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            outs.append([lk.conv2d(x, w, bias=bias.numpy(), padding=1, relu=True, out_dtype="f32")
                         for _ in range(2)])
    for s in streams:
        torch.cuda.current_stream().wait_stream(s)
    for pair in outs:
        for y in pair:
            close(y, want, rtol=1e-4, atol=1e-4)
    assert torch.equal(outs[0][0], outs[1][1]), "the same sums in the same order"


def test_errors():
    x = torch.randn(1, 8, 5, 5, device="cuda", dtype=torch.float16)
    w = torch.randn(4, 8, 3, 3, dtype=torch.float16)
    with pytest.raises(ValueError, match="CUDA device 0 but w is in CPU memory"):
        lk.conv2d(x, w)
    with pytest.raises(ValueError, match="bias has 3 values"):
        lk.conv2d(x, w.cuda(), bias=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        lk.conv2d(x, torch.randn(4, 5, 3, 3, device="cuda", dtype=torch.float16))


def test_cupy_if_installed():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((2, 32, 9, 9)).astype(cupy.float16)
    w = (cupy.random.standard_normal((32, 32, 3, 3)) / 17).astype(cupy.float16)
    y = lk.conv2d(x, w, padding=1, out_dtype="f32")
    assert isinstance(y, cupy.ndarray)
    want = lk.conv2d(cupy.asnumpy(x).astype(np.float32), cupy.asnumpy(w).astype(np.float32), padding=1)
    np.testing.assert_allclose(cupy.asnumpy(y), want, rtol=1e-4, atol=1e-4)


def test_dense_channels_last_operands_are_read_in_place(monkeypatch):
    """A channels_last activation (memory order NHWC) and a channels_last filter (memory order
    OHWI) go to the kernel as they are: no conversion runs."""
    import layoutkit._convert as conv_mod
    x = torch.randn(2, 64, 12, 12, device="cuda", dtype=torch.float16)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16) / 24
    want = lk.conv2d(x, w, padding=1, out_dtype="f32")
    xc = x.contiguous(memory_format=torch.channels_last)
    wc = w.contiguous(memory_format=torch.channels_last)

    def no_conversion(*a, **k):
        raise AssertionError("an operand was converted")
    monkeypatch.setattr(conv_mod, "convert", no_conversion)
    y = lk.conv2d(xc, wc, padding=1, input_format="NHWC", filter_format="OHWI")
    assert y.dtype == torch.float16 and tuple(y.shape) == (2, 12, 12, 64)
    close(y.permute(0, 3, 1, 2), want.cpu(), rtol=2e-3, atol=2e-3)
