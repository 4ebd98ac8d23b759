"""Check every fetched cohort file (pinned sha256, format), then what the fetched sample sheets
tell (omicsbayes.config.check_cohort_labels, as the config check does for local files); record
the files in results/downloads.tsv."""

import logging

import pandas as pd

from omicsbayes.config import check_cohort_labels
from omicsbayes.downloads import RECORD_COLUMNS, RemoteFile, check_download
from omicsbayes.jobs import run_job, write_table


def main(smk):
    log = logging.getLogger("omicsbayes")
    rows = []
    for entry in smk.params.files:
        remote = RemoteFile(**{k: entry[k] for k in ("cohort", "key", "url", "sha256")})
        row = check_download(remote, entry["local_path"])
        log.info("%s: %s, %d bytes, sha256 %s", remote.key, remote.url, row["bytes"], row["sha256"])
        rows.append(row)
    fetched = {entry["url"]: entry["local_path"] for entry in smk.params.files}
    check_cohort_labels(smk.params.checks, fetched, set(smk.params.checks["cohorts"]))
    write_table(pd.DataFrame(rows, columns=RECORD_COLUMNS), smk.output[0])


run_job(snakemake, main)  # noqa: F821
