"""Device check: hdmlp's nvJPEG decoder against torchvision's, values and decode-alone rates."""
import glob, sys, time
import torch
from torchvision.io import ImageReadMode, decode_jpeg
import hdmlp.nvjpeg as nv

root = sys.argv[1]
files = sorted(glob.glob(f"{root}/*/*.JPEG"))[:2048]
data = [torch.from_numpy(__import__("numpy").fromfile(f, dtype="uint8")) for f in files]
print("files", len(data), "mean KB", sum(d.numel() for d in data) / len(data) / 1e3, flush=True)
dev = torch.device("cuda")
print("status", nv.status(), flush=True)
decoders = {}
for b in ("hardware", "gpu_hybrid", "default"):
    try:
        d = nv.NvjpegDecoder(dev, b)
        decoders[b] = d
        print(b, "started:", d.backend, "engines", d._decoder.hardware_engines, "cores", d._decoder.hardware_cores_per_engine, flush=True)
    except Exception as e:
        print(b, "FAILED", e, flush=True)
batch = data[:256]
ref = decode_jpeg(batch, mode=ImageReadMode.RGB, device=dev)
cpu = [decode_jpeg(s, mode=ImageReadMode.RGB) for s in batch[:64]]
for b, d in decoders.items():
    out = d(batch, dev)
    torch.cuda.synchronize()
    none = sum(o is None for o in out)
    diffs = [(o.int() - r.int()).abs() for o, r in zip(out, ref) if o is not None]
    cdiffs = [(o.cpu().int() - c.int()).abs() for o, c in zip(out, cpu) if o is not None]
    print(f"{b}: undecodable {none}/256; vs torchvision-gpu mean {torch.cat([x.flatten() for x in diffs]).float().mean():.3f} "
          f"max {max(int(x.max()) for x in diffs)}; vs libjpeg-turbo mean {torch.cat([x.flatten() for x in cdiffs]).float().mean():.3f} "
          f"max {max(int(x.max()) for x in cdiffs)}", flush=True)

def rate(name, fn, rounds=2):
    for _ in range(2):
        fn(data[:256])
    torch.cuda.synchronize()
    host = 0.0
    t0 = time.perf_counter()
    n = 0
    for _ in range(rounds):
        for i in range(0, len(data), 256):
            h = time.perf_counter()
            fn(data[i:i + 256])
            host += time.perf_counter() - h
            n += len(data[i:i + 256])
    torch.cuda.synchronize()
    t = time.perf_counter() - t0
    print(f"decode alone {name}: {n / t:,.0f} images/s; host time in the call {host / (n / 256) * 1e3:.1f} ms per 256", flush=True)

rate("torchvision", lambda s: decode_jpeg(s, mode=ImageReadMode.RGB, device=dev))
for b, d in decoders.items():
    rate(f"nvjpeg-{b}", lambda s, d=d: d(s, dev))
# two threads at once on the hardware decoder (two decoders): does it scale?
import concurrent.futures as cf
if "hardware" in decoders:
    d2 = nv.NvjpegDecoder(dev, "hardware")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    def run(d, s, part):
        with torch.cuda.stream(s):
            for i in range(0, len(part), 256):
                d(part[i:i + 256], dev)
    torch.cuda.synchronize(); t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(2) as ex:
        list(ex.map(run, (decoders["hardware"], d2), (s1, s2), (data[:1024], data[1024:])))
    torch.cuda.synchronize()
    print(f"decode alone nvjpeg-hardware, 2 decoders in 2 threads: {len(data) / (time.perf_counter() - t0):,.0f} images/s", flush=True)
