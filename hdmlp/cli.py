"""The ``hdmlp`` command.

    hdmlp demo      make a small ImageNet-like folder (once) and load it
    hdmlp plan      print the samples a rank reads in an epoch
    hdmlp pack      convert a dataset into an hdmlp pack (a few large shards and an index)
    hdmlp simulate  predict a job's data-loading time under hdmlp and other policies
    hdmlp calibrate measure this machine's bandwidths and write a config
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from hdmlp.job import Job, user_cache_dir


def format_metrics_table(metrics: dict, epoch_seconds: Sequence[float]) -> str:
    """A plain-text table of a job's per-epoch metrics."""
    epochs = metrics["epochs"]
    sources = sorted({s for e in epochs for s in e["reads"]})
    header = ["epoch", "samples", "seconds", "img/s", "stall s", "read s (threads)"]
    with_transforms = any(e.get("transform_seconds", 0) > 0 for e in epochs)
    if with_transforms:
        header.append("transform s (threads)")
    for s in sources:
        header += [f"{s} reads", f"{s} MB"]
    rows = [header]
    for e, secs in zip(epochs, epoch_seconds):
        row = [str(e["epoch"]), str(e["samples"]), f"{secs:.2f}", f"{e['samples'] / max(secs, 1e-9):.0f}",
               f"{e['stall_seconds']:.2f}", f"{e['read_seconds']:.2f}"]
        if with_transforms:
            row.append(f"{e['transform_seconds']:.2f}")
        for s in sources:
            r = e["reads"].get(s, {"count": 0, "bytes": 0})
            row += [str(r["count"]), f"{r['bytes'] / 1e6:.1f}"]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def metrics_table_legend(metrics: dict) -> str:
    """What the columns of :func:`format_metrics_table` mean, for a reader new to them."""
    sources = sorted({s for e in metrics["epochs"] for s in e["reads"]})
    lines = [
        "seconds: the epoch's wall time. stall s: the time the loop waited for its next batch; this demo's loop "
        "does nothing with a batch, so stall is about the whole epoch (in training, it is the part of each step "
        "spent waiting for data, 0 when the loader keeps up).",
    ]
    if any(e.get("transform_seconds", 0) > 0 for e in metrics["epochs"]):
        lines.append("read s (threads), transform s (threads): the staging threads' time reading files and "
                     "decoding/augmenting them, summed over the threads, so they can exceed the epoch's time.")
    else:
        lines.append("read s (threads): the staging threads' time reading files, summed over the threads.")
    if sources:
        where = {"pfs": "the dataset's own storage (hdmlp calls it the PFS, the parallel file system it usually is)"}
        lines.append("reads, MB: where the staging threads got each epoch's samples: " + "; ".join(
            f"{s}: {where.get(s, 'a cache (storage class)')}" for s in sources) + ".")
    return "\n".join(lines)


def _batches_text(samples: int, batch_size: int, batches: int, drop_last: bool) -> str:
    """``7 batches per epoch: 6 of 32 and a last of 8`` (or all of one size)."""
    last = samples - (batches - 1) * batch_size
    if drop_last or last == batch_size or batches == 0:
        return f"{batches} batches of {batch_size} per epoch"
    if batches == 1:
        return f"1 batch of {samples} per epoch"
    return f"{batches} batches per epoch: {batches - 1} of {batch_size} and a last of {last}"


def _demo(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from hdmlp.datasets import make_image_folder

    data = args.data or os.path.join(user_cache_dir(), "datasets", f"demo-{args.images}-{args.classes}-{args.seed}")
    t0 = time.perf_counter()
    print(f"dataset: {data} ({args.images} ImageNet-like JPEGs in {args.classes} classes, seed {args.seed})")
    make_image_folder(data, num_images=args.images, num_classes=args.classes, seed=args.seed)
    print(f"dataset ready in {time.perf_counter() - t0:.1f} s")

    chain = _demo_chain(args.transforms)
    with Job(data, batch_size=args.batch_size, epochs=args.epochs, seed=args.seed, config_path=args.config,
             transforms=chain) as job:
        batches = _batches_text(len(job), args.batch_size, job.batches_per_epoch, job.drop_last_batch)
        print(f"job: {len(job)} samples, {batches}, seed {job.seed}, "
              f"index {'from cache' if job.index_from_cache else 'scanned'}")
        if chain is not None:
            dims, dtype = job.sample_shape
            print(f"transforms ({args.transforms}, in C++): {', '.join(map(repr, chain))}; "
                  f"batches of {dtype} [{args.batch_size}, {', '.join(map(str, dims))}]")
        epoch_seconds = []
        for epoch in range(args.epochs):
            started = time.perf_counter()
            done = 0
            with tqdm(total=len(job), desc=f"epoch {epoch}", unit="img", disable=not sys.stderr.isatty()) as bar:
                for ids, _labels, _samples in job.epoch_batches(epoch):
                    done += len(ids)
                    bar.update(len(ids))
            epoch_seconds.append(time.perf_counter() - started)
            print(f"epoch {epoch}: {done} samples in {epoch_seconds[-1]:.2f} s "
                  f"({done / max(epoch_seconds[-1], 1e-9):.0f} img/s)")
        metrics = job.metrics()
        print()
        print(format_metrics_table(metrics, epoch_seconds))
        print()
        print(metrics_table_legend(metrics))
        total = sum(e["samples"] for e in metrics["epochs"])
        stall = sum(e["stall_seconds"] for e in metrics["epochs"])
        print(f"\ntotal: {total} samples in {sum(epoch_seconds):.2f} s, {total / max(sum(epoch_seconds), 1e-9):.0f} img/s, "
              f"stall {stall:.2f} s; staging buffer peak {metrics['staging']['peak_bytes'] / 1e6:.1f} of "
              f"{metrics['staging']['capacity_bytes'] / 1e6:.1f} MB")
        prefetched = sum(c["prefetched_samples"] for c in metrics["classes"])
        print(f"the dataset's own storage (PFS) was read {metrics['pfs_reads']} times ({metrics['pfs_bytes'] / 1e6:.1f} "
              f"MB) in all, {prefetched} of them by the storage classes' prefetch threads, which read ahead during "
              f"the first epoch: the table counts where the staging threads took each sample from, so its first "
              f"epoch can show samples served from a cache")
        for c in metrics["classes"]:
            print(f"storage class {c['name']} ({c['backend']}): {c['filled_samples']} of {c['planned_samples']} "
                  f"planned samples cached ({c['filled_bytes'] / 1e6:.1f} MB), {c['prefetched_samples']} by its "
                  f"prefetch threads" + "".join(f"; {c[k]}" for k in ("note", "warning") if c[k]))
        if args.metrics_json:
            job.write_metrics(args.metrics_json)
            print(f"metrics written to {args.metrics_json}")
    return 0


def _demo_chain(name: str) -> list | None:
    """The demo's transform chains: ImageNet's training and validation pipelines, or none (raw bytes)."""
    if name == "none":
        return None
    import hdmlp.transforms as T

    normalize = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    if name == "train":
        return [T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), normalize]
    return [T.ImgDecode(), T.Resize(256), T.CenterCrop(224), T.ToTensor(), normalize]


def _plan(args: argparse.Namespace) -> int:
    from hdmlp.plan import MAX_EPOCHS, AccessPlan

    if not 0 <= args.epoch < MAX_EPOCHS:
        raise ValueError(f"--epoch must be from 0 to {MAX_EPOCHS - 1}, got {args.epoch}")
    plan = AccessPlan(args.samples, args.batch_size, args.epoch + 1, args.seed, args.drop_last, args.world_size,
                      args.scheme, shuffle=not args.no_shuffle)
    print(" ".join(map(str, plan.samples(args.epoch, args.rank))))
    return 0


def version_text() -> str:
    """``hdmlp --version``: the version, the MPI it loads at run time and why (docs/launching.md, "Which
    MPI"), then the MPI ABIs it has modules for and each library this build was compiled against."""
    from hdmlp.job import build_info
    info = build_info()
    lines = [f"hdmlp {info.pop('hdmlp')}", f"  mpi: {info.pop('mpi')}", "built with:"]
    lines += [f"  {name}: {version}" for name, version in info.items()]
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    """Prints version_text() as it is (argparse's "version" action would re-wrap its lines)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)  # type: ignore[arg-type]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(version_text())
        parser.exit()


def _pack(args: argparse.Namespace) -> int:
    from hdmlp.pack import pack

    bad = [kv for kv in args.source_option if "=" not in kv]
    if bad:
        raise ValueError(f"--source-option {bad[0]!r}: write it as KEY=VALUE, e.g. tar_sample_ext=jpg")
    options = dict(kv.split("=", 1) for kv in args.source_option)
    summary = pack(args.src, args.dst, shard_size=int(args.shard_size_mb * (1 << 20)), max_side=args.max_side,
                   quality=args.quality, raw=args.raw, source=args.source, source_options=options,
                   workers=args.workers, progress=not args.quiet)
    resumed = f", {summary.resumed_samples} of them from an interrupted run" if summary.resumed_samples else ""
    print(f"{summary.path}: {summary.samples} samples{resumed} in {summary.shards} shard(s), "
          f"{summary.bytes / 1e6:.1f} MB (source {summary.source_bytes / 1e6:.1f} MB)")
    return 0


def _mib(text: str) -> float:
    """An argparse type: a finite size in MiB, > 0 and at most 1048576 (1 TiB)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of MiB, got {text!r}") from None
    if not 0 < value <= 1 << 20:  # False for nan too
        raise argparse.ArgumentTypeError(f"expected a number of MiB > 0 and at most 1048576 (1 TiB), got {text!r}")
    return value


def _int_from(lo: int, hi: int):
    """An argparse type: an int in [lo, hi], or a usage error saying so."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer from {lo} to {hi}, got {value}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hdmlp", description="hdmlp: a clairvoyant data loader for deep learning.")
    parser.add_argument("--version", action=_VersionAction,
                        help="print hdmlp's version and what it was built with, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="make a small ImageNet-like dataset (once) and load it for a few epochs",
                          description="Makes an ImageNet-like folder of JPEGs from real photos (Debian's opencv-doc), "
                                      "deterministic by seed, then loads it with hdmlp and prints where time went.")
    demo.add_argument("--data", help="dataset folder (default: under the user cache directory)")
    demo.add_argument("--images", type=_int_from(1, 10**7), default=1000,
                      help="images in the generated dataset (default 1000)")
    demo.add_argument("--classes", type=_int_from(1, 10**5), default=10,
                      help="classes in the generated dataset (default 10)")
    demo.add_argument("--epochs", type=_int_from(1, 2**31 - 1), default=3, help="epochs to load (default 3)")
    demo.add_argument("--batch-size", type=_int_from(1, 2**62), default=32, help="batch size (default 32)")
    demo.add_argument("--seed", type=_int_from(0, 2**63 - 1), default=0,
                      help="seed of the dataset and the access order (default 0)")
    demo.add_argument("--config", help="libconfig++ configuration file (default: hdmlp's default.cfg)")
    demo.add_argument("--transforms", choices=["train", "val", "none"], default="train",
                      help="decode and augment in C++ with ImageNet's training (default) or validation chain, "
                           "or deliver each file's bytes (none)")
    demo.add_argument("--metrics-json", help="also write job.metrics() to this JSON file")
    demo.set_defaults(func=_demo)

    plan = sub.add_parser("plan", help="print the sample ids a rank reads in an epoch, without loading anything")
    plan.add_argument("--samples", type=int, required=True, help="dataset size: samples (required)")
    plan.add_argument("--batch-size", type=int, required=True, help="global batch size, over all ranks (required)")
    plan.add_argument("--epoch", type=int, default=0, help="the epoch, from 0 (default 0)")
    plan.add_argument("--seed", type=int, default=0, help="the seed of the access order, a Job's seed (default 0)")
    plan.add_argument("--rank", type=int, default=0, help="the rank whose samples to print (default 0)")
    plan.add_argument("--world-size", type=int, default=1, help="the number of ranks (default 1)")
    plan.add_argument("--drop-last", action="store_true", help="drop the last, incomplete batch (drop_last_batch)")
    plan.add_argument("--scheme", choices=["uniform", "local", "partial_local"], default="uniform",
                      help="distr_scheme (default uniform)")
    plan.add_argument("--no-shuffle", action="store_true", help="index order (a validation job's shuffle=False)")
    plan.set_defaults(func=_plan)

    pk = sub.add_parser("pack", help="convert a dataset into an hdmlp pack: a few large shards and one index",
                        description="Packs an image folder (or tar shards, or another pack) into DST: shard files "
                                    "read by offset plus an index, so a job opens a few files instead of one per "
                                    "sample. Streaming, resumable (run it again after an interruption) and "
                                    "deterministic. Read it with hdmlp.Job(DST, ...); the format is described in "
                                    "docs/formats.md of the source distribution and in the help of the "
                                    "hdmlp.pack module (python -m pydoc hdmlp.pack).")
    pk.add_argument("src", help="the dataset to pack (anything hdmlp.Job reads that holds images)")
    pk.add_argument("dst", help="the pack's folder (created)")
    pk.add_argument("--shard-size-mb", type=_mib, default=256, help="MiB per shard (default 256)")
    pk.add_argument("--max-side", type=int, help="resize images whose longer side is larger down to N pixels "
                                                 "and store them as JPEG")
    pk.add_argument("--quality", type=int, default=90, help="JPEG quality of resized images (default 90)")
    pk.add_argument("--raw", action="store_true", help="store decoded pixels (for small images such as CIFAR): "
                                                       "the loader's transforms skip the decode")
    pk.add_argument("--source", choices=["folder", "pack", "tar"], help="the source's format (default: from the path)")
    pk.add_argument("--source-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a source option, e.g. tar_sample_ext=jpg (repeatable)")
    pk.add_argument("--workers", type=int, default=4, help="threads reading and converting (default 4)")
    pk.add_argument("--quiet", action="store_true", help="no progress bar")
    pk.set_defaults(func=_pack)

    from hdmlp.simulate import add_subcommands as add_simulator_subcommands
    add_simulator_subcommands(sub)  # simulate, calibrate
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, RuntimeError) as e:
        print(f"hdmlp: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
