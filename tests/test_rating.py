"""The rating experiment kind (paper 004, section 5.2): one fold per job, then the workflow."""

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from omicsbayes.config import ConfigError, check_config
from omicsbayes.evaluate.splitters import entry_kfold_splits, row_kfold_splits
from omicsbayes.io import read_associations
from omicsbayes.models.mvgp import ConstrainedMVGP
from omicsbayes.preprocess import diffusion_kernel
from omicsbayes.protocols import ExperimentError
from omicsbayes.protocols.rating import rating_cv, rating_fold, rating_fold_metrics

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "rating"
CON = {"lam": 1.0, "sigma2": 0.1, "max_rank": 6, "tol": 1e-3}


@pytest.fixture(scope="module")
def cohort():
    adata = read_associations(
        FIXTURE / "ratings.tsv", row_graph=FIXTURE / "social.tsv", value_column="rating"
    )
    coo = adata.X.tocoo()
    order = np.lexsort((coo.col, coo.row))
    return adata, coo.row[order], coo.col[order], coo.data[order]


def test_fixture_is_read_as_a_rating_matrix(cohort):
    adata, rows, cols, ratings = cohort
    table = pd.read_csv(FIXTURE / "ratings.tsv", sep="\t")
    assert adata.X.nnz == len(table) and set(ratings) <= {1, 2, 3, 4, 5}
    assert adata.n_obs == table["user"].nunique() + 2  # two users with friends but no rating
    got = adata.X[
        adata.obs_names.get_indexer(table["user"]), adata.var_names.get_indexer(table["item"])
    ]
    np.testing.assert_array_equal(np.asarray(got).ravel(), table["rating"].to_numpy(float))


@pytest.mark.parametrize("protocol", ["known_users", "new_users"])
def test_fold_metrics_match_rating_cv(cohort, protocol):
    """The workflow's per-fold function, fed the split table the split rule writes, gives
    rating_cv's numbers fold by fold (same folds, same estimator seed)."""
    adata, rows, cols, ratings = cohort
    K = diffusion_kernel(adata.obsp["graph"])
    seed, n_splits = 4, 2
    if protocol == "known_users":
        table = entry_kfold_splits(rows, cols, n_splits, random_state=seed)
    else:
        table = row_kfold_splits(adata.n_obs, n_splits, random_state=seed)
    spec = {"class": "ConstrainedMVGP", "side_information": "diffusion", "params": CON}
    expected = rating_cv(
        ConstrainedMVGP(**CON, random_state=11),
        rows,
        cols,
        ratings,
        adata.shape,
        protocol.split("_")[0],
        row_kernel=K,
        n_splits=n_splits,
        k=5,
        random_state=seed,
    )
    for split in range(n_splits):
        got = rating_fold_metrics(
            adata.X, table[table["split"] == split], protocol, spec, K, k=5, random_state=11
        )
        row = expected.iloc[split]
        assert got["rmse"] == pytest.approx(row["rmse"], rel=1e-10)
        assert got["recall"] == pytest.approx(row["recall"], rel=1e-10)
        assert got["n_rows"] == row["n_rows"]
        # the reference column: the training mean predicted for every test rating
        test = table.loc[(table["split"] == split) & (table["role"] == "test")]
        if protocol == "known_users":
            is_test = np.isin(np.arange(rows.size), test["entry"])
        else:
            is_test = np.isin(rows, test["row"])
        baseline = np.sqrt(np.mean((ratings[is_test] - ratings[~is_test].mean()) ** 2))
        assert got["rmse_training_mean"] == pytest.approx(baseline)
        assert got["n_test"] == is_test.sum()


def test_rating_fold_with_zero_mean_predicts_the_training_mean(cohort):
    """lam above the gradient norm at B = 0 gives the zero mean (condition of eq. 11): the
    prediction is the training mean, whose RMSE is computed here directly."""
    adata, rows, cols, ratings = cohort
    is_test = np.random.default_rng(0).random(rows.size) < 0.3
    out = rating_fold(
        ConstrainedMVGP(lam=1e4, sigma2=0.1), rows, cols, ratings, adata.shape, is_test
    )
    expected = np.sqrt(np.mean((ratings[is_test] - ratings[~is_test].mean()) ** 2))
    assert out["rmse"] == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="is_test"):
        rating_fold(ConstrainedMVGP(), rows, cols, ratings, adata.shape, is_test[:-1])
    with pytest.raises(ValueError, match="both training and test"):
        rating_fold(ConstrainedMVGP(), rows, cols, ratings, adata.shape, np.ones(rows.size, bool))
    with pytest.raises(ExperimentError, match=r"lacks \['entry_values', 'matrix_completion'\]"):
        rating_fold_metrics(adata.X, None, "known_users", {"class": "LogisticBaseline"})
    with pytest.raises(ExperimentError, match=r"lacks \['entry_values'\]"):
        rating_fold_metrics(adata.X, None, "known_users", {"class": "ProDiGe"})


def _config():
    common = {"side_information": "diffusion"}
    return {
        "seed": 3,
        "cohorts": {
            "social": {
                "format": "associations",
                "path": str(FIXTURE / "ratings.tsv"),
                "value_column": "rating",
                "row_graph": str(FIXTURE / "social.tsv"),
            }
        },
        "protocols": {
            "known": {"type": "known_users", "n_splits": 2, "k": 5},
            "new": {"type": "new_users", "n_splits": 2, "k": 5},
        },
        "models": {
            "ConMVGP-D": {"class": "ConstrainedMVGP", **common, "params": CON},
            "PMF-2": {"class": "PMF", "params": {"rank": 2, "sigma2": 0.1}},
        },
        "experiments": {
            "known_users": {
                "kind": "rating",
                "cohort": "social",
                "models": ["ConMVGP-D", "PMF-2"],
                "protocol": "known",
            },
            "new_users": {
                "kind": "rating",
                "cohort": "social",
                "models": ["ConMVGP-D"],
                "protocol": "new",
            },
        },
    }


@pytest.mark.parametrize(
    "edit,expected",
    [
        (lambda c: c["protocols"]["known"].update(type="known_rows"), "known_users"),
        (lambda c: c["models"]["PMF-2"].update({"class": "LogisticBaseline", "params": {}}), "PMF"),
        # ProDiGe's scores are SVM decision values, not ratings: no RMSE
        (
            lambda c: c["models"]["PMF-2"].update({"class": "ProDiGe", "params": {}}),
            r"\['PMF-2'\] cannot be used here",
        ),
    ],
)
def test_check_config_refuses_a_wrong_protocol_or_model(edit, expected):
    check_config(_config())
    config = _config()
    edit(config)
    with pytest.raises(ConfigError, match=expected):
        check_config(config)


@pytest.mark.workflow
def test_rating_workflow_beats_the_training_mean(tmp_path, snakemake_run):
    config = _config()
    result = snakemake_run(tmp_path, "--cores", "2", config=copy.deepcopy(config))
    assert result.returncode == 0, result.stderr[-3000:]
    ratings = pd.read_csv(FIXTURE / "ratings.tsv", sep="\t")
    for experiment in ("known_users", "new_users"):
        folder = tmp_path / "results" / experiment
        metrics = pd.read_csv(folder / "metrics.tsv", sep="\t")
        summary = pd.read_csv(folder / "summary.tsv", sep="\t")
        assert set(metrics["model"]) == set(config["experiments"][experiment]["models"])
        assert sorted(metrics["split"].unique()) == [0, 1] and (metrics["k"] == 5).all()
        assert metrics["recall"].between(0, 1).all()
        assert {"rmse_mean", "rmse_sd", "recall_mean", "recall_sd"} <= set(summary.columns)
        assert (folder / "figures" / "metrics.png").stat().st_size > 1000
        # every rating is tested exactly once over the folds
        assert metrics.groupby("model")["n_test"].sum().eq(len(ratings)).all()

        # the training mean of each fold, from the split table and the raw file
        protocol = config["experiments"][experiment]["protocol"]
        splits = pd.read_csv(tmp_path / f"results/social/splits/{protocol}.tsv", sep="\t")
        users = np.sort(
            pd.unique(pd.read_csv(FIXTURE / "social.tsv", sep="\t", header=None).values.ravel())
        )
        ordered = ratings.assign(u=np.searchsorted(users, ratings["user"]))
        ordered = ordered.sort_values(["u", "item"], kind="stable").reset_index(drop=True)
        y = ordered["rating"].to_numpy(float)
        baseline = []
        for split in range(2):
            test = splits[(splits["split"] == split) & (splits["role"] == "test")]
            if experiment == "known_users":
                is_test = ordered.index.isin(test["entry"])
            else:
                is_test = ordered["u"].isin(test["row"]).to_numpy()
            baseline.append(np.sqrt(np.mean((y[is_test] - y[~is_test].mean()) ** 2)))
        con = metrics[metrics["model"] == "ConMVGP-D"].sort_values("split")
        # new users are scored through the social graph only (about 0.92 of the baseline here)
        assert con["rmse"].mean() < 0.96 * np.mean(baseline)
    assert (tmp_path / "results" / "summary.tsv").exists()
