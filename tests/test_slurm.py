"""The SLURM profile (profiles/slurm) on a real one-node SLURM started on this machine.

The cluster is Debian's slurm-wlm with munge (``make slurm`` installs them as root): its own
slurm.conf, munge key, state and spool folders in a temporary folder, no job accounting (so
``--slurm-status-command squeue``, as profiles/slurm/README.md says for such sites). slurmctld,
slurmd and munged are started by the fixture and stopped afterwards. Without the programs, or as
a user who cannot start slurmd, the tests are skipped with the reason.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.workflow
REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "srun")
SLURM_ARGS = (
    "--profile", str(REPO / "profiles" / "slurm"),
    "--slurm-status-command", "squeue",
    "--slurm-init-seconds-before-status-checks", "1",
    "--latency-wait", "5",
)  # fmt: skip


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(condition, seconds, what, logs=()):
    """Poll ``condition`` for up to ``seconds``; skip naming ``what`` (and log tails) if never."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.2)
    tails = "; ".join(
        f"{p.name}: {p.read_text()[-300:]!r}" for p in map(Path, logs) if Path(p).exists()
    )
    pytest.skip(f"SLURM could not be started here: {what} not ready after {seconds} s ({tails})")


class Cluster:
    """A one-node SLURM (partition main, 2 CPUs) in ``folder``; ``env`` points clients at it."""

    def __init__(self, folder):
        self.folder = folder = Path(folder)
        self.processes = []
        for sub in ("munge", "state", "spool", "bin"):
            (folder / sub).mkdir(mode=0o700)
        key, sock = folder / "munge" / "munge.key", folder / "munge" / "socket"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, timeout=30)
        self._start(
            "munged", "--foreground", "--force", f"--key-file={key}", f"--socket={sock}",
            f"--pid-file={folder / 'munge' / 'pid'}", f"--log-file={folder / 'munged.log'}",
            f"--seed-file={folder / 'munge' / 'seed'}",
        )  # fmt: skip
        _wait(sock.exists, 15, "munged", [folder / "munged.log"])
        host = socket.gethostname()
        conf = folder / "slurm.conf"
        conf.write_text(
            f"ClusterName=omicsbayes\nSlurmctldHost={host}(127.0.0.1)\n"
            f"SlurmctldPort={_free_port()}\nSlurmdPort={_free_port()}\n"
            "SlurmUser=root\nSlurmdUser=root\n"
            f"AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={sock}\n"
            f"StateSaveLocation={folder / 'state'}\nSlurmdSpoolDir={folder / 'spool'}\n"
            f"SlurmctldPidFile={folder / 'slurmctld.pid'}\nSlurmdPidFile={folder / 'slurmd.pid'}\n"
            f"SlurmctldLogFile={folder / 'slurmctld.log'}\nSlurmdLogFile={folder / 'slurmd.log'}\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n"
            "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
            "SchedulerType=sched/backfill\nSchedulerParameters=sched_interval=1\n"
            "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
            "ReturnToService=2\nMinJobAge=300\n"
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs=2 RealMemory=8000 State=UNKNOWN\n"
            "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
        )
        # The jobstep executor runs its nested srun without the SLURM_* variables of the job; a
        # site's clients find /etc/slurm/slurm.conf, this cluster's find it through SLURM_CONF.
        srun = folder / "bin" / "srun"
        srun.write_text(f'#!/bin/sh\nSLURM_CONF={conf} exec {shutil.which("srun")} "$@"\n')
        srun.chmod(0o755)
        self.env = {"SLURM_CONF": str(conf), "PATH": f"{folder / 'bin'}:{os.environ['PATH']}"}
        self._start("slurmctld", "-D", "-f", str(conf))
        self._start("slurmd", "-D", "-f", str(conf))
        _wait(
            lambda: self.query("sinfo", "-h", "-o", "%T").strip() == "idle",
            60,
            "the node",
            [folder / "slurmctld.log", folder / "slurmd.log", folder / "slurmd.out"],
        )

    def _start(self, program, *args):
        out = open(self.folder / f"{program}.out", "w")  # noqa: SIM115 (closed in stop)
        env = dict(os.environ, SLURM_CONF=str(self.folder / "slurm.conf"))
        self.processes.append(
            (subprocess.Popen([program, *args], stdout=out, stderr=out, env=env), out)
        )

    def query(self, *command):
        env = dict(os.environ, **self.env)
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, env=env)
        return result.stdout

    def stop(self):
        if self.processes:
            self.query("scancel", "--user", str(os.getuid()))
        for process, out in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
            out.close()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        pytest.skip(f"SLURM is not installed ({', '.join(missing)} missing; `make slurm` installs "
                    "Debian's slurm-wlm and munge as root)")  # fmt: skip
    if os.getuid() != 0:
        pytest.skip("slurmd of a one-node test cluster needs root")
    cluster = None
    try:
        cluster = Cluster(tmp_path_factory.mktemp("slurm"))
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()


def test_slurm_run_equals_local_run(tmp_path, slurm, tiny_config, tiny_run, snakemake_run):
    """The small config through the profile to its summary and report; its experiment's tables
    equal those of the same experiment in the session's shared local run (tests/conftest.py:
    tiny_run, whose config extends this one; every seed derives from the global seed and the
    job's wildcards)."""
    result = snakemake_run(tmp_path, *SLURM_ARGS, config=tiny_config, env=slurm.env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    submitted = result.stderr.count("has been submitted with SLURM jobid")
    assert submitted >= 6  # data, preprocess, split, the fits (maybe one group), evaluate, summary
    for table in (
        "results/malignant/summary.tsv",
        "results/malignant/metrics.tsv",
        "results/breast_cancer/splits/cv3.tsv",
    ):
        assert (tiny_run / table).read_bytes() == (tmp_path / table).read_bytes(), table
    summary = (tmp_path / "results" / "summary.tsv").read_text().splitlines()
    local = (tiny_run / "results" / "summary.tsv").read_text().splitlines()
    assert summary[0] == local[0] and set(summary[1:]) <= set(local[1:])
    report = tmp_path / "results" / "report.html"  # from the SLURM run's records, as make run
    result = snakemake_run(tmp_path, "--report", str(report), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Mean and standard deviation over splits" in report.read_text()  # a caption


def test_cancelled_slurm_job_is_retried_to_completion(tmp_path, slurm, tiny_config):
    """scancel on the running data job: SLURM reports it CANCELLED, the profile's retry
    (retries: 1) submits it again and the second attempt writes the cohort."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(tiny_config, sort_keys=False))
    target = "results/breast_cancer/raw.h5ad"
    env = dict(os.environ, OMP_NUM_THREADS="1", **slurm.env)
    command = [SNAKEMAKE, "-s", str(REPO / "workflow" / "Snakefile"), "-d", str(tmp_path)]
    with open(tmp_path / "snakemake.err", "w+") as err:
        run = subprocess.Popen([*command, *SLURM_ARGS, target], stdout=err, stderr=err, env=env)
        try:
            end, cancelled = time.monotonic() + 240, None
            while cancelled is None and time.monotonic() < end and run.poll() is None:
                running = slurm.query("squeue", "-h", "-t", "RUNNING", "-o", "%i").split()
                if running:
                    cancelled = running[0]
                    slurm.query("scancel", cancelled)
                time.sleep(0.3)
            assert cancelled is not None, "no SLURM job was seen running"
            assert run.wait(timeout=300) == 0
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=30)
        err.seek(0)
        log = err.read()
    assert f"SLURM-job '{cancelled}' failed" in log and "CANCELLED" in log, log[-3000:]
    assert "Trying to restart job" in log
    assert log.count("has been submitted with SLURM jobid") == 2
    assert (tmp_path / target).stat().st_size > 0
