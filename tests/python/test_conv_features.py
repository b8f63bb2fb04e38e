"""conv2d against a numpy reference; features equal to the command line's."""

import json
import subprocess

import numpy as np
import pytest

import layoutkit as lk
from conftest import layoutkit_binary

rng = np.random.default_rng(3)


def conv_ref(x, w, stride, pad, groups=1):
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        for a in range(kh):
            for b in range(kw):
                patch = xp[:, g * i:(g + 1) * i, a:a + stride * oh:stride, b:b + stride * ow:stride]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, a, b])
    return y


@pytest.mark.parametrize("stride,pad,groups", [(1, 1, 1), (2, 0, 1), (1, 1, 4)])
def test_conv2d_matches_numpy(stride, pad, groups):
    x = rng.standard_normal((2, 8, 9, 9)).astype(np.float32)
    w = rng.standard_normal((12, 8 // groups, 3, 3)).astype(np.float32)
    b = rng.standard_normal(12)
    want = conv_ref(x, w, stride, pad, groups) + b[None, :, None, None]
    y = lk.conv2d(x, w, bias=b, stride=stride, padding=pad, groups=groups)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    # Any layouts in and out: NHWC activations, OHWI filters, NCHW8c output with ReLU.
    yn = lk.conv2d(lk.convert(x, "NCHW", "NHWC"), lk.convert(w, "OIHW", "OHWI"), bias=b, stride=stride,
                   padding=pad, groups=groups, relu=True, input_format="NHWC", filter_format="OHWI",
                   output_format="NCHW8c")
    back = lk.convert(yn, "NCHW8c", "NCHW", dims={"N": 2, "C": 12, "H": want.shape[2], "W": want.shape[3]})
    np.testing.assert_allclose(back, np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def test_conv2d_int8_is_exact():
    x = rng.integers(-128, 128, (1, 5, 6, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (3, 5, 3, 3), dtype=np.int8)
    y = lk.conv2d(x, w, padding=1)
    assert y.dtype == np.int32
    assert np.array_equal(y, conv_ref(x, w, 1, 1).astype(np.int64))


def test_conv2d_int8_requantised_to_int8():
    x = rng.integers(-128, 128, (2, 7, 6, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (5, 7, 3, 3), dtype=np.int8)
    scale = np.array([0.002, -0.0013, 0.0625, 1.5e-4, 0.004], np.float32)
    bias = np.array([3.0, -2.5, 0.5, 0.0, 10.0], np.float32)
    y = lk.conv2d(x, w, padding=1, scale=scale, bias=bias, relu=True, out_dtype=np.int8)
    assert y.dtype == np.int8
    acc = conv_ref(x, w, 1, 1).astype(np.int64)
    v = acc * scale.astype(np.float64)[None, :, None, None] + bias.astype(np.float64)[None, :, None, None]
    want = np.clip(np.rint(np.maximum(v, 0.0)), -128, 127).astype(np.int8)  # rint: half to even
    assert np.array_equal(y, want)
    assert (y == 127).any(), "some outputs saturate"
    with pytest.raises(ValueError, match="scale has 2 values"):
        lk.conv2d(x, w, padding=1, scale=[1.0, 2.0], out_dtype=np.int8)


def test_conv2d_errors():
    x = np.zeros((1, 8, 5, 5), np.float32)
    with pytest.raises(ValueError, match="conv2d"):
        lk.conv2d(x, np.zeros((4, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match="stride"):
        lk.conv2d(x, np.zeros((4, 8, 3, 3), np.float32), stride=(1, 2, 3))


IR = """for (i, 0, 64) {
  for (j, 0, 32) {
    for (k, 0, 16) {
      C[i * 32 + j] = C[i * 32 + j] + A[i * 16 + k] * B[k * 32 + j]
    }
  }
}
"""


def cli(*args):
    return subprocess.run([layoutkit_binary(), "features", "-", *args], input=IR, check=True,
                          capture_output=True, text=True).stdout


@pytest.mark.parametrize("take_log", [False, True])
def test_features_equal_the_command_line(take_log):
    args = ["--json"] + (["--take-log"] if take_log else [])
    assert lk.features(IR, take_log=take_log) == json.loads(cli(*args))


def test_flat_names_and_curve_equal_the_command_line():
    flat = lk.features_flat(IR)
    assert flat.dtype == np.float32
    assert np.array_equal(flat, np.array(json.loads(cli("--flatten", "--take-log", "--json")), np.float32))
    assert lk.features_names(IR) == json.loads(cli("--names", "--json"))
    curve = lk.features_curve(IR, sample_n=10)
    assert np.array_equal(curve, np.array(json.loads(cli("--curve", "--sample-n", "10", "--json")), np.float32))
    with pytest.raises(ValueError):
        lk.features("for (i, 0, ) {")


def test_cuda_nchw_in_place_switch(monkeypatch):
    """LAYOUTKIT_CONV_NCHW_FOOTPRINT decides whether NCHW is read in place (the Hopper footprint
    kernel) or converted to NHWC first, as the rule would on a Hopper GPU (planning only)."""
    from layoutkit import _native
    conv = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    x = ("NCHW", [2, 64, 14, 14], [12544, 196, 14, 1], "f16")
    w = ("OIHW", [32, 64, 3, 3], [576, 9, 3, 1], "f16")
    monkeypatch.setenv("LAYOUTKIT_CONV_NCHW_FOOTPRINT", "1")
    assert _native.conv2d_cuda_kernel(x, w, bias=True, relu=False, out_dtype="f16", **conv) == \
        ("NCHW", "f16", "f16", "N=2,C=64,H=14,W=14", "N=2,C=32,H=14,W=14", "NCHW")
    # padding wider than the filter: the footprint kernel does not take it, so NHWC as before
    wide = dict(conv, padding=(3, 3))
    assert _native.conv2d_cuda_kernel(x, w, bias=True, relu=False, **wide)[0] == "NHWC"
    monkeypatch.setenv("LAYOUTKIT_CONV_NCHW_FOOTPRINT", "0")
    assert _native.conv2d_cuda_kernel(x, w, bias=True, relu=False, **conv)[0] == "NHWC"


def test_cuda_kernel_choice_rules():
    """What the CUDA conv2d path asks of its operands (planning only: no GPU needed)."""
    from layoutkit import _native
    conv = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    x = ("NCHW", [2, 64, 14, 14], [12544, 196, 14, 1], "f16")
    w = ("OIHW", [32, 64, 3, 3], [576, 9, 3, 1], "f16")
    # f16 NCHW with C a multiple of 32 is planned through NHWC (the tensor-core kernels read
    # NHWC 2-5x faster) and the kernel writes NCHW itself; the output is f16 when asked, else f32
    assert _native.conv2d_cuda_kernel(x, w, bias=True, relu=False, out_dtype="f16", **conv) == \
        ("NHWC", "f16", "f16", "N=2,C=64,H=14,W=14", "N=2,C=32,H=14,W=14", "NCHW")
    # NHWC activations with an NCHW output asked: written NCHW; NHWC asked: NHWC
    xh = ("NHWC", [2, 14, 14, 64], [12544, 896, 64, 1], "f16")
    assert _native.conv2d_cuda_kernel(xh, w, bias=False, relu=False, output_format="NCHW", **conv)[5] == "NCHW"
    assert _native.conv2d_cuda_kernel(xh, w, bias=False, relu=False, **conv)[5] == "NHWC"
    # an output layout no kernel writes (kHWC8) stays in the kernel's input layout
    assert _native.conv2d_cuda_kernel(xh, w, bias=False, relu=False, output_format="kHWC8", **conv)[5] == "NHWC"
    # where only the direct kernel applies (C = 3, groups), NCHW is read in place
    x3 = ("NCHW", [1, 3, 14, 14], [588, 196, 14, 1], "f16")
    w3 = ("OIHW", [8, 3, 3, 3], [27, 9, 3, 1], "f16")
    assert _native.conv2d_cuda_kernel(x3, w3, bias=False, relu=False, **conv)[0] == "NCHW"
    assert _native.conv2d_cuda_kernel(x, w, bias=False, relu=True, **conv)[2] == "f32"
    # kHWC8 is not a kernel layout: NHWC; f32 operands go to the f16 kernel
    xk = ("kHWC8", [2, 14, 14, 8, 8], [12544, 896, 64, 8, 1], "f32")
    assert _native.conv2d_cuda_kernel(xk, w, bias=False, relu=False, **conv)[:3] == ("NHWC", "f16", "f32")
    # int8 without a bias: the int8 kernel, never in NCHW; with a bias: f16
    xi = ("NCHW", [2, 64, 14, 14], [12544, 196, 14, 1], "i8")
    wi = ("OIHW", [32, 64, 3, 3], [576, 9, 3, 1], "i8")
    assert _native.conv2d_cuda_kernel(xi, wi, bias=False, relu=False, **conv)[:3] == ("NHWC", "i8", "i32")
    # ... and writes the layout it reads (the i32 output is converted after)
    assert _native.conv2d_cuda_kernel(xi, wi, bias=False, relu=False, **conv)[5] == "NHWC"
    assert _native.conv2d_cuda_kernel(xi, wi, bias=True, relu=False, **conv)[:3] == ("NHWC", "f16", "f32")
    # ... unless requantised to int8 (bias allowed): the int8 kernel writes int8
    assert _native.conv2d_cuda_kernel(xi, wi, bias=True, relu=False, out_dtype="i8",
                                      **conv)[:3] == ("NHWC", "i8", "i8")
    # padded blocked activations: the true C from x_dims
    xp = ("NC/32HW32", [2, 2, 14, 14, 32], [12544, 6272, 448, 32, 1], "f16")
    wp = ("OIHW", [32, 48, 3, 3], [432, 9, 3, 1], "f16")
    with pytest.raises(ValueError, match="64"):
        _native.conv2d_cuda_kernel(xp, wp, bias=False, relu=False, **conv)
    assert _native.conv2d_cuda_kernel(xp, wp, bias=False, relu=False, x_dims="N=2,C=48,H=14,W=14",
                                      **conv)[:4] == ("NC/32HW32", "f16", "f32", "N=2,C=48,H=14,W=14")
    with pytest.raises(ValueError):
        _native.conv2d_cuda_kernel(x, ("OIHW", [32, 63, 3, 3], [567, 9, 3, 1], "f16"), bias=False,
                                   relu=False, **conv)


def test_conv2d_x_dims_reads_padded_blocked_activations():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 48, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 48, 3, 3)).astype(np.float32)
    want = lk.conv2d(x, w, padding=1)
    xb = lk.convert(x, "NCHW", "NC/32HW32")  # 48 channels stored as 64
    got = lk.conv2d(xb, w, padding=1, input_format="NC/32HW32", output_format="NCHW", x_dims="N=2,C=48,H=6,W=6")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="C / groups"):
        lk.conv2d(xb, w, padding=1, input_format="NC/32HW32")
