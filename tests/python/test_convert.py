"""Conversions of numpy arrays against numpy references: every family, all dtypes, tails and
padding, strided inputs, out=, threads, errors, the GIL released."""

import threading

import numpy as np
import pytest

import layoutkit as lk

rng = np.random.default_rng(7)


def ref_blocked(x, block, fill=0):
    """NCHW -> NCHW<block>c with padding."""
    n, c, h, w = x.shape
    cb = -(-c // block)
    p = np.full((n, cb * block, h, w), fill, x.dtype)
    p[:, :c] = x
    return np.ascontiguousarray(p.reshape(n, cb, block, h, w).transpose(0, 1, 3, 4, 2))


def ref_khwc8(x, fill=0):
    n, c, h, w = x.shape
    cb = -(-c // 8)
    p = np.full((n, cb * 8, h, w), fill, x.dtype)
    p[:, :c] = x
    return np.ascontiguousarray(p.reshape(n, cb, 8, h, w).transpose(0, 3, 4, 1, 2))


def ref_oihw16i16o(w):
    o, i, kh, kw = w.shape
    ob, ib = -(-o // 16), -(-i // 16)
    p = np.zeros((ob * 16, ib * 16, kh, kw), w.dtype)
    p[:o, :i] = w
    return np.ascontiguousarray(p.reshape(ob, 16, ib, 16, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def data(shape, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int32]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 37, 3, 4), (3, 64, 9, 1)])
def test_every_family_against_numpy(dtype, shape):
    x = data(shape, dtype)
    nhwc = x.transpose(0, 2, 3, 1)
    cases = {
        "NHWC": nhwc, "nhwc": nhwc, "channels_last": nhwc, "kHWC": nhwc,
        "NC/32HW32": ref_blocked(x, 32), "kCHW32": ref_blocked(x, 32), "nChw16c": ref_blocked(x, 16),
        "NCHW4c": ref_blocked(x, 4), "kHWC8": ref_khwc8(x), "NCHW": x, "contiguous": x,
    }
    for name, want in cases.items():
        got = lk.convert(x, "NCHW", name)
        assert got.dtype == x.dtype and got.shape == want.shape, name
        assert np.array_equal(got, want), name
        back = lk.convert(got, name, "NCHW", dims={"N": shape[0], "C": shape[1], "H": shape[2], "W": shape[3]})
        assert np.array_equal(back, x), name


def test_filters_and_fill():
    w = data((20, 35, 3, 3), np.float32)
    assert np.array_equal(lk.convert(w, "OIHW", "OIHW16i16o"), ref_oihw16i16o(w))
    assert np.array_equal(lk.convert(w, "OIHW", "OIhw16i16o"), ref_oihw16i16o(w))
    assert np.array_equal(lk.convert(w, "OIHW", "OHWI"), w.transpose(0, 2, 3, 1))
    x = data((1, 3, 2, 2), np.float32)
    assert np.array_equal(lk.convert(x, "NCHW", "kHWC8", fill=-1.5), ref_khwc8(x, -1.5))


def test_mace_image_round_trip():
    x = data((1, 6, 5, 250), np.float32)
    img = lk.convert(x, "NHWC", "mace:in_out_channel")
    d = lk.Layout("mace:in_out_channel").describe("N=1,H=6,W=5,C=250")
    assert list(img.shape) == d["physical_shape"]
    back = lk.convert(img, "mace:in_out_channel", "NHWC", dims="N=1,H=6,W=5,C=250")
    assert np.array_equal(back, x)


def test_casts():
    x = data((2, 17, 4, 4), np.float32)
    h = lk.convert(x, "NCHW", "NHWC", dtype="f16")
    assert h.dtype == np.float16 and np.array_equal(h, x.transpose(0, 2, 3, 1).astype(np.float16))
    q = lk.convert(x, "NCHW", "NC/32HW32", dtype=np.int8, scale=0.05, zero_point=3)
    want = np.clip(np.rint(x / np.float32(0.05)) + 3, -128, 127).astype(np.int8)
    assert np.array_equal(q, ref_blocked(want, 32))
    ml = pytest.importorskip("ml_dtypes")
    b = lk.convert(x, "NCHW", "NHWC", dtype=ml.bfloat16)
    assert b.dtype == ml.bfloat16
    assert np.array_equal(b, x.transpose(0, 2, 3, 1).astype(ml.bfloat16))
    back = lk.convert(b, "NHWC", "NCHW", dtype="f32")
    assert np.array_equal(back, x.astype(ml.bfloat16).astype(np.float32))


def test_strided_inputs_are_read_in_place():
    big = data((6, 10, 9, 11), np.float32)
    cases = [
        (big[1:4], "NCHW"),                      # a slice of a batch (contiguous)
        (big[:, 2:7], "NCHW"),                   # a slice of the channels
        (big[:, :, 1:8:2, ::3], "NCHW"),         # a cropped, subsampled window
    ]
    for x, src in cases:
        assert np.array_equal(lk.convert(x, src, "NHWC"), x.transpose(0, 2, 3, 1))
    # A transposed view is read in memory order: its memory is NCHW.
    t = big.transpose(0, 2, 3, 1)
    assert np.array_equal(lk.convert(t, "NCHW", "NHWC"), np.ascontiguousarray(t))
    # A channels_last-style array (NHWC memory, NCHW shape) is src="NHWC".
    cl = np.ascontiguousarray(big.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    assert np.array_equal(lk.convert(cl, "NHWC", "NCHW"), big)
    ro = big.copy()
    ro.flags.writeable = False
    assert np.array_equal(lk.convert(ro, "NCHW", "NHWC"), big.transpose(0, 2, 3, 1))


def test_out_is_written_and_checked():
    x = data((2, 3, 4, 5), np.float32)
    out = np.empty((2, 4, 5, 3), np.float32)
    assert lk.convert(x, "NCHW", "NHWC", out=out) is out
    assert np.array_equal(out, x.transpose(0, 2, 3, 1))
    sentinel = np.full((2, 4, 5, 3), 7, np.float32)
    bad = [
        (np.empty((2, 4, 5, 4), np.float32), "shape"),
        (np.empty((2, 4, 5, 3), np.float64), "element type"),
        (np.empty((2, 5, 4, 3), np.float32).transpose(0, 2, 1, 3), "row-major"),
    ]
    for o, msg in bad:
        with pytest.raises(ValueError, match=msg):
            lk.convert(x, "NCHW", "NHWC", out=o)
    ro = sentinel.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        lk.convert(x, "NCHW", "NHWC", out=ro)
    # Nothing is written to out= when the call fails.
    with pytest.raises(ValueError):
        lk.convert(x, "NCHW", "NHWC", dims="N=2,C=3,H=4,W=6", out=sentinel)
    assert (sentinel == 7).all()


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_threads_give_the_same_bytes(threads):
    x = data((8, 250, 33, 31), np.float32)
    want = ref_khwc8(x)
    assert np.array_equal(lk.convert(x, "NCHW", "kHWC8", threads=threads), want)
    with pytest.raises(ValueError, match="threads"):
        lk.convert(x, "NCHW", "kHWC8", threads=0)


def test_errors():
    x = data((2, 3, 4, 5), np.float32)
    with pytest.raises(ValueError, match="same axes"):
        lk.convert(x, "NCHW", "OIHW")
    with pytest.raises(ValueError, match="cannot parse format"):
        lk.convert(x, "NCHW", "NH@C")
    with pytest.raises(ValueError, match="shape"):
        lk.convert(x, "NCHW", "NHWC", dims="N=2,C=3,H=4,W=6")
    with pytest.raises(ValueError, match="give the dims"):
        lk.convert(np.zeros((4, 4, 4), np.float32), "mace:in_out_channel", "NHWC")
    with pytest.raises(TypeError, match="numpy array"):
        lk.convert([[1.0]], "NCHW", "NHWC")
    with pytest.raises(TypeError, match="element type"):
        lk.convert(np.zeros((1, 1, 1, 1), np.complex64), "NCHW", "NHWC")
    with pytest.raises(ValueError, match="reversed"):
        lk.convert(x[:, :, ::-1], "NCHW", "NHWC")
    with pytest.raises(ValueError, match="cast"):
        lk.convert(x, "NCHW", "NHWC", dtype="f16", scale=2.0)


def test_the_gil_is_released_while_converting():
    """Two threads converting large tensors at once finish in less time than one after the
    other would if each held the GIL; checked by overlap, not by timing: each thread records
    when it is inside the call, and a third (pure Python) thread must run while they are."""
    x = data((16, 64, 128, 128), np.float32)
    inside = threading.Event()
    ran_meanwhile = []

    def work():
        inside.set()
        for _ in range(3):
            lk.convert(x, "NCHW", "NHWC", threads=1)

    def ticker():
        inside.wait()
        for _ in range(200):
            ran_meanwhile.append(1)

    threads = [threading.Thread(target=work), threading.Thread(target=work), threading.Thread(target=ticker)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ran_meanwhile) == 200


def test_repeated_numpy_calls_take_the_small_array_path_and_stay_exact():
    """The second call with the same shape, strides and type goes through one native call
    (`Conversion.run_numpy`); results equal the first call's and numpy's for fresh data, for a
    strided view with the same shape and for read-only inputs; big-endian arrays are refused."""
    from layoutkit import _convert
    rng = np.random.default_rng(9)
    for _ in range(3):
        x = rng.standard_normal((4, 16, 4, 4)).astype(np.float32)
        np.testing.assert_array_equal(lk.convert(x, "NCHW", "NHWC"), x.transpose(0, 2, 3, 1))
    assert any(k[0] == "NCHW" and k[2] == (4, 16, 4, 4) for k in _convert._numpy_plans)
    big = rng.standard_normal((8, 16, 4, 4)).astype(np.float32)
    view = big[::2]  # same shape, other strides: another plan
    np.testing.assert_array_equal(lk.convert(view, "NCHW", "NHWC"), view.transpose(0, 2, 3, 1))
    ro = x.copy()
    ro.setflags(write=False)
    np.testing.assert_array_equal(lk.convert(ro, "NCHW", "NHWC"), x.transpose(0, 2, 3, 1))
    be = x.astype(">f4")  # other byte order: refused, on every call, not read as garbage
    for _ in range(2):
        with pytest.raises(ValueError, match="byte order"):
            lk.convert(be, "NCHW", "NHWC")
    h = x.astype(np.float16)
    for _ in range(2):
        np.testing.assert_array_equal(lk.convert(h, "NCHW", "kHWC8", dtype="f32"),
                                      lk.convert(h.astype(np.float32), "NCHW", "kHWC8"))


def test_run_numpy_refuses_arrays_the_plan_was_not_made_for():
    from layoutkit import _native
    x = np.zeros((2, 3, 4, 5), np.float32)
    plan = _native.prepare("NCHW", "NHWC", [2, 3, 4, 5], [60, 20, 5, 1], "f32")
    good = np.empty((2, 4, 5, 3), np.float32)
    assert plan.run_numpy(x, good, 1)
    for bad_x, bad_y in [
        (np.zeros((2, 3, 4, 6), np.float32), good),              # other shape
        (np.zeros((2, 3, 4, 5), np.float64), good),              # other type
        (np.zeros((2, 3, 5, 4), np.float32).transpose(0, 1, 3, 2), good),  # other strides
        (x, np.empty((2, 4, 5, 3), np.float16)),                 # output type
        (x, np.empty((2, 5, 4, 3), np.float32).transpose(0, 2, 1, 3)),  # output not row-major
        (x, x),                                                  # output overlaps input
    ]:
        assert not plan.run_numpy(bad_x, bad_y, 1)
    frozen = np.empty((2, 4, 5, 3), np.float32)
    frozen.setflags(write=False)
    assert not plan.run_numpy(x, frozen, 1)
