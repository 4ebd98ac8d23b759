"""Ranked candidate columns (genes) of every row (disease) while it was held out, all models."""

import re

import pandas as pd

from omicsbayes.jobs import run_job, write_table

PATH = re.compile(r"ranking/(?P<model>[^/]+)/candidates(?P<split>\d+)\.tsv$")


def main(smk):
    tables = []
    for path in smk.input:
        keys = PATH.search(path).groupdict()
        table = pd.read_csv(path, sep="\t")
        tables.append(table.assign(model=keys["model"], split=int(keys["split"])))
    joined = pd.concat(tables, ignore_index=True)
    columns = ["model", "split", "row_id", "rank", "col_id", "score", "test_positive"]
    write_table(joined[columns].sort_values(["model", "row_id", "split", "rank"]), smk.output[0])


run_job(snakemake, main)  # noqa: F821
