# cuDNN's kernel for one pointwise layer (NHWC and NCHW), profiled by ncu between profiler start/stop.
import sys, torch, torch.nn.functional as F
n, c, hw, o = map(int, sys.argv[1:5]); layout = sys.argv[5]
torch.backends.cudnn.benchmark = True
x = torch.randn(n, c, hw, hw, device="cuda", dtype=torch.half)
w = torch.randn(o, c, 1, 1, device="cuda", dtype=torch.half)
if layout == "NHWC":
    x = x.to(memory_format=torch.channels_last); w = w.to(memory_format=torch.channels_last)
for _ in range(5):
    y = F.conv2d(x, w)
torch.cuda.synchronize()
torch.cuda.profiler.start(); y = F.conv2d(x, w); torch.cuda.synchronize(); torch.cuda.profiler.stop()
