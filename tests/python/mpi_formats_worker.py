"""Run under mpirun by test_record_formats.py: each rank reads every job in argv[2] (a JSON list of
[dataset path, source options]) for two epochs and writes, per job and epoch, [sample name, sha256 of
its bytes] of what it received to OUT/rank<R>.json."""
import hashlib
import json
import os
import sys

import hdmlp


def main():
    out, jobs = sys.argv[1], json.loads(sys.argv[2])
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    result = {"jobs": []}
    for path, options in jobs:
        with hdmlp.Job(path, 6, 2, seed=4, source_options=options) as job:
            names = [p for p, _ in job.samples]
            epochs = []
            for epoch in range(2):
                seen = []
                for ids, labels, samples in job.epoch_batches(epoch):
                    if job.array_spec is not None:
                        rows = bytes(memoryview(samples))
                        step = len(rows) // len(ids)
                        parts = [rows[k * step:(k + 1) * step] for k in range(len(ids))]
                    else:
                        parts = [bytes(memoryview(s)) for s in samples]
                    seen += [[names[i], hashlib.sha256(p).hexdigest(), int(lab)]
                             for i, p, lab in zip(ids, parts, labels)]
                epochs.append(seen)
            result["jobs"].append({"epochs": epochs, "world_size": job.world_size, "source": job.source})
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
