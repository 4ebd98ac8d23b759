"""One fit job of any experiment kind: read the cohort and its split table, call the kind's
``fit_fold`` (:class:`omicsbayes.protocols.ExperimentKind`) with the rule's params and the job's
wildcards, and write each table it returns to the rule's output of that name."""

import anndata as ad

from omicsbayes import protocols
from omicsbayes.evaluate.splitters import read_splits
from omicsbayes.jobs import run_job, write_table


def main(smk):
    params = dict(smk.params.items())
    kind = protocols.get(protocols.kind_of(params["experiment"]))
    adata = ad.read_h5ad(smk.input.data)
    splits = read_splits(smk.input.splits)
    checkpoint = f"{smk.output[0]}.checkpoint"  # a resumable fit resumes from it after a stop
    tables = kind.fit_fold(adata, splits, params, dict(smk.wildcards.items()), checkpoint)
    outputs = dict(smk.output.items())
    if set(tables) != set(outputs):
        raise ValueError(
            f"experiment kind {kind.name!r} returned the tables {sorted(tables)}; its fit rule "
            f"{smk.rule!r} names the outputs {sorted(outputs)}"
        )
    for name, table in tables.items():
        write_table(table, outputs[name])


run_job(snakemake, main)  # noqa: F821
