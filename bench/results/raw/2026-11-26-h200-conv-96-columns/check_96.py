# The 96-column rule's problems (MobileNetV2 pw 1x1 32->192 @28 at batch 8, 32, 64, and an
# O = 288 problem) run by `layoutkit conv --device cuda` (f16, NHWC
# in and out, f32 sums) against torch's f32 convolution of the same f16 values.
import subprocess, sys, numpy as np, torch, tempfile
lk = sys.argv[1]
d = tempfile.mkdtemp()
rng = np.random.default_rng(11)
for (n, c, hw, o) in [(8, 32, 28, 192), (32, 32, 28, 192), (64, 32, 28, 192), (3, 40, 13, 288)]:
    x = rng.standard_normal((n, hw, hw, c)).astype(np.float16)
    w = (rng.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float16)
    np.save(f"{d}/x.npy", x); np.save(f"{d}/w.npy", w)
    r = subprocess.run([lk, "conv", f"{d}/x.npy", f"{d}/w.npy", f"{d}/y.npy", "--device", "cuda",
                        "--input-format", "NHWC", "--output-format", "NHWC"], check=True,
                       capture_output=True, text=True)
    y = np.load(f"{d}/y.npy").astype(np.float32)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2).cuda(),
                                     torch.from_numpy(w.astype(np.float32)).cuda())
    ref = ref.permute(0, 2, 3, 1).cpu().numpy()
    err = np.abs(y - ref).max(); scale = np.abs(ref).max()
    print(f"N={n} C={c} {hw}x{hw} O={o} 1x1: max |ours - torch f32| = {err:.4g} (max |y| {scale:.3g}) {r.stderr.strip()[-120:]}")
    assert err <= 2e-3 * max(scale, 1.0), "mismatch"
print("ok")
