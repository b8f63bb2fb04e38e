# The two problems whose tile the split rule changed, run by `layoutkit conv --device cuda`
# (f16, NHWC in and out, f32 sums) against torch's f32 convolution of the same f16 values.
import subprocess, sys, numpy as np, torch, os, tempfile
lk = sys.argv[1]
d = tempfile.mkdtemp()
rng = np.random.default_rng(7)
for (n, c, hw, o, k, pad) in [(32, 2048, 7, 512, 1, 0), (2, 256, 28, 512, 3, 1)]:
    x = rng.standard_normal((n, hw, hw, c)).astype(np.float16)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float16)
    np.save(f"{d}/x.npy", x); np.save(f"{d}/w.npy", w)
    subprocess.run([lk, "conv", f"{d}/x.npy", f"{d}/w.npy", f"{d}/y.npy", "--device", "cuda",
                    "--input-format", "NHWC", "--output-format", "NHWC", "--padding", str(pad)],
                   check=True)
    y = np.load(f"{d}/y.npy").astype(np.float32)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2).cuda(),
                                     torch.from_numpy(w.astype(np.float32)).cuda(), padding=pad)
    ref = ref.permute(0, 2, 3, 1).cpu().numpy()
    err = np.abs(y - ref).max(); scale = np.abs(ref).max()
    print(f"N={n} C={c} {hw}x{hw} O={o} {k}x{k}: max |ours - torch f32| = {err:.4g} (max |y| {scale:.3g})")
    assert err <= 2e-3 * max(scale, 1.0), "mismatch"
print("ok")
