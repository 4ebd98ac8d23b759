"""Why IBP RFLVM trails the linear IBP factor model on GSE7390 (claim ``c_rflvm``): planted data
of GSE7390's size with a known map, and a measure of nonlinear structure in each cohort.

Run ``c_rflvm_attribution`` of ``python -m benchmarks.fidelity`` (rows of claims
``c_rflvm_planted`` and ``c_rflvm_nonlinear``):

- **Planted** (:func:`planted_matrix`): two latent dimensions mapped to GSE7390's 76 features
  by a draw of a GP with an RBF kernel (random Fourier features, lengthscale 1 against latent
  sd 1) or by a linear map of the same latent points, each feature scaled to unit signal
  variance, plus Gaussian noise of variance ``noise`` (0.05, near Wisconsin's, or 0.7, near
  GSE7390's), z-scored. IBP RFLVM and the linear IBP model at their defaults, held-out
  log likelihood per entry as in claim ``c_rflvm``. A correct IBP RFLVM is ahead on the
  nonlinear map, and need not be on the linear one.
- **Nonlinear structure** (:func:`pc_regression_r2`): each feature regressed on the leading
  principal components of the other features, by ordinary least squares and by a GP (RBF
  kernel with one lengthscale per component plus white noise, hyperparameters by marginal
  likelihood), cross-validated R^2 over the features, per fold. The GP's gain over the linear
  fit measures how much of what the components explain is nonlinear; computed on the planted
  matrices (calibration) and on the real cohorts of claim ``c_rflvm``.
"""

import numpy as np
import pandas as pd

PLANTED_SHAPE = (198, 76)  # GSE7390's samples and probes (the demo cohort)
PLANTED_LATENT = 2
PLANTED_NOISE = (0.05, 0.7)
PLANTED_MAPS = ("RBF GP map", "linear map")
N_PCS = 3


def planted_matrix(kind, noise, rng, shape=PLANTED_SHAPE, n_latent=PLANTED_LATENT):
    """A z-scored matrix from ``n_latent`` standard normal latent dimensions.

    ``kind`` ``"RBF GP map"``: each feature a draw of a zero-mean GP with an RBF kernel of
    lengthscale 1 (200 random Fourier features); ``"linear map"``: each feature a standard
    normal linear combination of the latent dimensions. Every feature is scaled to unit
    variance, Gaussian noise of variance ``noise`` is added and the columns are z-scored.

    Parameters
    ----------
    kind : {"RBF GP map", "linear map"}
    noise : float
        Noise variance relative to the unit signal variance of each feature.
    rng : numpy.random.Generator
    shape : (int, int)
    n_latent : int

    Returns
    -------
    ndarray of shape ``shape``
    """
    n, p = shape
    X = rng.standard_normal((n, n_latent))
    if kind == "RBF GP map":
        n_freq = 200
        W = rng.standard_normal((n_latent, n_freq))
        b = rng.uniform(0, 2 * np.pi, n_freq)
        F = np.sqrt(2.0 / n_freq) * np.cos(X @ W + b) @ rng.standard_normal((n_freq, p))
    elif kind == "linear map":
        F = X @ rng.standard_normal((n_latent, p))
    else:
        raise ValueError(f"kind: expected one of {PLANTED_MAPS}, got {kind!r}")
    F = (F - F.mean(0)) / F.std(0)
    Y = F + np.sqrt(noise) * rng.standard_normal((n, p))
    return (Y - Y.mean(0)) / Y.std(0)


def pc_regression_r2(Y, n_components=N_PCS, n_folds=5, random_state=0):
    """Cross-validated R^2 of each feature on the leading principal components of the others.

    For each fold of a ``KFold`` over the samples and each feature j: the ``n_components``
    principal components of the training rows of the other features (centred on the training
    rows) give the scores of training and test rows; j is regressed on them by least squares
    and by a GP (constant times ARD RBF plus white noise, ``normalize_y``, hyperparameters by
    marginal likelihood from one start); R^2 of each on the test rows. Returns one row per
    fold: the mean R^2 over the features of each regression.

    Returns
    -------
    pandas.DataFrame
        Columns ``fold``, ``linear``, ``gp``.
    """
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold

    Y = np.asarray(Y, dtype=float)
    rows = []
    folds = KFold(n_folds, shuffle=True, random_state=random_state).split(Y)
    for fold, (train, test) in enumerate(folds):
        scores = {"linear": [], "gp": []}
        for j in range(Y.shape[1]):
            others = np.delete(Y, j, axis=1)
            centre = others[train].mean(0)
            _, _, vt = np.linalg.svd(others[train] - centre, full_matrices=False)
            Z = (others - centre) @ vt[:n_components].T
            Z /= Z[train].std(0)
            y = Y[:, j]
            kernel = ConstantKernel() * RBF(np.ones(n_components)) + WhiteKernel()
            gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=random_state)
            for name, model in (("linear", LinearRegression()), ("gp", gp)):
                model.fit(Z[train], y[train])
                scores[name].append(r2_score(y[test], model.predict(Z[test])))
        rows.append({"fold": fold, **{k: float(np.mean(v)) for k, v in scores.items()}})
    return pd.DataFrame(rows)


def attribution_rows(settings, seed, heldout_specs, real_cohorts):
    """Per-split rows (:data:`benchmarks.fidelity.SPLIT_COLUMNS`) of run
    ``c_rflvm_attribution``: the planted fits and the nonlinear-structure measure.

    Parameters
    ----------
    settings : dict
        ``n_repeats`` (held-out trials per planted matrix), ``cohorts`` (names to keep, as
        ``--cohorts``).
    seed : int
        Decides every planted matrix, held-out mask, fit and fold.
    heldout_specs : dict
        Model name to model spec, fitted on the planted matrices (claim ``c_rflvm``'s models).
    real_cohorts : dict
        Cohort name to its preprocessed matrix (the measure only).
    """
    from omicsbayes._seed import derive_seed
    from omicsbayes.evaluate.splitters import heldout_entry_splits
    from omicsbayes.protocols.heldout_entries import fit_heldout, heldout_mask

    wanted = settings.get("cohorts")
    planted = {
        f"planted {kind}, noise {noise}": (kind, noise)
        for kind in PLANTED_MAPS
        for noise in PLANTED_NOISE
    }
    rows, measured = [], {}
    for cohort, (kind, noise) in planted.items():
        if wanted and not any(w in cohort for w in wanted):
            continue
        rng = np.random.default_rng(derive_seed(seed, "c_rflvm_planted", cohort, "matrix"))
        Y = measured[cohort] = planted_matrix(kind, noise, rng)
        splits = heldout_entry_splits(
            np.ones(Y.shape, dtype=bool),
            fraction=0.2,
            n_repeats=settings["n_repeats"],
            random_state=derive_seed(seed, "c_rflvm_planted", cohort),
        )
        for name, spec in heldout_specs.items():
            for split, table in splits.groupby("split"):
                row, _ = fit_heldout(
                    Y,
                    heldout_mask(Y.shape, table),
                    spec,
                    derive_seed(seed, "c_rflvm_planted", cohort, split),
                )
                value = row["log_likelihood_per_entry"]
                metric = "heldout_loglik_per_entry"
                rows.append(("c_rflvm_attribution", "default", cohort, name, metric, split, value))
                print(f"  c_rflvm_planted {cohort} trial {split} {name}: {value:.3f}", flush=True)
    for cohort, Y in {**measured, **real_cohorts}.items():
        if wanted and not any(w in cohort for w in wanted):
            continue
        r2 = pc_regression_r2(Y, random_state=derive_seed(seed, "c_rflvm_nonlinear", cohort))
        for model, column in ((f"GP on {N_PCS} PCs", "gp"), (f"linear on {N_PCS} PCs", "linear")):
            for fold, value in zip(r2["fold"], r2[column]):
                rows.append(("c_rflvm_attribution", "default", cohort, model, "cv_r2", fold, value))
        print(f"  c_rflvm_nonlinear {cohort}: {r2[['linear', 'gp']].mean().to_dict()}", flush=True)
    return rows
