"""A small local batch scheduler for the cluster-generic executor test.

    fake_scheduler.py submit QUEUE_DIR JOBSCRIPT   -> prints a job ID, runs the script detached
    fake_scheduler.py status QUEUE_DIR JOB_ID      -> prints running, success or failed

Each submission is copied into QUEUE_DIR, appended to QUEUE_DIR/ledger.tsv and run as its own
process (its own session, like a batch job); its exit code lands in QUEUE_DIR/JOB_ID.rc.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def submit(queue, jobscript):
    queue.mkdir(parents=True, exist_ok=True)
    ledger = queue / "ledger.tsv"
    with open(ledger, "a+") as fh:  # append-only ledger; one line per submission
        fh.seek(0)
        job_id = f"fake{sum(1 for _ in fh) + 1:05d}"
        fh.write(f"{job_id}\t{jobscript}\n")
    script = queue / f"{job_id}.sh"
    shutil.copy(jobscript, script)
    rc = queue / f"{job_id}.rc"
    with open(queue / f"{job_id}.out", "w") as out:
        subprocess.Popen(
            ["bash", "-c", f'bash "{script}"; echo $? > "{rc}.tmp" && mv "{rc}.tmp" "{rc}"'],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=os.environ.copy(),
        )
    print(job_id)


def status(queue, job_id):
    rc = queue / f"{job_id}.rc"
    if not rc.exists():
        print("running")
    else:
        print("success" if rc.read_text().strip() == "0" else "failed")


if __name__ == "__main__":
    command, queue, arg = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    {"submit": submit, "status": status}[command](queue, arg)
