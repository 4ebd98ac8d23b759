"""Snakemake's own CPU time against its jobs' (issue 19's scheduling overhead), one run.

    python -m benchmarks.workflow_overhead --workdir /tmp/overhead --configfile my.yaml --cores 2

runs the workflow in a fresh ``--workdir`` with ``OMP_NUM_THREADS=1`` and prints the master
process's CPU seconds (``RUSAGE_SELF``: DAG, input functions, scheduling, job set-up), the jobs'
(``RUSAGE_CHILDREN``: every job process, waited for), their ratio, the job count (in all and per
rule), and the sum of ``cpu_time`` over the per-job benchmark files in ``logs/benchmarks/``
(Snakemake's own sampling, which misses part of jobs shorter than its sampling interval). The
master's share is the figure docs/workflow.md reports; it is not a test because it depends on the
machine.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
# Snakemake in this process, then its own and its children's CPU as JSON on stdout's last line.
_RUN = """
import json, resource, sys
from snakemake.cli import main
try:
    main(sys.argv[1:])
except SystemExit as end:
    code = end.code
me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"code": code, "master": me.ru_utime + me.ru_stime,
                  "jobs": kids.ru_utime + kids.ru_stime}))
"""


def measure(workdir, snakemake_args):
    """CPU seconds of the master and of its jobs for one run in ``workdir`` (a dict)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    snakefile = REPO / "workflow" / "Snakefile"
    cmd = [sys.executable, "-c", _RUN, "-s", str(snakefile), "-d", str(workdir), *snakemake_args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["code"]:
        raise SystemExit(f"snakemake failed:\n{out.stderr[-3000:]}")
    folder = Path(workdir, "logs", "benchmarks")
    files = list(folder.rglob("*.tsv"))
    sampled = sum(pd.read_csv(f, sep="\t")["cpu_time"].sum() for f in files)
    by_rule = pd.Series([f.relative_to(folder).parts[0] for f in files]).value_counts()
    return {
        **result,
        "master_share": result["master"] / result["jobs"],
        "n_jobs": len(files),
        "jobs_by_rule": by_rule.sort_index().to_dict(),
        "benchmark_cpu_time": sampled,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workflow_overhead")
    parser.add_argument("--workdir", required=True, help="a fresh folder for the run")
    args, snakemake_args = parser.parse_known_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(json.dumps(measure(workdir.resolve(), snakemake_args)))


if __name__ == "__main__":
    main()
