"""Paper 002's GPLVM rival: the Bayesian inducing-point GPLVM (Titsias and Lawrence 2010;
Damianou et al. 2016) as GPy implements it, scored on held-out entries like the RFLVMs.

GPy is a peer implementation (the ``bench`` extra), imported only when a fit runs.
"""

import numpy as np
from scipy.stats import norm


def gplvm_heldout_loglik(Y, mask, n_latent, n_inducing=50, max_iters=100, random_state=0):
    """Fit GPy's Bayesian GPLVM to ``Y`` without its ``mask`` entries; held-out log likelihood.

    The model is ``GPy.models.BayesianGPLVMMiniBatch`` with ``missing_data=True``, an ARD RBF
    kernel, a Gaussian likelihood with one noise variance, ``n_inducing`` inducing inputs and
    the variational posterior q(x_n) = N(mu_n, diag(s_n)) per sample. With ``missing_data``
    GPy treats NaN entries as absent: its bound is a sum over features, each feature's term
    (VarDTC, psi statistics of q(x)) computed on the samples observed in that feature only, and
    its posterior over the inducing outputs is kept per feature. Start: mu from the PCA of the
    matrix with held-out entries set to the column means of the observed ones, s_n uniform on
    (0, 0.1) and the inducing inputs ``n_inducing`` distinct rows of mu, all drawn from
    ``random_state`` (GPy's global RNG is not used); then ``max_iters`` L-BFGS-B iterations of
    the bound (paper 002 runs every model for 100 iterations).

    The predictive of a held-out entry y_ij is Gaussian with GPy's predictive mean and variance
    at the uncertain input q(x_i) (``predict`` with the ``NormalPosterior``: the psi
    statistics integrate f_j over q(x_i) and q(u_j)) plus the noise variance, i.e. the first
    two moments of p(y_ij | Y_obs) under the variational posterior matched by a Gaussian; the
    score is the sum of log N(y_ij; mean_ij, var_ij) over the held-out entries.

    Parameters
    ----------
    Y : ndarray (n_samples, n_features)
        The full matrix (the held-out entries hold their true values).
    mask : ndarray of bool, same shape
        True where an entry is held out.
    n_latent : int
        Latent dimension.
    n_inducing : int
        Inducing inputs (paper 002: equal to the M = 50 random features).
    max_iters : int
        L-BFGS-B iterations.
    random_state : int

    Returns
    -------
    float
        Sum of the held-out entries' predictive log densities.
    """
    import GPy
    from GPy.core.parameterization.variational import NormalPosterior
    from GPy.models.bayesian_gplvm_minibatch import BayesianGPLVMMiniBatch

    Y = np.asarray(Y, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    if Y.shape != mask.shape or not mask.any() or mask.all(axis=0).any():
        raise ValueError(
            f"mask: expected a boolean matrix of Y's shape {Y.shape} holding out some entries"
            " and leaving every column some observed ones"
        )
    rng = np.random.default_rng(random_state)
    observed = np.where(mask, np.nan, Y)
    filled = np.where(mask, np.nanmean(observed, axis=0), Y)
    centred = filled - filled.mean(0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    mu = u[:, :n_latent] * s[:n_latent] / np.sqrt(len(Y))
    mu /= mu.std(0)
    variance = rng.uniform(0, 0.1, mu.shape)
    inducing = mu[rng.choice(len(Y), size=min(n_inducing, len(Y)), replace=False)]
    model = BayesianGPLVMMiniBatch(
        observed,
        n_latent,
        X=mu,
        X_variance=variance,
        Z=inducing.copy(),
        num_inducing=len(inducing),
        kernel=GPy.kern.RBF(n_latent, ARD=True),
        missing_data=True,
    )
    model.optimize("lbfgsb", max_iters=max_iters)
    q = NormalPosterior(np.asarray(model.X.mean), np.asarray(model.X.variance))
    mean, var = model.predict(q, include_likelihood=True)
    return float(norm.logpdf(Y[mask], mean[mask], np.sqrt(var[mask])).sum())
