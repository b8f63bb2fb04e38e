# Problems the one-wave 64 x 128 tile now runs (f16, NHWC in and out, f32 sums), by
# `layoutkit conv --device cuda`, against torch's f32 convolution of the same f16 values; the
# kernel `conv bench` names for each is printed by the caller.
import subprocess, sys, numpy as np, torch, tempfile
lk = sys.argv[1]
d = tempfile.mkdtemp()
rng = np.random.default_rng(5)
for (n, c, hw, o, k, st, pad) in [(32, 2048, 7, 512, 1, 1, 0), (1, 256, 56, 256, 3, 1, 1),
                                  (8, 128, 56, 128, 3, 2, 1), (8, 1024, 14, 2048, 1, 2, 0),
                                  (16, 256, 28, 256, 3, 2, 1)]:
    x = rng.standard_normal((n, hw, hw, c)).astype(np.float16)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float16)
    np.save(f"{d}/x.npy", x); np.save(f"{d}/w.npy", w)
    subprocess.run([lk, "conv", f"{d}/x.npy", f"{d}/w.npy", f"{d}/y.npy", "--device", "cuda",
                    "--input-format", "NHWC", "--output-format", "NHWC", "--stride", str(st),
                    "--padding", str(pad)], check=True, capture_output=True)
    y = np.load(f"{d}/y.npy").astype(np.float32)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2).cuda(),
                                     torch.from_numpy(w.astype(np.float32)).cuda(), stride=st, padding=pad)
    ref = ref.permute(0, 2, 3, 1).cpu().numpy()
    err = np.abs(y - ref).max(); scale = np.abs(ref).max()
    print(f"N={n} C={c} {hw}x{hw} O={o} {k}x{k}/{st} pad {pad}: max |ours - torch f32| = {err:.4g} (max |y| {scale:.3g})")
    assert err <= 2e-3 * max(scale, 1.0), "mismatch"
print("ok")
