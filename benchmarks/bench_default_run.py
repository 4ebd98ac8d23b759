"""``make run`` (the default config) against the goal: under 10 minutes on 2 cores.

Runs what ``make run`` runs, in a fresh temporary working directory: the workflow on
config/config.yaml with ``--cores 2``, then the HTML report (``--cores 1 --report``), each through
:func:`benchmarks.workflow_overhead.measure` (one BLAS thread per job, the default workflow
profile). The row's ``seconds`` are the wall seconds of both, its ``ratio`` those over 600 s (below
1 meets the goal); the note adds the job count and the Snakemake master's share of the CPU. The
package installation of a fresh clone (``make setup``) is not counted.

The default config is one fixed size (about 6 minutes on the 2-core machine), so ``--quick`` does
not run it and its row says so.
"""

import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import row
from benchmarks.workflow_overhead import REPO, measure

GOAL_SECONDS = 600.0  # `make run` under 10 minutes on 2 cores
CORES = 2


def run(quick: bool) -> list[dict]:
    name = f"default_run config/config.yaml {CORES} cores vs 10 min"
    if quick:
        r = row(name, np.nan, 0, np.nan, "not run with --quick: the default config is one size")
        return [r]
    config = str(REPO / "config" / "config.yaml")
    with tempfile.TemporaryDirectory(prefix="omicsbayes-default-run-") as tmp:
        workdir = Path(tmp)
        start = time.perf_counter()
        workflow = measure(workdir, ["--cores", str(CORES), "--configfile", config])
        middle = time.perf_counter()
        report = str(workdir / "results" / "report.html")
        measure(workdir, ["--cores", "1", "--configfile", config, "--report", report])
        end = time.perf_counter()
    wall = end - start
    r = row(
        name,
        wall,
        0,
        np.nan,
        f"{wall / 60:.1f} min wall ({middle - start:.0f} s workflow, {end - middle:.0f} s "
        f"report) against {GOAL_SECONDS / 60:.0f} min: ratio {wall / GOAL_SECONDS:.2f}; "
        f"{workflow['n_jobs']} jobs, {workflow['jobs']:.0f} s of job CPU, Snakemake master "
        f"{workflow['master']:.1f} s ({100 * workflow['master_share']:.1f} %)",
    )
    r["ratio"] = wall / GOAL_SECONDS
    return [r]


if __name__ == "__main__":
    for r in run(quick=False):
        print(r["benchmark"], f"{r['ratio']:.2f}", r["note"], flush=True)
