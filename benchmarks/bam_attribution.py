"""Why BAM is not ahead of BPROBIT in claim ``b_bam`` (paper 001): run ``b_bam_attr``.

``OMP_NUM_THREADS=1 python -m benchmarks.fidelity --only b_bam_attr`` fits, at the estimators'
defaults (protocol ``default``), three kinds of rows:

- **The claim's real cohorts** (GSE7390 ER and pbmc68k_reduced, Gaussian and linear empirical
  kernel maps), on claim ``b_bam``'s splits with its fit seeds, so the held-out AUROCs of
  BPROBIT, BAM_L and BAM_P are those of ``b_bam``'s ``default`` rows. Beside them: the training
  AUROC (how well each fit ranks the samples it saw), the Spearman correlation of each model's
  held-out scores with BPROBIT's, and whether a linear scorer on the training map separates
  the classes exactly (``train_separable``: a linear programme, so a training AUROC of 1 is
  attainable).
- **A planted misranking** where AUC maximisation must help if it is implemented right
  (:func:`planted_misranking`): a linear scorer is misspecified for a subgroup of positives that
  lies far on the wrong side. A likelihood fit (probit) pays for each of them by the square of
  its distance, so they tilt its direction; a listwise ranking fit pays linearly, once per
  positive, and keeps the direction that ranks the other positives. Fitted on the features
  (z-scored) and on both kernel maps of the same draws.
- **BAM's ranking likelihoods without the link** (:func:`ranking_map`): the MAP of
  ``(b, w)`` under the pairwise (eq. 1) or listwise (eq. 2) ranking likelihood of
  ``f = b + w^T x`` itself, with BAM's prior at its prior-mean precision 1; and BAM_L and
  BAM_P with their precisions held at 1 (:func:`fixed_precision`). Against BAM_P and BAM_L
  they separate what the ranking likelihood does from what the ARD precisions learned with it
  and the unit-variance link ``f ~ N(b + w^T x, 1)`` do.

That the variational fit reaches its objective's optimum is tested apart (``tests/test_bam.py``:
the steps against finite differences and brute force, the lower bound against Monte Carlo, and
the converged fit against an independent optimiser of the concave objective,
``test_converged_fit_is_the_optimum_of_the_concave_objective``).
"""

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.metrics import auroc
from omicsbayes.evaluate.splitters import classification_splits
from omicsbayes.preprocess.transforms import build_pipeline
from omicsbayes.protocols._common import make_estimator

RUN = "b_bam_attr"
LISTWISE_MAP = "listwise MAP, no link"
PAIRWISE_MAP = "pairwise MAP, no link"
SEPARATOR = "linear scorer (LP)"
FIXED = ", precision fixed at 1"
# Gamma priors with mean 1 and sd 1e-3 on the bias and weight precisions: q(gamma) and q(eta)
# stay at 1, the prior mean of the paper's (1, 1), so the fit learns no ARD precisions.
FIXED_PRECISION = {"alpha_gamma": 1e6, "beta_gamma": 1e-6, "alpha_eta": 1e6, "beta_eta": 1e-6}
# The planted design (:func:`planted_misranking`): cohort size and positive fraction between
# paper 001's cohorts (165-472 samples, 14-37 % positives); the positives' shift in the two
# features; the fraction of the positives moved to x1 = -far (one in ten).
PLANTED = {"n": 200, "positive_fraction": 0.2, "shift": (1.5, 0.5), "far_fraction": 0.1, "far": 8}
PLANTED_NAME = "planted: a tenth of the positives far on the wrong side"
REPRESENTATIONS = {
    "features": [{"name": "zscore"}],
    "Gaussian kernel map": [{"name": "empirical_kernel_map", "kernel": "gaussian"}],
    "linear kernel map": [{"name": "empirical_kernel_map", "kernel": "linear"}],
}


def fixed_precision(models):
    """BAM_L and BAM_P of ``models`` with their precisions held at 1 (:data:`FIXED_PRECISION`),
    named ``"BAM_L" + FIXED`` and ``"BAM_P" + FIXED``."""
    return {
        name + FIXED: {
            **models[name],
            "params": {**models[name].get("params", {}), **FIXED_PRECISION},
        }
        for name in ("BAM_L", "BAM_P")
    }


def planted_misranking(
    rng, n=200, positive_fraction=0.2, shift=(1.5, 0.5), far_fraction=0.1, far=8.0
):
    """Two features where a linear scorer is misspecified for a few positives.

    Negatives are N(0, I); positives N(``shift``, I), except ``far_fraction`` of them, whose
    first feature is N(-``far``, 1). The direction that ranks the other positives best lies
    close to the first feature and ranks the far ones below the negatives; turning towards the
    second feature lifts them at the cost of every other positive.

    Returns
    -------
    X : ndarray of shape (n, 2)
    y : ndarray of shape (n,), 1 for the positives (the first ``round(positive_fraction n)``)
    """
    n_pos = int(round(positive_fraction * n))
    y = np.r_[np.ones(n_pos, dtype=int), np.zeros(n - n_pos, dtype=int)]
    X = rng.normal(size=(n, 2))
    X[:n_pos] += shift
    n_far = int(round(far_fraction * n_pos))
    X[:n_far, 0] = rng.normal(loc=-far, size=n_far)
    return X, y


def ranking_map(A, y, ranking):
    """MAP of ``(b, w)`` under BAM's ranking likelihood of ``f = b + A w`` (no link noise).

    Maximises sum log softmax over the ranking variables (pairwise, eq. 1: one per
    positive-negative pair; listwise, eq. 2: one per positive against all negatives) minus
    ``(b^2 + |w|^2) / 2`` (BAM's priors at the prior mean of their precisions,
    ``alpha * beta = 1``), by L-BFGS with the analytic gradient. The listwise form ranks the
    class labelled 1 (``y`` holds 0 and 1), which must be the smaller one as in
    :class:`~omicsbayes.models.BAMClassifier` (it is in every cohort of run ``b_bam_attr``);
    ValueError otherwise.

    Returns
    -------
    ndarray of shape (1 + n_features,)
        ``(b, w)``; score new rows by ``b + A_new @ w``.
    """
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    if ranking == "listwise" and len(pos) > len(neg):
        raise ValueError(
            f"ranking_map(ranking='listwise'): y has {len(pos)} ones and {len(neg)} zeros; "
            "label the smaller class 1"
        )
    Z = np.hstack([np.ones((len(y), 1)), A])

    def loss(beta):
        s = Z @ beta
        grad = np.zeros(len(y))
        if ranking == "pairwise":
            diff = s[neg][None, :] - s[pos][:, None]  # -log sigmoid(s_n - s_o) = log(1 + e^diff)
            value = np.logaddexp(0.0, diff).sum()
            p = special.expit(diff)
            grad[pos], grad[neg] = -p.sum(axis=1), p.sum(axis=0)
        else:
            log_zeta = np.logaddexp(s[pos], special.logsumexp(s[neg]))
            value = np.sum(log_zeta - s[pos])
            grad[pos] = np.exp(s[pos] - log_zeta) - 1.0
            grad[neg] = np.exp(s[neg] + special.logsumexp(-log_zeta))
        return value + 0.5 * beta @ beta, Z.T @ grad + beta

    start = np.zeros(Z.shape[1])
    fit = optimize.minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000})
    return fit.x


def linearly_separable(A, y):
    """Whether some ``(b, w)`` puts every training sample on its side with margin 1:
    ``t_n (b + w^T a_n) >= 1`` with ``t = +-1`` (a feasibility linear programme, HiGHS)."""
    t = np.where(y == 1, 1.0, -1.0)
    Z = np.hstack([np.ones((len(y), 1)), A])
    result = optimize.linprog(
        np.zeros(Z.shape[1]),
        A_ub=-(t[:, None] * Z),
        b_ub=-np.ones(len(y)),
        bounds=(None, None),
        method="highs",
    )
    return result.status == 0


def split_rows(cohort, split, A, B, y_train, y_test, models, seed):
    """Per-split rows (``model, metric, value``) of one training/test pair of matrices.

    ``models`` maps a name to a model spec (fitted with ``random_state=seed``); BPROBIT must be
    among them. Adds the two :func:`ranking_map` scorers and the :func:`linearly_separable`
    check. Metrics: ``auroc`` (held out), ``train_auroc`` and, except for BPROBIT,
    ``rank_corr_bprobit`` (Spearman correlation of the held-out scores with BPROBIT's)."""
    scores = {}
    for name, spec in models.items():
        model = make_estimator(spec, seed).fit(A, y_train)
        scores[name] = model.decision_function(A), model.decision_function(B)
    for name, ranking in ((LISTWISE_MAP, "listwise"), (PAIRWISE_MAP, "pairwise")):
        beta = ranking_map(A, y_train, ranking)
        scores[name] = beta[0] + A @ beta[1:], beta[0] + B @ beta[1:]
    rows = [(cohort, SEPARATOR, "train_separable", split, float(linearly_separable(A, y_train)))]
    for name, (train, test) in scores.items():
        rows.append((cohort, name, "auroc", split, auroc(y_test, test)))
        rows.append((cohort, name, "train_auroc", split, auroc(y_train, train)))
        if name != "BPROBIT":
            corr = stats.spearmanr(test, scores["BPROBIT"][1])[0]
            rows.append((cohort, name, "rank_corr_bprobit", split, corr))
    return rows


def real_rows(cohorts, kernel_of, models, settings, seed, claim="b_bam"):
    """:func:`split_rows` on claim ``claim``'s cohorts, splits and fit seeds
    (``{cohort: (X, labels, positive labels)}``; ``kernel_of(cohort)`` names its kernel map)."""
    rows = []
    for cohort, (X, labels, positive) in cohorts.items():
        labels = pd.Series(np.asarray(labels, dtype=object))
        y = labels.isin(positive).to_numpy().astype(int)
        splits = classification_splits(
            labels.to_numpy(),
            "repeated_subsampling",
            random_state=derive_seed(seed, claim, cohort),
            n_splits=settings["n_splits"],
        )
        for split, table in splits.groupby("split"):
            train = table.loc[table["role"] == "train", "sample"].to_numpy()
            test = table.loc[table["role"] == "test", "sample"].to_numpy()
            kernel_map = build_pipeline(
                [{"name": "empirical_kernel_map", "kernel": kernel_of(cohort)}]
            )
            A, B = kernel_map.fit_transform(X[train]), kernel_map.transform(X[test])
            state = derive_seed(seed, claim, cohort, split)
            rows += split_rows(cohort, split, A, B, y[train], y[test], models, state)
    return rows


def planted_rows(models, n_draws, seed):
    """:func:`split_rows` on ``n_draws`` fresh draws of :func:`planted_misranking`, each split
    once 75/25 (stratified) and fitted on every representation of :data:`REPRESENTATIONS`."""
    rows = []
    for draw in range(n_draws):
        rng = np.random.default_rng(derive_seed(seed, RUN, "planted", draw))
        X, y = planted_misranking(rng, **PLANTED)
        table = classification_splits(
            y,
            "repeated_subsampling",
            random_state=derive_seed(seed, RUN, "split", draw),
            n_splits=1,
        )
        train = table.loc[table["role"] == "train", "sample"].to_numpy()
        test = table.loc[table["role"] == "test", "sample"].to_numpy()
        state = derive_seed(seed, RUN, "fit", draw)
        for representation, steps in REPRESENTATIONS.items():
            pipeline = build_pipeline(steps)
            A, B = pipeline.fit_transform(X[train]), pipeline.transform(X[test])
            cohort = f"{PLANTED_NAME}, {representation}"
            rows += split_rows(cohort, draw, A, B, y[train], y[test], models, state)
    return rows


def attribution_rows(cohorts, kernel_of, models, settings, seed):
    """Per-split rows of run ``b_bam_attr`` (``SPLIT_COLUMNS`` of ``benchmarks.fidelity``):
    :func:`real_rows` on ``cohorts`` (``settings["n_splits"]`` splits) and :func:`planted_rows`
    (``settings["n_planted"]`` draws), every estimator at ``models``' specs (in run
    ``b_bam_attr``: claim ``b_bam``'s defaults and :func:`fixed_precision` of them)."""
    rows = real_rows(cohorts, kernel_of, models, settings, seed) if cohorts else []
    rows += planted_rows(models, settings["n_planted"], seed)
    frame = pd.DataFrame(rows, columns=["cohort", "model", "metric", "split", "value"])
    return frame.assign(claim=RUN, protocol="default")[
        ["claim", "protocol", "cohort", "model", "metric", "split", "value"]
    ]
