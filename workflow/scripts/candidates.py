"""Ranked candidate columns (genes) of every row (disease) while it was held out, all models."""

import pandas as pd

from omicsbayes.jobs import run_job, write_table


def main(smk):
    tables = []
    for path, keys in zip(smk.input, smk.params.folds, strict=True):
        table = pd.read_csv(path, sep="\t")
        tables.append(table.assign(model=keys["model"], split=int(keys["split"])))
    joined = pd.concat(tables, ignore_index=True)
    columns = ["model", "split", "row_id", "rank", "col_id", "score", "test_positive"]
    write_table(joined[columns].sort_values(["model", "row_id", "split", "rank"]), smk.output[0])


run_job(snakemake, main)  # noqa: F821
