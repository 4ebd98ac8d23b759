"""Snakemake's own CPU time against its jobs' (scheduling overhead), one run.

    python -m benchmarks.workflow_overhead --workdir /tmp/overhead --configfile my.yaml --cores 2

runs the workflow in a fresh ``--workdir`` with ``OMP_NUM_THREADS=1`` and prints the master
process's CPU seconds (``RUSAGE_SELF``: DAG, input functions, scheduling, job set-up), the jobs'
(``RUSAGE_CHILDREN``: every job process, waited for), their ratio, the job count (in all and per
rule, from the run's Snakemake log: every finished job but the target rule ``all``), and the sum
of ``cpu_time`` over the per-job benchmark files in ``logs/benchmarks/`` (Snakemake's own
sampling, only of the rules that have ``benchmark:``, and missing part of jobs shorter than its
sampling interval). The workflow profile ``profiles/default`` applies, as it does to ``make run``
and to ``snakemake`` run from the repository root. The master's share is the figure
docs/workflow.md reports; it is not a test because it depends on the machine.
"""

import argparse
import json
import os
import re
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
    profile = ["--workflow-profile", str(REPO / "profiles" / "default")]
    cmd = [sys.executable, "-c", _RUN, "-s", str(snakefile), "-d", str(workdir), *profile]
    out = subprocess.run(
        [*cmd, *snakemake_args], capture_output=True, text=True, env=env, cwd=workdir
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["code"]:
        raise SystemExit(f"snakemake failed:\n{out.stderr[-3000:]}")
    by_rule = finished_jobs(workdir)
    files = Path(workdir, "logs", "benchmarks").rglob("*.tsv")
    return {
        **result,
        "master_share": result["master"] / result["jobs"],
        "n_jobs": int(by_rule.sum()),
        "jobs_by_rule": by_rule.to_dict(),
        "benchmark_cpu_time": sum(pd.read_csv(f, sep="\t")["cpu_time"].sum() for f in files),
    }


def finished_jobs(workdir):
    """Jobs per rule that the newest Snakemake log in ``workdir`` reports finished, without the
    target rule ``all`` (a pandas Series, by rule name)."""
    log = max(Path(workdir, ".snakemake", "log").glob("*.snakemake.log"))
    rules = re.findall(r"^Finished jobid: \d+ \(Rule: (\S+)\)$", log.read_text(), re.MULTILINE)
    return pd.Series(rules, dtype=object).value_counts().drop("all", errors="ignore").sort_index()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workflow_overhead")
    parser.add_argument("--workdir", required=True, help="a fresh folder for the run")
    args, snakemake_args = parser.parse_known_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(json.dumps(measure(workdir.resolve(), snakemake_args)))


if __name__ == "__main__":
    main()
