"""benchmarks/mvgp_rating: paper 004's rating runs refit section 5.2's folds with their seeds,
and the references equal their definitions computed by hand."""

import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from omicsbayes import io
from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import entry_kfold_splits, row_kfold_splits
from omicsbayes.models.mvgp import KPMF, PMF
from omicsbayes.preprocess import diffusion_kernel
from omicsbayes.protocols.entries import matrix_entries
from omicsbayes.protocols.rating import rating_fold

REPO = Path(__file__).resolve().parents[1]
SEED = 7


@pytest.fixture
def fidelity(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.fidelity")


def _corner(adata, n_users, n_movies):
    """The users and movies with the most ratings: a small real corner of a cohort."""
    X = adata.X.tocsr()
    users = np.sort(np.argsort(-np.diff(X.indptr), kind="stable")[:n_users])
    counts = np.bincount(X[users].indices, minlength=adata.n_vars)
    movies = np.sort(np.argsort(-counts, kind="stable")[:n_movies])
    return adata[users][:, movies].copy()


@pytest.fixture(scope="module")
def corners():
    return {
        "100K": _corner(io.load_movielens_100k(), 30, 150),
        "dslabs": _corner(io.load_movielens_small(), 30, 50),
    }


@pytest.fixture
def small_cohorts(monkeypatch, corners):
    monkeypatch.setattr(io, "load_movielens_100k", lambda: corners["100K"])
    monkeypatch.setattr(io, "load_movielens_small", lambda: corners["dslabs"])
    return corners


def _settings(**kwargs):
    return {"n_folds": 5, "folds": None, "models": None, "cohorts": None, **kwargs}


def _values(frame, model, metric):
    part = frame[(frame["model"] == model) & (frame["metric"] == metric)]
    return part.sort_values("split")["value"].to_numpy()


def _popularity_recall(rows, cols, ratings, is_test, n_movies):
    """R@20 of ranking movies by training ratings, one user at a time."""
    counts = np.bincount(cols[~is_test], minlength=n_movies)
    recalls = []
    for user in np.unique(rows[is_test]):
        relevant = set(cols[is_test & (rows == user) & (ratings > 4)])
        if not relevant:
            continue
        seen = set(cols[~is_test & (rows == user)])
        ranked = sorted((m for m in range(n_movies) if m not in seen), key=lambda m: -counts[m])
        recalls.append(len(relevant & set(ranked[:20])) / len(relevant))
    return float(np.mean(recalls))


def test_known_users_run_refits_section_5_2_folds_with_its_seeds(fidelity, small_cohorts):
    adata = small_cohorts["100K"]
    settings = _settings(cohorts=["100K"], folds=[0, 3])
    settings["models"] = ["popularity", "training mean", "PMF-5"]
    frame = fidelity.CLAIMS["e_mvgp_rating"](settings, SEED)
    assert set(frame["protocol"]) == {"default"} and set(frame["split"]) == {0, 3}
    assert frame["cohort"].iloc[0] == "MovieLens 100K known users (30 x 150)"
    paper = fidelity.CLAIMS["e_mvgp_rating_paper"]({**settings, "models": ["PMF-5"]}, SEED)
    assert set(paper["protocol"]) == {"paper"} and set(paper["metric"]) == {"rmse"}

    rows, cols, ratings = matrix_entries(adata.X)
    splits = entry_kfold_splits(
        rows, cols, 5, random_state=derive_seed(SEED, "e_mvgp_rating", "ml-100k")
    )
    for i, split in enumerate([0, 3]):
        test = splits[(splits["split"] == split) & (splits["role"] == "test")]["entry"]
        is_test = np.isin(np.arange(rows.size), test)
        fit_seed = derive_seed(SEED, "e_mvgp_rating", "ml-100k", "PMF-5", split)
        fit = rating_fold(
            PMF(rank=5, random_state=fit_seed, verbose=False),
            rows, cols, ratings, adata.shape, is_test,
        )  # fmt: skip
        assert _values(frame, "PMF-5", "rmse")[i] == pytest.approx(fit["rmse"])
        assert _values(frame, "PMF-5", "recall@20")[i] == pytest.approx(fit["recall"])
        popularity = _popularity_recall(rows, cols, ratings, is_test, adata.n_vars)
        assert 0 < popularity < 1
        assert _values(frame, "popularity", "recall@20")[i] == pytest.approx(popularity)
        mean = ratings[~is_test].mean()
        rmse = np.sqrt(np.mean((ratings[is_test] - mean) ** 2))
        assert _values(frame, "training mean", "rmse")[i] == pytest.approx(rmse)
    # fold 3 under the paper's protocol: the same fit seed, selected by RMSE
    by_rmse = rating_fold(
        PMF(rank=5, random_state=fit_seed, verbose=False, selection_metric="rmse"),
        rows, cols, ratings, adata.shape, is_test,
    )  # fmt: skip
    assert _values(paper, "PMF-5", "rmse")[1] == pytest.approx(by_rmse["rmse"])


def test_new_users_run_holds_out_whole_users_scored_through_the_user_graph(fidelity, small_cohorts):
    adata = small_cohorts["100K"]
    settings = _settings(folds=[1], models=["KPMF-5"])
    frame = fidelity.CLAIMS["e_mvgp_rating_new"](settings, SEED)
    assert set(frame["cohort"]) == {"MovieLens 100K new users (30 x 150)"}  # not dslabs
    rows, cols, ratings = matrix_entries(adata.X)
    splits = row_kfold_splits(
        adata.n_obs, 5, random_state=derive_seed(SEED, "e_mvgp_rating_new", "ml-100k")
    )
    users = splits[(splits["split"] == 1) & (splits["role"] == "test")]["row"]
    fit = rating_fold(
        KPMF(random_state=derive_seed(SEED, "e_mvgp_rating_new", "ml-100k", "KPMF-5", 1)),
        rows, cols, ratings, adata.shape, np.isin(rows, users),
        row_kernel=diffusion_kernel(adata.obsp["graph"]),
    )  # fmt: skip
    assert _values(frame, "KPMF-5", "rmse") == pytest.approx([fit["rmse"]])
    assert _values(frame, "KPMF-5", "recall@20") == pytest.approx([fit["recall"]])
    with pytest.raises(SystemExit, match=r"--models \['PMF-5'\]: claim e_mvgp_rating_new fits"):
        fidelity.CLAIMS["e_mvgp_rating_new"](_settings(models=["PMF-5"]), SEED)


def test_cohort_without_a_user_graph_fits_only_the_identity_models(fidelity, small_cohorts):
    settings = _settings(cohorts=["dslabs"], folds=[0], models=["ConMVGP-D", "PMF-5"])
    frame = fidelity.CLAIMS["e_mvgp_rating"](settings, SEED)
    assert set(frame["model"]) == {"PMF-5"}
    assert set(frame["cohort"]) == {"MovieLens dslabs known users (30 x 50)"}


def test_rmse_contrast_is_ahead_when_lower(fidelity):
    per_split = [
        ("e_mvgp_rating", "default", "c", model, "rmse", split, value)
        for model, values in {"ConMVGP-D": [0.90, 0.91, 0.92], "PMF-5": [1.0, 1.02, 1.01]}.items()
        for split, value in enumerate(values)
    ]
    table = fidelity.summarize(pd.DataFrame(per_split, columns=fidelity.SPLIT_COLUMNS))
    row = table[(table["model"] == "ConMVGP-D") & (table["rival"] == "PMF-5")].iloc[0]
    assert row["difference"] == pytest.approx(-0.1) and row["verdict"] == "ahead"
