"""Why plain MV-GP is not poor in claim ``e_mvgp`` (paper 004 finds it poor on OMIM): the disease
graph, tested by taking its information away.

With the identity covariance on the genes, MV-GP's posterior mean (equation 1a) at an unseen
entry ``(m, n)`` is ``sum_m' C_M[m, m'] alpha[m', n]``: it borrows only from gene ``n``'s
training entries in diseases the disease covariance ``C_M`` relates to ``m``. Paper 004's OMIM
had no disease network (section 5.1: its side information was the HumanNet gene network, the
identity on the diseases), so there MV-GP borrowed only from the same disease's 1.2 genes; the
claim here puts the HPO disease graph's diffusion kernel on the diseases and the identity on the
genes. :func:`graph_rows` refits MV-GP, Con. MV-GP and Trace GP on claim ``e_mvgp``'s folds,
negative sets and fit seeds (so the HPO-graph rows are the claim's own) with the kernel of the
HPO graph and with the same kernel over randomly permuted disease labels
(:func:`permuted_kernel`: the same spectrum and degree sequence, no information about which
diseases are alike). Gene popularity is the floor. The descriptive rows
(:func:`neighbour_share`) give, per fold, the share of test associations whose gene has a
training association in a graph neighbour of the disease, under either graph.

Run ``OMP_NUM_THREADS=1 python -m benchmarks.fidelity --only e_mvgp_graph`` (``--cohorts``,
``--folds``, ``--models``).
"""

import numpy as np
import pandas as pd
import scipy.sparse as sp

from omicsbayes._seed import derive_seed
from omicsbayes.preprocess.graph import LowRankKernel

RUN = "e_mvgp_graph"
CLAIM = "e_mvgp"  # whose folds, negative sets and fit seeds the run reuses
MODELS = ("MVGP-D", "ConMVGP-D", "TraceGP-D")
GRAPH, PERMUTED = "HPO graph", "permuted graph"  # the descriptive rows' model names
SUFFIX = " " + PERMUTED  # of a model fitted on the permuted kernel
SHARE = "neighbour_share"


def permutation(n, seed, tags, split):
    """The seeded permutation of ``n`` disease labels for fold ``split``:
    ``derive_seed(seed, RUN, *tags, "permutation", split)``, one per fold."""
    rng = np.random.default_rng(derive_seed(seed, RUN, *tags, "permutation", split))
    return rng.permutation(n)


def permuted_kernel(kernel, perm):
    """``P K P^T`` with ``(P K P^T)[i, j] = K[perm[i], perm[j]]``: disease ``i`` gets the graph
    position of disease ``perm[i]``. Equal to the diffusion kernel of the permuted graph
    ``A[perm][:, perm]`` (the matrix exponential commutes with the permutation), so the
    spectrum and the degree sequence stay the same.

    Parameters
    ----------
    kernel : ndarray of shape (n, n) or LowRankKernel
    perm : array-like of int, a permutation of ``range(n)``

    Returns
    -------
    ndarray or LowRankKernel, as ``kernel``
    """
    n = kernel.n if isinstance(kernel, LowRankKernel) else np.shape(kernel)[0]
    perm = np.asarray(perm)
    if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
        raise ValueError(f"perm must be a permutation of range({n}); got shape {perm.shape}")
    if isinstance(kernel, LowRankKernel):
        return LowRankKernel(kernel.eigvecs[perm], kernel.eigvals, kernel.tail[perm])
    return np.asarray(kernel)[np.ix_(perm, perm)]


def neighbour_share(adjacency, train, test, n_cols):
    """Share of the test associations ``(m, n)`` (``test``: rows, cols) whose gene ``n`` has a
    training association (``train``: rows, cols) in a neighbour of disease ``m`` in the graph
    ``adjacency`` (square, sparse or dense; nonzero = edge)."""
    A = sp.csr_matrix(adjacency)
    Y = sp.csr_matrix((np.ones(train[0].size), train), shape=(A.shape[0], n_cols))
    reach = (A != 0).astype(float) @ Y  # (m, n): gene n's training entries among m's neighbours
    return float(np.mean(np.asarray(reach[test[0], test[1]]).ravel() > 0))


def graph_rows(settings, seed):
    """Per-split rows (``SPLIT_COLUMNS`` of :mod:`benchmarks.fidelity`) of run ``e_mvgp_graph``,
    protocol ``default`` (the estimators' own selection, one negative set): R@20 and P@20 of
    gene popularity and of every model of :data:`MODELS` fitted with the HPO graph's kernel
    (named as in claim ``e_mvgp``) and with :func:`permuted_kernel` (name + :data:`SUFFIX`),
    and :func:`neighbour_share` under either graph (models :data:`GRAPH` and :data:`PERMUTED`).
    Folds, negative sets and fit seeds are claim ``e_mvgp``'s: a fold by ``derive_seed(seed,
    "e_mvgp", *tags)``, a fit by ``derive_seed(seed, "e_mvgp", *tags, name, fold)`` with
    ``name`` the model's own or the one ``_SAMPLES_OF`` names, the same for both kernels."""
    from benchmarks import fidelity
    from omicsbayes.protocols.disease_gene import ranking_fold_curves
    from omicsbayes.protocols.entries import fold_of, matrix_entries

    protocol_type, _ = fidelity.DISEASE_GENE_RUNS[CLAIM]
    names = fidelity._models(settings, ["popularity", *MODELS], RUN)
    specs = fidelity.MODELS[CLAIM]["default"]
    rows = []
    for key, cohort, adata, tags, kernel in fidelity.disease_gene_cohorts(settings, CLAIM):
        graph = adata.obsp["graph"]
        entry_rows, entry_cols, _ = matrix_entries(adata.X)
        splits = fidelity.entry_kfold_splits(
            entry_rows, entry_cols, 5, random_state=derive_seed(seed, CLAIM, *tags)
        )
        for split in fidelity._folds(settings, sorted(splits["split"].unique()), RUN):
            table = splits[splits["split"] == split]
            perm = permutation(adata.n_obs, seed, tags, split)
            kernels = {"": kernel, SUFFIX: permuted_kernel(kernel, perm)}
            fold = fold_of(protocol_type, table, entry_rows)
            train = (entry_rows[~fold.is_test], entry_cols[~fold.is_test])
            test = (entry_rows[fold.is_test], entry_cols[fold.is_test])
            permuted_graph = graph[perm][:, perm]
            part = [
                (GRAPH, SHARE, neighbour_share(graph, train, test, adata.n_vars)),
                (PERMUTED, SHARE, neighbour_share(permuted_graph, train, test, adata.n_vars)),
            ]
            if "popularity" in names:
                at_20 = fidelity._at_20(fidelity._popularity_curves(adata.X, table, protocol_type))
                part += [("popularity", m, v) for m, v in at_20.items()]
            for name in (name for name in names if name != "popularity"):
                samples = fidelity._SAMPLES_OF.get(name, name)
                fit_seed = derive_seed(seed, CLAIM, *tags, samples, split)
                for suffix, row_kernel in kernels.items():
                    curves = ranking_fold_curves(
                        adata.X,
                        table,
                        protocol_type,
                        specs[name],
                        row_kernel=row_kernel,
                        n_negative_sets=(1,),
                        random_state=fit_seed,
                    )
                    at_20 = fidelity._at_20(curves[1])
                    part += [(name + suffix, m, v) for m, v in at_20.items()]
                    print(f"  {RUN} {key} fold {split} {name + suffix}: {at_20}", flush=True)
            rows += [(cohort, name, split, m, v) for name, m, v in part]
    frame = pd.DataFrame(rows, columns=["cohort", "model", "split", "metric", "value"])
    frame = frame.assign(claim=RUN, protocol="default")
    return frame[fidelity.SPLIT_COLUMNS]
