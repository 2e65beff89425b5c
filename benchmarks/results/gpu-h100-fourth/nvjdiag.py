"""Why is hdmlp's nvJPEG path slower than torchvision's in the DeviceDecoder pipeline? Supply only."""
import glob, sys, time, collections
import numpy as np, torch
import hdmlp.transforms as T
import hdmlp.device_decode as dd
from hdmlp.nvjpeg import NvjpegDecoder

root = sys.argv[1]
files = sorted(glob.glob(f"{root}/*/*.JPEG"))[:2048]
data = [torch.from_numpy(np.fromfile(f, dtype=np.uint8)) for f in files]
dev = torch.device("cuda")
specs = T.pipeline_specs([T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToUint8()])
chain = dd.plan_device_decode(specs, 0.0)
labels = torch.zeros(256, dtype=torch.int64)

class Timed:
    def __init__(self, fn, checks=None):
        self.fn, self.t, self.n = fn, 0.0, 0
        if checks is not None:
            self.checks_files = checks
    def __call__(self, s, d):
        t = time.perf_counter(); out = self.fn(s, d); self.t += time.perf_counter() - t; self.n += 1
        return out

def flat_tv(s, d):
    out = dd._torchvision_decode(s, d)
    flat = torch.cat([o.reshape(-1) for o in out]); res, at = [], 0
    for o in out:
        res.append(flat[at:at + o.numel()].view(o.shape)); at += o.numel()
    return res

ours = NvjpegDecoder(dev, "hardware")
variants = {"torchvision": Timed(dd._torchvision_decode), "ours": Timed(ours, True),
            "ours+python-checks": Timed(ours, False), "torchvision-flat": Timed(flat_tv)}
def run(name, fn, rounds=3):
    dec = dd.DeviceDecoder(chain, dev, 1, lambda i: str(i), decode_jpegs=fn)
    def go():
        fut = collections.deque(); n = 0
        for r in range(rounds):
            for i in range(0, len(data), 256):
                fut.append(dec.submit(data[i:i + 256], labels, list(range(i, i + 256)), r))
                if len(fut) > 2:
                    img, _, ev = fut.popleft().result(); ev.synchronize(); n += img.shape[0]
        while fut:
            img, _, ev = fut.popleft().result(); ev.synchronize(); n += img.shape[0]
        return n
    go(); fn.t = 0.0; fn.n = 0
    torch.cuda.synchronize(); t0 = time.perf_counter(); n = go(); t = time.perf_counter() - t0
    dec.close()
    print(f"{name}: {n / t:,.0f} images/s; decode call {fn.t / max(fn.n, 1) * 1e3:.1f} ms per batch", flush=True)
for name, fn in variants.items():
    run(name, fn)
for name in ("ours", "torchvision"):
    run(name + " (again)", variants[name])
