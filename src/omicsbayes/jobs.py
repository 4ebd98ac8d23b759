"""Helpers for the workflow's thin scripts: logging into the rule's log, atomic writes.

A script calls :func:`run_job` with the ``snakemake`` object and its main function; progress from
the library (logger ``"omicsbayes"``) goes into the rule's log, and a failure ends the log with one
line naming the error and the inputs the job was given, then exits non-zero. The log's last line
is the job's own resource use (:func:`usage_line`). The job runs on its rule's ``threads:``
(:func:`job_threads`).
"""

import contextlib
import logging
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def job_threads(threads):
    """Run the block on ``threads`` threads: the BLAS and OpenMP pools already loaded
    (threadpoolctl), and so the worker threads of ``models._threads.map_blocks``.

    Snakemake 9 exports OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, ... = the job's
    ``threads`` to script jobs (``snakemake/shell.py``); this also holds when a job's pools were
    loaded before, or run in a process Snakemake did not start.
    """
    with threadpool_limits(limits=max(int(threads), 1)):
        yield


def usage_line(wall):
    """``resources: CPU <s> s, peak RSS <MB> MB, <wall> s wall``: this process's CPU time (user
    plus system, with its waited-for children; imports included) and peak resident memory, as
    the kernel counts them (``getrusage``), and ``wall`` seconds of the job's main function.

    Every job writes this as its log's last line instead of a Snakemake ``benchmark:`` file, whose
    sampling costs the Snakemake process about 0.3 s of CPU per job (docs/workflow.md).
    """
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    peak_mb = max(me.ru_maxrss, kids.ru_maxrss) / 1024  # kilobytes on Linux
    return f"resources: CPU {cpu:.2f} s, peak RSS {peak_mb:.0f} MB, {wall:.2f} s wall"


def run_job(smk, main):
    """Run ``main(smk)`` on the job's threads with logging to ``smk.log[0]``; on error log one
    line and exit 1. Either way the log ends with :func:`usage_line`."""
    log_path = smk.log[0] if len(smk.log) else None
    # progress goes to the rule's log only; Snakemake's console stays readable with many jobs
    handlers = [logging.FileHandler(log_path, mode="w") if log_path else logging.StreamHandler()]
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        handlers=handlers,
        force=True,
    )
    log = logging.getLogger("omicsbayes")
    start = time.perf_counter()
    try:
        with job_threads(smk.threads):
            main(smk)
    except Exception as err:  # the job's one-line error, then the inputs it was given
        inputs = ", ".join(str(p) for p in smk.input) or "(none)"
        log.error("%s: %s | inputs: %s", type(err).__name__, err, inputs)
        log.info(usage_line(time.perf_counter() - start))
        print(f"{type(err).__name__}: {err}", file=sys.stderr)  # the one line, on the console too
        sys.exit(1)
    log.info(usage_line(time.perf_counter() - start))


def atomic_write(path, write):
    """Call ``write(tmp_path)`` then move the file into place, so no half-written output remains."""
    atomic_write_all([(path, write)])


def atomic_write_all(writers):
    """Write every ``(path, write)`` pair, ``write(tmp_path)`` a file beside ``path`` (its folder
    created), then move them all into place: on any failure none of them is left behind, nor a
    temporary file. Files get the permissions of the process's umask."""
    moves = []
    try:
        for path, write in writers:
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
            os.close(fd)
            moves.append((tmp, path))
            write(tmp)
            os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get the usual permissions
        for tmp, path in moves:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in moves:
            if os.path.exists(tmp):
                os.remove(tmp)
        raise


def write_table(df, path):
    """Write a tab-separated table atomically, with a fixed float format (byte-identical reruns)."""
    atomic_write(path, lambda tmp: df.to_csv(tmp, sep="\t", index=False, float_format="%.10g"))
