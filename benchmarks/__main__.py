"""Run every benchmark module (``bench_*.py``) and write results/benchmarks.tsv.

Each module has ``run(quick: bool) -> list[dict]`` with the columns of
:func:`benchmarks.common.row`.
The matrix-product rate is measured once here, in the same run, and recorded in every row with
the machine (processor, CPUs the process may use) and the date of the run.
"""

import argparse
import datetime
import importlib
import os
import pkgutil
import platform
import sys
from pathlib import Path

import pandas as pd

from .common import matmul_rate


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small problems")
    parser.add_argument("--only", nargs="*", help="module names, e.g. bench_bam")
    parser.add_argument("--out", default="results/benchmarks.tsv")
    args = parser.parse_args(argv)

    machine = f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} CPUs"
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    rate = matmul_rate()
    print(f"float64 matrix-product rate: {rate:.1f} GFLOP/s", flush=True)
    rows = []
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if not info.name.startswith("bench_") or (args.only and info.name not in args.only):
            continue
        module = importlib.import_module(f"benchmarks.{info.name}")
        print(f"running {info.name} ...", flush=True)
        for r in module.run(quick=args.quick):
            rows.append(
                {"module": info.name, "machine": machine, "date": date, "matmul_gflops": rate, **r}
            )
            print("  ", r, flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, sep="\t", index=False, float_format="%.6g")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
