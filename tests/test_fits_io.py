"""save_fit / load_fit round-trip every estimator: predictions on new samples are identical."""

import pickle

import arviz as az
import numpy as np
import pytest

from omicsbayes import models
from omicsbayes.io import FitFileError, load_fit, save_draws, save_fit
from omicsbayes.io import fits as fits_module

RNG = np.random.default_rng(0)
X_TRAIN, X_NEW = RNG.normal(size=(30, 6)), RNG.normal(size=(7, 6))
Y_TRAIN = (X_TRAIN[:, 0] + 0.3 * RNG.normal(size=30) > 0).astype(int)
Y3 = np.arange(30) % 3
COUNTS, COUNTS_NEW = RNG.poisson(3.0, size=(30, 6)), RNG.poisson(3.0, size=(7, 6))
MASK = RNG.uniform(size=(30, 6)) < 0.15
ENTRIES = (RNG.integers(0, 12, 40), RNG.integers(0, 9, 40), RNG.normal(size=40), (12, 9))
Q_ROWS, Q_COLS = np.array([0, 3, 11]), np.array([8, 1, 4])


def _x_calls(*methods):
    return [(m, (X_NEW,)) for m in methods]


# name -> (estimator, fit arguments, [(method, arguments)] compared before and after saving)
CASES = {
    "RankFactorClassifier": (
        models.RankFactorClassifier(n_factors=2, max_iter=15, random_state=0),
        (X_TRAIN, Y3),
        _x_calls("decision_function", "predict", "transform"),
    ),
    "PoissonFactorAnalysis": (
        models.PoissonFactorAnalysis(n_factors=3, n_iter=12, burn_in=6, random_state=0),
        (np.where(MASK, np.nan, COUNTS),),
        [
            ("transform", (COUNTS_NEW,)),
            ("log_likelihood", (COUNTS, MASK)),
            ("perplexity", (COUNTS, MASK)),
        ],
    ),
    "PFAClassifier": (
        models.PFAClassifier(n_factors=3, n_iter=12, burn_in=6, svm_max_iter=20, random_state=0),
        (COUNTS, Y_TRAIN),
        [("decision_function", (COUNTS_NEW,)), ("predict", (COUNTS_NEW,))],
    ),
    "BayesianProbitClassifier": (
        models.BayesianProbitClassifier(max_iter=20, random_state=0),
        (X_TRAIN, Y_TRAIN),
        _x_calls("decision_function", "predict", "predict_proba"),
    ),
    "BAMClassifier": (
        models.BAMClassifier(ranking="pairwise", max_iter=20, random_state=0),
        (X_TRAIN, Y_TRAIN),
        _x_calls("decision_function", "predict"),
    ),
    "RFLVM": (
        models.RFLVM(n_iter=8, burn_in=4, n_random_features=4, hmc_leapfrog=4, random_state=0),
        (np.where(MASK, np.nan, X_TRAIN),),
        [("log_likelihood", (X_TRAIN, MASK))],
    ),
    "IBPFactorModel": (
        models.IBPFactorModel(n_iter=10, burn_in=5, random_state=0),
        (np.where(MASK, np.nan, X_TRAIN),),
        [("log_likelihood", (X_TRAIN, MASK))],
    ),
    "BM2PCAClassifier": (
        models.BM2PCAClassifier(n_components=2, max_iter=20, random_state=0),
        (X_TRAIN, Y3),
        _x_calls("decision_function", "predict", "transform"),
    ),
    "BM2PCARegressor": (
        models.BM2PCARegressor(n_components=2, max_iter=20, random_state=0),
        (X_TRAIN, X_TRAIN[:, 0]),
        _x_calls("predict", "transform"),
    ),
}
for _name, _est in (
    ("ConstrainedMVGP", models.ConstrainedMVGP(lam=0.1, max_rank=3, random_state=0)),
    ("TraceGP", models.TraceGP(lam=0.1, max_rank=3, random_state=0)),
    ("MVGP", models.MVGP(sigma2=0.5)),
    ("KPMF", models.KPMF(rank=2, max_iter=50, random_state=0)),
    ("PMF", models.PMF(rank=2, max_iter=50, random_state=0)),
):
    CASES[_name] = (_est, ENTRIES, [("predict", (Q_ROWS, Q_COLS)), ("predict_rows", ())])
for _name, _est in (
    ("LogisticBaseline", models.LogisticBaseline()),
    ("LinearSVMBaseline", models.LinearSVMBaseline()),
    ("FullSVM", models.FullSVM()),
    ("PCASVM", models.PCASVM(n_components=2)),
    ("LDASVM", models.LDASVM()),
):
    CASES[_name] = (_est, (X_TRAIN, Y3), _x_calls("decision_function", "predict"))


def test_every_model_has_a_round_trip_case():
    assert set(CASES) == set(models.__all__)


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip_gives_identical_outputs(name, tmp_path):
    estimator, fit_args, calls = CASES[name]
    estimator.fit(*fit_args)
    before = {method: getattr(estimator, method)(*args) for method, args in calls}
    path = save_fit(estimator, tmp_path / f"{name}.joblib")
    loaded = load_fit(path)
    assert type(loaded) is type(estimator)
    assert loaded.get_params() == estimator.get_params()
    for method, args in calls:
        after = getattr(loaded, method)(*args)
        np.testing.assert_array_equal(np.asarray(after), np.asarray(before[method]), err_msg=method)


def test_draws_go_to_netcdf(tmp_path):
    est = models.IBPFactorModel(n_iter=10, burn_in=5, random_state=0).fit(X_TRAIN)
    path = save_draws(est, tmp_path / "draws.nc")
    back = az.from_netcdf(path)
    np.testing.assert_array_equal(back.posterior["alpha"], est.idata_.posterior["alpha"])
    with pytest.raises(ValueError, match="BAMClassifier keeps no MCMC draws"):
        save_draws(models.BAMClassifier(max_iter=5).fit(X_TRAIN, Y_TRAIN), tmp_path / "x.nc")


def test_version_mismatch_and_foreign_files_are_refused(tmp_path, monkeypatch):
    est = models.BAMClassifier(max_iter=5).fit(X_TRAIN, Y_TRAIN)
    monkeypatch.setattr(fits_module, "__version__", "0.0.1")
    path = save_fit(est, tmp_path / "old.joblib")
    monkeypatch.undo()
    with pytest.raises(FitFileError, match=r"saved by omicsbayes 0\.0\.1.*this is omicsbayes"):
        load_fit(path)
    (tmp_path / "table.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(FitFileError, match="not an omicsbayes fit file"):
        load_fit(tmp_path / "table.tsv")
    with open(tmp_path / "other.pkl", "wb") as f:
        pickle.dump({"some": "dict"}, f)
    with pytest.raises(FitFileError, match="not an omicsbayes fit file"):
        load_fit(tmp_path / "other.pkl")
    with pytest.raises(ValueError, match="not fitted"):
        save_fit(models.BAMClassifier(), tmp_path / "unfitted.joblib")


@pytest.mark.workflow
def test_workflow_saves_the_whole_cohort_fit_draws_and_diagnostics(tmp_path, snakemake_run):
    import anndata as ad
    import pandas as pd

    config = {
        "seed": 3,
        "cohorts": {
            "digits": {
                "format": "demo",
                "name": "digits",
                "label": "digit",
                "keep_labels": ["3", "5", "8"],
            }
        },
        "transforms": {"zscore": {"steps": ["zscore"]}},
        "protocols": {"cv3": {"type": "stratified_kfold", "n_splits": 3}},
        "models": {
            "R-L-BSVM": {
                "class": "RankFactorClassifier",
                "variant": "R-L-BSVM",
                "params": {
                    "n_factors": 3,
                    "inference": "gibbs",
                    "n_samples": 20,
                    "burn_in": 10,
                    "max_iter": 5,
                },
            },
        },
        "experiments": {
            "digits_ovr": {
                "cohort": "digits",
                "task": {"kind": "one_vs_rest"},
                "transforms": ["zscore"],
                "models": ["R-L-BSVM"],
                "protocol": "cv3",
                "figures": ["R-L-BSVM"],
            }
        },
    }
    folder = "results/digits_ovr/model_figures/R-L-BSVM"
    targets = [f"{folder}/trace.png", f"{folder}/draws.nc", "results/digits_ovr/diagnostics.tsv"]
    result = snakemake_run(tmp_path, "--cores", "2", *targets, config=config)
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "results/digits_ovr/model_figures/R-L-BSVM"
    fitted = ad.read_h5ad(out / "fit.h5ad")
    assert fitted.obsm["X_rank_factor"].shape == (539, 3)
    decision = fitted.obs[[f"rank_factor_decision_task:{d}" for d in "358"]].to_numpy()
    np.testing.assert_allclose(load_fit(out / "fit.joblib").decision_function(fitted.X), decision)
    draws = az.from_netcdf(out / "draws.nc")
    assert draws.posterior.sizes["draw"] == 20 and "train_decision" in draws.posterior
    table = pd.read_csv(tmp_path / "results/digits_ovr/diagnostics.tsv", sep="\t")
    assert set(table["variable"]) >= {"train_decision", "log_pseudo_likelihood"}
    assert (table["model"] == "R-L-BSVM").all() and (table["n_draws"] == 20).all()
    assert table["r_hat"].isna().all()  # one chain: no R-hat, never a made-up one
    assert (out / "trace.png").stat().st_size > 5000
