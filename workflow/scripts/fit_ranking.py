"""One fold of the disease-gene protocol: averaged scores over sampled negatives, P@k and R@k,
and the top candidate columns (genes) of every test row (disease)."""

import logging

import anndata as ad

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import read_splits
from omicsbayes.jobs import run_job, write_table
from omicsbayes.protocols.disease_gene import ranking_fold
from omicsbayes.protocols.entries import row_kernel


def main(smk):
    wc = smk.wildcards
    adata = ad.read_h5ad(smk.input.data)
    spec, protocol = smk.params.model, smk.params.protocol
    log = logging.getLogger("omicsbayes")
    splits = read_splits(smk.input.splits)
    seed = derive_seed(smk.params.seed, wc.experiment, wc.model, wc.split)
    curves, candidates = ranking_fold(
        adata.X,
        splits[splits["split"] == int(wc.split)],
        protocol["type"],
        spec,
        row_kernel=row_kernel(adata, spec, smk.input.data, wc.model),
        n_negative_sets=protocol.get("n_negative_sets", 5),
        random_state=seed,
    )
    log.info(
        "fold %s: R@20 %.4f over %d rows",
        wc.split,
        curves["recall"].iloc[-1],
        curves["n_rows"].iloc[0],
    )
    write_table(curves, smk.output.curves)
    candidates.insert(1, "row_id", adata.obs_names.to_numpy()[candidates["row"]])
    candidates.insert(4, "col_id", adata.var_names.to_numpy()[candidates["col"]])
    write_table(candidates, smk.output.candidates)


run_job(snakemake, main)  # noqa: F821
