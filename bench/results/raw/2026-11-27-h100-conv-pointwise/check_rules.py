# Problems the trial rules move, by `layoutkit conv --device cuda` with the trial's variables,
# against torch's f32 convolution of the same f16 values (NHWC in and out).
import os, subprocess, sys, numpy as np, torch, tempfile
lk = sys.argv[1]
d = tempfile.mkdtemp()
rng = np.random.default_rng(7)
for env, (n, c, hw, o) in [("LK_R1", (64, 960, 7, 160)), ("LK_R2", (8, 32, 112, 16)),
                           ("LK_R2", (4, 24, 56, 144)), ("LK_R3", (32, 16, 112, 96)),
                           ("LK_R3", (16, 24, 56, 144)), ("LK_R1", (64, 200, 7, 136))]:
    x = rng.standard_normal((n, hw, hw, c)).astype(np.float16)
    w = (rng.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float16)
    np.save(f"{d}/x.npy", x); np.save(f"{d}/w.npy", w)
    e = dict(os.environ, LK_R1="1", LK_R2="1", LK_R3="1" if env == "LK_R3" else "0")
    subprocess.run([lk, "conv", f"{d}/x.npy", f"{d}/w.npy", f"{d}/y.npy", "--device", "cuda",
                    "--input-format", "NHWC", "--output-format", "NHWC"], check=True, capture_output=True, env=e)
    y = np.load(f"{d}/y.npy").astype(np.float32)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2).cuda(),
                                     torch.from_numpy(w.astype(np.float32)).permute(0, 1, 2, 3).cuda())
    ref = ref.permute(0, 2, 3, 1).cpu().numpy()
    err = np.abs(y - ref).max(); scale = np.abs(ref).max()
    print(f"{env} N={n} C={c} {hw}x{hw} O={o}: max |ours - torch f32| = {err:.4g} (max |y| {scale:.3g})")
    assert err <= 2e-3 * max(scale, 1.0), "mismatch"
print("ok")
