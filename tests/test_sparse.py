"""Sparse cohorts: read without densifying, transformed sparse where the step allows it, expanded
once (``dense_matrix``) where a model takes the matrix, after gene selection."""

import logging
import time
import tracemalloc

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics import roc_auc_score

from omicsbayes.io import read_h5ad
from omicsbayes.preprocess import (
    Log,
    MaxZeroFraction,
    NormalizeTotal,
    RankTransform,
    RoundCounts,
    TopGenes,
    UnitLength,
    ZScore,
    build_pipeline,
    split_pipeline,
)
from omicsbayes.preprocess.transforms import dense_matrix
from omicsbayes.protocols import classification

RANK_FACTOR = {"class": "RankFactorClassifier", "params": {"n_factors": 2, "max_iter": 5}}


def _counts(n, p, density, seed):
    rng = np.random.default_rng(seed)
    dense = rng.poisson(3.0, (n, p)) * (rng.random((n, p)) < density)
    dense[:, 1] = 0  # a gene never detected
    dense[0, 0] = 7  # every cell has a count
    dense[:, 0] += 1
    return dense.astype(float)


SPARSE_KEEPING = [
    NormalizeTotal(),
    NormalizeTotal(target_sum=1e4),
    Log(),
    Log(base=np.e),
    RoundCounts(),
    UnitLength(),
    TopGenes(n=7),
    TopGenes(n=7, by="variance"),
    MaxZeroFraction(0.7),
]


def _sparse_forms(dense, container):
    """``dense`` in every scipy sparse format of ``container``'s kind (matrix or array), and as
    CSR and COO with 64-bit indices: the inputs scikit-learn's sparse checks give."""
    csr = container(dense)
    for fmt in ("csr", "csc", "coo", "lil", "dok", "dia", "bsr"):
        yield fmt, csr.asformat(fmt)
    wide = csr.copy()
    wide.indices, wide.indptr = wide.indices.astype(np.int64), wide.indptr.astype(np.int64)
    yield "csr_64", wide
    coo = csr.tocoo()
    coo.row, coo.col = coo.row.astype(np.int64), coo.col.astype(np.int64)
    yield "coo_64", coo


@pytest.mark.parametrize("step", SPARSE_KEEPING, ids=repr)
def test_sparse_keeping_steps_match_their_dense_result(step):
    dense = _counts(40, 25, 0.4, 0)
    csr = sp.csr_matrix(dense)
    expected = step.fit_transform(dense)  # the dense path, tested in test_preprocess
    got = step.fit_transform(csr)
    assert sp.issparse(got) and got.format == "csr"
    np.testing.assert_allclose(got.toarray(), expected, rtol=1e-12, atol=1e-12)
    # fitted on sparse, applied to dense (and back): the learned state is the same
    np.testing.assert_allclose(step.transform(dense), expected, rtol=1e-12, atol=1e-12)
    if hasattr(step, "support_"):  # selection read from sparse summaries, not just the values
        assert step.get_support().sum() < dense.shape[1]


@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csr_array], ids=lambda c: c.__name__)
@pytest.mark.parametrize("step", SPARSE_KEEPING, ids=repr)
def test_every_sparse_format_gives_the_dense_result_in_the_inputs_kind(step, container):
    dense = _counts(40, 25, 0.4, 0)
    expected = clone(step).fit_transform(dense)
    for fmt, X in _sparse_forms(dense, container):
        got = clone(step).fit_transform(X)
        assert sp.issparse(got) and got.format == "csr", fmt
        assert isinstance(got, sp.sparray) == isinstance(X, sp.sparray), fmt  # array or matrix
        np.testing.assert_allclose(got.toarray(), expected, rtol=1e-12, atol=1e-12, err_msg=fmt)


def test_sparse_steps_keep_every_zero_and_selection_counts_explicit_zeros():
    dense = _counts(30, 12, 0.3, 1)
    csr = sp.csr_matrix(dense)
    for step in (NormalizeTotal(target_sum=100.0), Log(base=2), UnitLength()):
        out = step.fit_transform(csr)
        assert out.nnz == csr.nnz  # a zero maps to zero, nothing is filled in
    stored_zero = csr.copy()
    stored_zero.data[stored_zero.indices == 2] = 0.0  # explicit zeros: still zeros
    assert stored_zero.nnz == csr.nnz
    selector = MaxZeroFraction(0.5).fit(stored_zero)
    assert selector.zero_fraction_[2] == 1.0
    np.testing.assert_allclose(selector.zero_fraction_, (stored_zero.toarray() == 0).mean(axis=0))


@pytest.mark.parametrize(
    "step", [ZScore(), RankTransform(), Log(pseudocount=0.5)], ids=lambda s: repr(s)
)
def test_steps_that_fill_zeros_expand_a_sparse_input(step, caplog):
    dense = _counts(20, 9, 0.5, 2)
    with caplog.at_level(logging.INFO, logger="omicsbayes"):
        got = step.fit_transform(sp.csr_matrix(dense))
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, step.fit_transform(dense))
    assert caplog.text.count("expanding a 20 x 9 sparse matrix") == 1  # once, fit and transform


def test_duplicate_stored_entries_count_once():
    dense = _counts(10, 6, 0.5, 6)
    csr = sp.csr_matrix(dense)
    doubled = sp.csr_matrix(  # every entry stored as two halves: a valid, non-canonical CSR
        (np.repeat(csr.data / 2, 2), np.repeat(csr.indices, 2), 2 * csr.indptr), shape=dense.shape
    )
    assert doubled.nnz == 2 * csr.nnz and not doubled.has_canonical_format
    for step in (MaxZeroFraction(0.5), TopGenes(n=3, by="variance"), NormalizeTotal()):
        np.testing.assert_allclose(step.fit_transform(doubled).toarray(), step.fit_transform(dense))
    np.testing.assert_allclose(
        MaxZeroFraction(0.5).fit(doubled).zero_fraction_, (dense == 0).mean(0)
    )


def test_sparse_bad_values_are_located():
    X = sp.csr_matrix(_counts(6, 5, 0.5, 3))
    bad = X.copy()
    bad[4, 3] = -2.0
    with pytest.raises(ValueError, match="the first at sample 4, feature 3"):
        NormalizeTotal().fit(bad)
    bad[4, 3] = np.nan
    with pytest.raises(ValueError, match="1 non-finite values .* sample 4, feature 3"):
        Log().fit_transform(bad)


def test_dense_matrix_expands_once_and_passes_arrays_through():
    dense = _counts(8, 4, 0.5, 4)
    assert dense_matrix(dense) is dense
    out = dense_matrix(sp.csr_matrix(dense.astype(np.int64)))
    assert out.dtype == np.float64 and isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, dense)


def test_read_h5ad_keeps_x_and_layers_sparse(tmp_path):
    counts = _counts(30, 10, 0.3, 5).astype(np.int32)
    src = ad.AnnData(
        X=sp.csr_matrix(counts),
        layers={"spliced": sp.csc_matrix(counts * 2)},
        obs=pd.DataFrame(index=[f"c{i}" for i in range(30)]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(10)]),
    )
    src.write_h5ad(tmp_path / "sparse.h5ad")
    a = read_h5ad(tmp_path / "sparse.h5ad")
    assert sp.issparse(a.X) and a.X.format == "csr" and a.X.dtype == np.float64
    np.testing.assert_array_equal(a.X.toarray(), counts)
    assert sp.issparse(a.layers["spliced"]) and a.layers["spliced"].format == "csc"
    counts_layer = a.layers["counts"]  # X was stored as integers: kept as the raw counts
    assert sp.issparse(counts_layer) and np.issubdtype(counts_layer.dtype, np.integer)
    np.testing.assert_array_equal(counts_layer.toarray(), counts)


class _Spy:
    """Stands in for ``protocols.classification.dense_matrix``: records what reaches the
    densification point and the traced memory peak at that moment."""

    def __init__(self):
        self.calls = []

    def __call__(self, X, who="a model"):
        kind = X.format if sp.issparse(X) else type(X).__name__
        peak = tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else None
        self.calls.append((kind, X.shape, peak))
        return dense_matrix(X, who)


def _split(n, seed, n_train):
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[:n_train]), np.sort(order[n_train:])


def test_pbmc68k_reduced_through_reader_transforms_and_a_fit(tmp_path, monkeypatch):
    pbmc = sc.datasets.pbmc68k_reduced()  # bundled in the scanpy wheel: read offline
    raw = pbmc.raw.X  # log1p of library-size-normalised counts, sparse
    assert sp.issparse(raw)
    cohort = ad.AnnData(
        X=raw.expm1(), obs=pbmc.obs[["bulk_labels"]].copy(), var=pbmc.raw.var[[]].copy()
    )
    cohort.write_h5ad(tmp_path / "pbmc.h5ad")

    adata = read_h5ad(tmp_path / "pbmc.h5ad")
    assert sp.issparse(adata.X) and adata.shape == (700, 765)
    sample_wise, fold = split_pipeline(
        [{"name": "normalize_total", "target_sum": 1e4}, "log", {"name": "top_genes", "n": 50}]
    )
    X = build_pipeline(sample_wise).fit_transform(adata.X)
    assert sp.issparse(X)
    targets = classification.task_targets(
        adata.obs["bulk_labels"], {"kind": "binary", "positive": ["CD14+ Monocyte"]}
    )
    train, test = _split(adata.n_obs, 0, 500)
    spy = _Spy()
    monkeypatch.setattr(classification, "dense_matrix", spy)
    predictions, _ = classification.fit_split(
        X, targets, train, test, RANK_FACTOR, build_pipeline(fold), random_state=0
    )
    assert [c[:2] for c in spy.calls] == [("csr", (500, 50)), ("csr", (200, 50))]
    # 0.917-0.923 over random_state 0-4 with the compiled sweep's random numbers
    assert roc_auc_score(predictions["y_true"], predictions["score"]) > 0.9


@pytest.mark.large
def test_twenty_thousand_cells_stay_sparse_until_the_model(tmp_path, monkeypatch):
    n, p, n_markers = 20_000, 2_000, 40
    rng = np.random.default_rng(0)
    group = rng.random(n) < 0.4
    log_rate = rng.normal(-3.0, 1.0, p)  # most genes are rarely detected: about 8 % nonzero
    effect = np.zeros(p)
    effect[rng.choice(p, n_markers, replace=False)] = 2.0
    library = rng.lognormal(0.0, 0.3, n)
    blocks = [
        sp.csr_matrix(
            rng.poisson(library[s:e, None] * np.exp(log_rate + effect * group[s:e, None]))
        )
        for s, e in zip(range(0, n, 2000), range(2000, n + 1, 2000))
    ]
    counts = sp.vstack(blocks, format="csr").astype(np.int32)
    sparse_mb = (counts.nnz * 12 + (n + 1) * 4) / 2**20  # as float64 CSR
    dense_mb = 8 * n * p / 2**20
    obs = pd.DataFrame({"cell_type": np.where(group, "A", "B")}, index=[f"c{i}" for i in range(n)])
    ad.AnnData(X=counts, obs=obs).write_h5ad(tmp_path / "cells.h5ad")
    del counts, blocks

    spy = _Spy()
    monkeypatch.setattr(classification, "dense_matrix", spy)
    tracemalloc.start()
    try:
        start = time.process_time()
        adata = read_h5ad(tmp_path / "cells.h5ad")
        assert sp.issparse(adata.X)
        sample_wise, fold = split_pipeline(
            [
                {"name": "normalize_total", "target_sum": 1e4},
                "log",
                {"name": "top_genes", "n": 100, "by": "variance"},
            ]
        )
        X = build_pipeline(sample_wise).fit_transform(adata.X)
        assert sp.issparse(X)
        targets = classification.task_targets(
            adata.obs["cell_type"], {"kind": "binary", "positive": ["A"]}
        )
        train, test = _split(n, 1, 15_000)
        params = {**RANK_FACTOR["params"], "transform_iter": 10}
        predictions, _ = classification.fit_split(
            X, targets, train, test, {**RANK_FACTOR, "params": params}, build_pipeline(fold), 0
        )
        seconds = time.process_time() - start
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    at_test = spy.calls[-1][2]  # traced peak when the test matrix reached the model
    assert [c[:2] for c in spy.calls] == [("csr", (15_000, 100)), ("csr", (5_000, 100))]
    # Up to the densification point the cohort was never dense: the peak (scanpy imported before
    # tracing) is a small multiple of the sparse matrix: X, its counts layer, and one step's
    # input copy, output and scaling vector.
    assert at_test / 2**20 < 5 * sparse_mb
    assert 5 * sparse_mb < 0.6 * dense_mb  # so the bound above excludes a dense cohort
    # 5 iterations of the rank factor model's Monte Carlo VB: the held-out AUROC varies with the
    # seed here (0.77-0.95 over random_state 0-4; seeds 0-5 gave 0.79-0.98 before the random
    # numbers moved into the sweep): single-cell prediction is weak (docs/models.md)
    assert roc_auc_score(predictions["y_true"], predictions["score"]) > 0.75
    print(
        f"\n20,000 x 2,000 sparse ({sparse_mb:.0f} MB CSR, {dense_mb:.0f} MB dense): peak "
        f"{at_test / 2**20:.0f} MB up to the model, {peak_mb:.0f} MB with the fit; "
        f"{seconds:.0f} s CPU"
    )
