"""Write the fold table of one cohort and protocol.

Classification protocols stratify by the cohort's label (columns split, sample, sample_id, role);
``heldout_entries`` lists the held-out (row, col) entries of each repeat (paper 002);
``known_rows`` and ``new_rows`` split the associations or the rows of a disease-gene matrix,
``known_users`` and ``new_users`` the ratings or the users of a rating matrix (paper 004).
"""

import logging

import anndata as ad
import numpy as np

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import (
    classification_splits,
    entry_kfold_splits,
    heldout_entry_splits,
    row_kfold_splits,
    write_splits,
)
from omicsbayes.jobs import run_job
from omicsbayes.preprocess.transforms import dense_matrix


def main(smk):
    adata = ad.read_h5ad(smk.input[0])
    protocol = dict(smk.params.protocol)
    kind = protocol.pop("type")
    seed = derive_seed(smk.params.seed, smk.wildcards.cohort, smk.wildcards.protocol)
    if kind in ("known_rows", "known_users"):  # paper 004: k-fold over the stored entries
        # (associations or ratings, explicit zeros included) in row-major order
        coo = adata.X.tocoo()
        order = np.lexsort((coo.col, coo.row))
        table = entry_kfold_splits(
            coo.row[order], coo.col[order], protocol.get("n_splits", 5), random_state=seed
        )
    elif kind in ("new_rows", "new_users"):  # paper 004: k-fold over rows (diseases, users)
        table = row_kfold_splits(adata.n_obs, protocol.get("n_splits", 5), random_state=seed)
    elif kind == "heldout_entries":
        observed = np.isfinite(dense_matrix(adata.X, "held-out entry splits"))
        table = heldout_entry_splits(observed, random_state=seed, **protocol)
    else:
        label = smk.params.label
        if label not in adata.obs:
            raise ValueError(
                f"{smk.input[0]}: label column {label!r} is missing; columns are "
                f"{list(adata.obs.columns)}"
            )
        table = classification_splits(
            adata.obs[label].to_numpy(), kind, random_state=seed, **protocol
        )
        table.insert(2, "sample_id", adata.obs_names.to_numpy()[table["sample"].to_numpy()])
    logging.getLogger("omicsbayes").info("%s: %d splits", kind, table["split"].nunique())
    write_splits(table, smk.output[0])


run_job(snakemake, main)  # noqa: F821
