"""Smoke test at cohort scale: 2,000 samples x 20,000 genes through reading, preprocessing and one
fold of the default rank factor model (R-L-BSVM), within CI's time. Marked ``large``."""

import anndata as ad
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from omicsbayes.io import read_h5ad
from omicsbayes.models import RankFactorClassifier
from omicsbayes.preprocess import build_pipeline

pytestmark = pytest.mark.large


def test_two_thousand_by_twenty_thousand(tmp_path):
    rng = np.random.default_rng(0)
    n, p, k = 2000, 20000, 5
    scores = rng.standard_normal((n, k))
    loadings = rng.standard_normal((k, p)) * (rng.random(p) < 0.05)
    y = (scores[:, 0] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    counts = rng.poisson(np.exp(2.0 + 0.3 * (scores @ loadings))).astype(np.float64)
    path = tmp_path / "large.h5ad"
    ad.AnnData(X=counts, layers={"counts": counts}).write_h5ad(path)

    adata = read_h5ad(path)
    assert adata.shape == (n, p)
    train, test = np.arange(1500), np.arange(1500, n)
    pipeline = build_pipeline(
        ["normalize_total", {"name": "log", "base": 2}, {"name": "top_genes", "n": 4732}, "rank"]
    )
    X_train = pipeline.fit_transform(adata.X[train])
    X_test = pipeline.transform(adata.X[test])
    assert X_train.shape == (1500, 4732) and np.isfinite(X_test).all()

    model = RankFactorClassifier.from_variant("R-L-BSVM", n_factors=k, max_iter=5, random_state=0)
    model.fit(X_train, y[train])
    decision = model.decision_function(X_test)
    assert np.isfinite(decision).all()
    assert roc_auc_score(y[test], decision) > 0.6  # the planted signal is found, not just finite
