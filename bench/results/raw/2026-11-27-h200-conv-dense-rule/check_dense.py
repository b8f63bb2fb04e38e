# Problems with fewer channels than a chunk (the dense K walk), by `layoutkit conv --device
# cuda`, against torch's f32 convolution of the same f16 values.
import subprocess, sys, numpy as np, torch, tempfile
lk = sys.argv[1]
d = tempfile.mkdtemp()
rng = np.random.default_rng(11)
for (n, c, hw, o, k, st, pad, fmt) in [(8, 3, 224, 64, 7, 2, 3, "NHWC"), (8, 3, 224, 64, 7, 2, 3, "NCHW"),
                                       (2, 4, 33, 40, 5, 1, 2, "NHWC"), (3, 1, 30, 24, 3, 2, 1, "NHWC"),
                                       (2, 7, 17, 72, 3, 1, 1, "NCHW"), (8, 3, 224, 32, 3, 2, 1, "NHWC"),
                                       (4, 3, 224, 64, 3, 1, 1, "NHWC"), (2, 3, 31, 16, 5, 1, 2, "NHWC")]:
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float16)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float16)
    xin = x.transpose(0, 2, 3, 1).copy() if fmt == "NHWC" else x
    np.save(f"{d}/x.npy", xin); np.save(f"{d}/w.npy", w)
    subprocess.run([lk, "conv", f"{d}/x.npy", f"{d}/w.npy", f"{d}/y.npy", "--device", "cuda",
                    "--input-format", fmt, "--output-format", fmt, "--stride", str(st),
                    "--padding", str(pad)], check=True, capture_output=True)
    y = np.load(f"{d}/y.npy").astype(np.float32)
    if fmt == "NHWC": y = y.transpose(0, 3, 1, 2)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float32)).cuda(),
                                     torch.from_numpy(w.astype(np.float32)).cuda(), stride=st, padding=pad).cpu().numpy()
    err = np.abs(y - ref).max(); scale = np.abs(ref).max()
    print(f"{fmt} N={n} C={c} {hw}x{hw} O={o} {k}x{k}/{st} pad {pad}: max |ours - torch f32| = {err:.4g} (max |y| {scale:.3g})")
    assert err <= 2e-3 * max(scale, 1.0), "mismatch"
print("ok")
