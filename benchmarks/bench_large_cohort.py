"""Peak memory and time of preprocessing a large cohort: generated counts through
library-size scaling, log, top-genes selection and ranks fitted on a 75 % training split.

Each size runs in its own process, so its peak resident memory is its own; the growth is
reported as MB per million matrix entries (the float64 matrix itself is 8 MB per million).
"""

import json
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
import numpy as np
from omicsbayes.preprocess import build_pipeline
n, p = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
X = rng.poisson(8.0, size=(n, p)).astype(np.float64)
start = time.perf_counter()
steps = ["normalize_total", {"name": "log", "base": 2},
         {"name": "top_genes", "n": min(p, 5000)}, "rank"]
train = n * 3 // 4
pipeline = build_pipeline(steps)
pipeline.fit_transform(X[:train]); pipeline.transform(X[train:])
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(quick: bool) -> list[dict]:
    sizes = [(1000, 3000), (2000, 6000)] if quick else [(2000, 6000), (5000, 15000), (10000, 30000)]
    rows = []
    for n, p in sizes:
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(n), str(p)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        cells = n * p / 1e6
        rows.append(
            {
                "benchmark": f"preprocess {n} x {p}",
                "seconds": result["seconds"],
                "flops_floor_seconds": float("nan"),
                "ratio": float("nan"),
                "peak_mb": result["peak_mb"],
                "note": f"{result['peak_mb'] / cells:.1f} MB per million entries; "
                f"wall incl. start {time.perf_counter() - start:.1f} s",
            }
        )
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(r)
