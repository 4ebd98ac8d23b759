"""benchmarks/mvgp_graph (claim run e_mvgp_graph): the permuted disease kernel, the neighbour
share, the rows' seeding against claim e_mvgp, and MV-GP's posterior mean with the identity on
the genes, the claim's setting."""

import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from omicsbayes.models.mvgp import MVGP
from omicsbayes.preprocess.graph import LowRankKernel, diffusion_kernel, normalized_laplacian

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def mvgp_graph(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.mvgp_graph")


def _graph(n, seed):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < 0.3, k=1).astype(float)
    return upper + upper.T


@pytest.mark.parametrize("rank", [None, 4])
def test_permuted_kernel_is_the_kernel_of_the_permuted_graph(mvgp_graph, rank):
    """P K P^T is the diffusion kernel of the relabelled graph: same spectrum, same degree
    sequence, and it moves the kernel (the labels carry the information)."""
    A = _graph(12, 0)
    perm = mvgp_graph.permutation(12, 5, ("Orphanet",), 2)
    K = diffusion_kernel(A, rank=rank)
    permuted = mvgp_graph.permuted_kernel(K, perm)
    assert type(permuted) is type(K)
    dense = K.to_dense() if rank else K
    moved = permuted.to_dense() if rank else permuted
    np.testing.assert_allclose(moved, dense[np.ix_(perm, perm)])
    np.testing.assert_allclose(np.linalg.eigvalsh(moved), np.linalg.eigvalsh(dense), atol=1e-12)
    B = A[np.ix_(perm, perm)]
    np.testing.assert_array_equal(np.sort(B.sum(axis=1)), np.sort(A.sum(axis=1)))
    np.testing.assert_allclose(
        np.linalg.eigvalsh(normalized_laplacian(B).toarray()),
        np.linalg.eigvalsh(normalized_laplacian(A).toarray()),
        atol=1e-12,
    )
    if rank is None:  # exact: the kernel of the permuted graph itself
        np.testing.assert_allclose(moved, diffusion_kernel(B), atol=1e-12)
    assert not np.allclose(moved, dense)


def test_permutation_is_seeded_per_run_cohort_and_fold(mvgp_graph):
    from omicsbayes._seed import derive_seed

    perm = mvgp_graph.permutation(50, 7, ("Orphanet",), 1)
    np.testing.assert_array_equal(np.sort(perm), np.arange(50))
    np.testing.assert_array_equal(perm, mvgp_graph.permutation(50, 7, ("Orphanet",), 1))
    rng = np.random.default_rng(derive_seed(7, "e_mvgp_graph", "Orphanet", "permutation", 1))
    np.testing.assert_array_equal(perm, rng.permutation(50))
    assert not np.array_equal(perm, mvgp_graph.permutation(50, 7, ("Orphanet",), 2))
    assert not np.array_equal(perm, mvgp_graph.permutation(50, 7, (), 1))


def test_permuted_kernel_refuses_what_is_no_permutation(mvgp_graph):
    K = diffusion_kernel(_graph(6, 1), rank=2)
    for bad in ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 4], [[0, 1, 2], [3, 4, 5]]):
        with pytest.raises(ValueError, match=r"perm must be a permutation of range\(6\)"):
            mvgp_graph.permuted_kernel(K, bad)
    with pytest.raises(ValueError, match=r"range\(6\)"):
        mvgp_graph.permuted_kernel(K.to_dense(), [5, 4, 3, 2, 1, 7])


def test_neighbour_share_counts_test_genes_held_by_a_neighbour(mvgp_graph):
    A = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=float))
    train = (np.array([1, 2]), np.array([0, 1]))  # disease 1 has gene 0, disease 2 gene 1
    test = (np.array([0, 0, 2]), np.array([0, 1, 0]))
    # (0, 0): neighbour 1 holds gene 0; (0, 1): gene 1 is held by 2, no neighbour; (2, 0): none
    assert mvgp_graph.neighbour_share(A, train, test, 3) == pytest.approx(1 / 3)


def test_mvgp_with_identity_genes_is_the_closed_form_and_borrows_within_a_gene():
    """The claim's setting, a low-rank diffusion kernel on the rows and the identity (None) on
    the columns: equation (1a) with C = C_M kron I, and a column's scores move with that
    column's entries only."""
    rng = np.random.default_rng(3)
    M, N, L = 14, 6, 30
    flat = rng.choice(M * N, L, replace=False)
    rows, cols, y = flat // N, flat % N, rng.standard_normal(L)
    Km = diffusion_kernel(_graph(M, 2), rank=5)
    model = MVGP(sigma2=0.3, tol=1e-12, verbose=False).fit(rows, cols, y, (M, N), Km)
    C = np.kron(Km.to_dense(), np.eye(N))  # row-major index m * N + n
    alpha = np.linalg.solve(C[np.ix_(flat, flat)] + 0.3 * np.eye(L), y)
    expected = (C[:, flat] @ alpha).reshape(M, N)
    np.testing.assert_allclose(model.predict_rows(), expected, atol=1e-8)
    other = y.copy()
    other[cols != 0] = rng.standard_normal(int(np.sum(cols != 0)))
    moved = MVGP(sigma2=0.3, tol=1e-12, verbose=False).fit(rows, cols, other, (M, N), Km)
    np.testing.assert_allclose(moved.predict_rows()[:, 0], expected[:, 0], atol=1e-8)
    assert not np.allclose(moved.predict_rows()[:, 1:], expected[:, 1:])


@pytest.fixture
def tiny_cohorts(monkeypatch):
    import anndata

    import omicsbayes.io.associations as associations

    def cohort(seed, n_rows, n_cols):
        rng = np.random.default_rng(seed)
        adata = anndata.AnnData(sp.csr_matrix((rng.random((n_rows, n_cols)) < 0.3).astype(float)))
        adata.obsp["graph"] = sp.csr_matrix(_graph(n_rows, seed))
        return adata

    omim, orphanet = cohort(0, 12, 15), cohort(1, 10, 14)
    monkeypatch.setattr(associations, "load_omim", lambda: omim)
    monkeypatch.setattr(associations, "load_orphanet", lambda: orphanet)


def test_graph_rows_reuse_the_claims_folds_samples_and_seeds(mvgp_graph, tiny_cohorts):
    """The HPO-graph rows are claim e_mvgp's default rows of the same models and folds; every
    row is a model and a contrast name the fidelity table knows; --folds, --cohorts and
    --models pick rows as claim e_mvgp's options do."""
    fidelity = importlib.import_module("benchmarks.fidelity")
    models = ["popularity", "MVGP-D", "ConMVGP-D"]
    settings = {"n_folds": 2, "n_negative_sets": 1, "paper_negative_sets": 1, "models": models}
    rows = mvgp_graph.graph_rows({**settings, "cohorts": ["Orphanet"], "folds": [1]}, seed=4)
    assert set(rows["claim"]) == {"e_mvgp_graph"} and set(rows["protocol"]) == {"default"}
    assert set(rows["cohort"]) == {"Orphanet known diseases (10 x 14)"}
    assert set(rows["split"]) == {1}
    assert set(rows["model"]) <= set(fidelity.MODELS["e_mvgp_graph"])
    assert set(rows["model"]) == {
        "popularity",
        "MVGP-D",
        "ConMVGP-D",
        "MVGP-D permuted graph",
        "ConMVGP-D permuted graph",
        "HPO graph",
        "permuted graph",
    }
    claim = fidelity.claim_e({**settings, "cohorts": ["Orphanet"], "folds": [1]}, seed=4)
    claim = claim[claim["protocol"] == "default"].drop(columns="claim")
    ours = rows[~rows["model"].str.contains("graph")].drop(columns="claim")
    key = ["model", "metric", "split"]
    pd.testing.assert_frame_equal(
        ours.sort_values(key).reset_index(drop=True), claim.sort_values(key).reset_index(drop=True)
    )
    share = rows[rows["metric"] == "neighbour_share"]
    assert set(share["model"]) == {"HPO graph", "permuted graph"}
    assert share["value"].between(0, 1).all()
    table = fidelity.summarize(rows)
    contrasts = table[table["rival"].notna()]
    assert set(contrasts["claim"]) == {"e_mvgp"}
    assert ("MVGP-D", "MVGP-D permuted graph") in set(zip(contrasts["model"], contrasts["rival"]))
    with pytest.raises(SystemExit, match=r"--models \['PMF'\]: claim e_mvgp_graph fits"):
        mvgp_graph.graph_rows({**settings, "models": ["PMF"]}, seed=4)


def test_graph_rows_fit_both_kernels_on_the_claims_fit_seed(mvgp_graph, tiny_cohorts, monkeypatch):
    from omicsbayes._seed import derive_seed
    from omicsbayes.protocols import disease_gene

    calls, fold = [], disease_gene.ranking_fold_curves

    def recorded(*args, **kw):
        calls.append((args[3]["class"], kw["random_state"], kw["row_kernel"]))
        return fold(*args, **kw)

    monkeypatch.setattr(disease_gene, "ranking_fold_curves", recorded)
    settings = {"n_folds": 1, "cohorts": ["OMIM"], "models": ["MVGP-D", "TraceGP-D"]}
    mvgp_graph.graph_rows(settings, seed=6)
    seed = derive_seed(6, "e_mvgp", "ConMVGP-D", 0)  # OMIM: no cohort tag; Con. MV-GP's samples
    assert [(c, s) for c, s, _ in calls] == [("MVGP", seed)] * 2 + [("TraceGP", seed)] * 2
    real, permuted = calls[0][2], calls[1][2]
    perm = mvgp_graph.permutation(12, 6, (), 0)
    np.testing.assert_allclose(permuted, mvgp_graph.permuted_kernel(real, perm))
    assert isinstance(real, np.ndarray) and not isinstance(real, LowRankKernel)
