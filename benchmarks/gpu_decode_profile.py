"""Where ``ImgDecode(device="cuda")``'s time goes, per batch of 256 (issue 23, docs/gpu.md).

    python benchmarks/gpu_decode_profile.py      # needs a CUDA device; about 30 s

Times, each the best of 3 after a warm-up, host time (until the call returns) and done time
(until the device has finished): torchvision's batched ``decode_jpeg`` on the device against one
image at a time and against 2-8 threads with their own streams, and how long the device is busy
during it (``torch.profiler``, with its six largest items); the CPU's ``decode_jpeg`` on one
thread; the decoder's Python work per batch (which files the device decodes, the draws);
``resize_crops`` at two group sizes and in float16, with its device-busy time and its difference
from float32; the C++ chain's ``apply_rows`` on 15 and 8 threads; a :class:`DeviceDecoder` batch
end to end at CPU shares 0, 0.5, 0.8 and 0.9; and 4 batches through one decoder.
benchmarks/results/gpu_decode_profile.txt holds runs on three H100 machines.
"""
import glob, os, sys, threading, time
import torch
if not torch.cuda.is_available():
    sys.exit("benchmarks/gpu_decode_profile.py needs a CUDA device (torch.cuda.is_available() is False)")
import hdmlp, hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.device.decode import DeviceDecoder, device_decodable, plan_device_decode
from hdmlp.device.resize import resize_crops
from torchvision.io import ImageReadMode, decode_jpeg

d = "/tmp/prof"
if not os.path.isdir(d):
    make_image_folder(d, 1024, seed=3)
files = sorted(glob.glob(d + "/*/*"))[:1024]
data = [torch.frombuffer(bytearray(open(f, "rb").read()), dtype=torch.uint8) for f in files]
batch = data[:256]
dev = torch.device("cuda")
def timed(name, fn, reps=3):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); r = fn(); t1 = time.perf_counter(); torch.cuda.synchronize(); t2 = time.perf_counter()
        ts.append((t1 - t, t2 - t))
    best = min(ts, key=lambda x: x[1])
    print(f"{name:45s} host {best[0]*1e3:7.1f} ms  done {best[1]*1e3:7.1f} ms  -> {256/best[1]:8.0f} img/s", flush=True)
    return r
imgs = timed("decode_jpeg list of 256 (cuda)", lambda: decode_jpeg(batch, mode=ImageReadMode.RGB, device=dev))


def device_busy(name, fn):
    """How much of fn's time the device's kernels and copies take (torch.profiler), against the host's."""
    from torch.profiler import ProfilerActivity, profile
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); wall = time.perf_counter() - t
    events = prof.key_averages()
    busy = sum(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) for e in events) / 1e3
    print(f"{name:45s} wall {wall*1e3:7.1f} ms  device busy {busy:7.1f} ms", flush=True)
    top = sorted(events, key=lambda e: -getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)))
    for e in top[:6]:
        print(f"    {getattr(e, 'self_device_time_total', 0)/1e3:7.2f} ms  x{e.count:<4d} {e.key[:90]}")


device_busy("decode_jpeg list of 256 (cuda), profiled", lambda: decode_jpeg(batch, mode=ImageReadMode.RGB, device=dev))
timed("decode_jpeg one at a time (cuda)", lambda: [decode_jpeg(b, mode=ImageReadMode.RGB, device=dev) for b in batch], 1)
def threaded(k):
    def go():
        out = [None] * k
        def work(j):
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                out[j] = decode_jpeg(batch[j::k], mode=ImageReadMode.RGB, device=dev)
            s.synchronize()
        ts = [threading.Thread(target=work, args=(j,)) for j in range(k)]
        [t.start() for t in ts]; [t.join() for t in ts]
        return out
    return go
for k in (2, 4, 8):
    timed(f"decode_jpeg in {k} threads, own streams", threaded(k))
timed("decode_jpeg list of 256 (cpu, 1 thread)", lambda: decode_jpeg(batch, mode=ImageReadMode.RGB), 1)
specs = hdmlp.transforms.pipeline_specs([T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.5]*3, [0.2]*3)])
chain = plan_device_decode(specs, 0.0)
dec = DeviceDecoder(chain, dev, 1, str)
t = time.perf_counter(); [device_decodable(b) for b in batch]; print(f"device_decodable x256 {1e3*(time.perf_counter()-t):.1f} ms")
t = time.perf_counter(); boxes, flips = dec.geometry(imgs, list(range(256)), 0); print(f"geometry x256 {1e3*(time.perf_counter()-t):.1f} ms")
print("crop sizes max", boxes[:, 2].max().item(), boxes[:, 3].max().item(), "image max", max(i.shape[1] for i in imgs), max(i.shape[2] for i in imgs))
timed("resize_crops (group 64)", lambda: resize_crops(imgs, boxes, flips, (224, 224)))
timed("resize_crops (group 256)", lambda: resize_crops(imgs, boxes, flips, (224, 224), group=256))
timed("resize_crops (group 64, float16)", lambda: resize_crops(imgs, boxes, flips, (224, 224), dtype=torch.float16))
device_busy("resize_crops (group 64), profiled", lambda: resize_crops(imgs, boxes, flips, (224, 224)))
device_busy("resize_crops (group 64, float16), profiled",
            lambda: resize_crops(imgs, boxes, flips, (224, 224), dtype=torch.float16))
full = resize_crops(imgs, boxes, flips, (224, 224)).int()
half = resize_crops(imgs, boxes, flips, (224, 224), dtype=torch.float16).int()
print(f"float16 resize against float32: max {int((full - half).abs().max())}, "
      f"differing {float((full != half).float().mean()):.4%}")
cpu_rows = torch.empty((256, 3, 224, 224), dtype=torch.uint8, pin_memory=True)
for threads in (15, 8):
    timed(f"C++ chain apply_rows, {threads} threads", lambda: dec.cpu_pipeline.apply_rows(
        [b.numpy() for b in batch], [str(i) for i in range(256)], 1, 0, list(range(256)), cpu_rows.numpy(), threads))
def crops_only():
    return [im[:, t:t+h, l:l+w].contiguous() for im, (t, l, h, w) in zip(imgs, boxes.tolist())]
timed("per-image crop copies only", crops_only)
labels = torch.zeros(256, dtype=torch.int64)
timed("DeviceDecoder batch end to end", lambda: dec.submit(batch, labels, list(range(256)), 0).result())
for share in (0.5, 0.8, 0.9):
    dec2 = DeviceDecoder(plan_device_decode(specs, share), dev, 1, str)
    timed(f"DeviceDecoder end to end, cpu_share {share}", lambda: dec2.submit(batch, labels, list(range(256)), 0).result())
    dec2.close()
# several batches in flight (as the feeder keeps them): throughput
def flight():
    fs = [dec.submit(data[i*256:(i+1)*256], labels, list(range(256)), 0) for i in range(4)]
    return [f.result() for f in fs]
t = time.perf_counter(); flight(); torch.cuda.synchronize(); s = time.perf_counter() - t
print(f"4 batches through one decoder: {1024/s:.0f} img/s")
dec.close()
print("allow_tf32", torch.backends.cuda.matmul.allow_tf32)
