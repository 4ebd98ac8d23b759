"""Linear-Gaussian sparse factor model with an Indian buffet process prior (IBP LFM).

The baseline of paper 002, Table 1 (equation 6; Knowles & Ghahramani 2011)::

    Z ~ IBP(alpha),  x_ik ~ N(0, 1),  w_kj ~ N(0, sigma_a^2),
    y_ij ~ N(sum_k z_ik x_ik w_kj, 1 / lambda_j)

with gamma priors (shape, rate) on the noise precisions ``lambda_j`` (one per feature, as in
Knowles & Ghahramani), on the loading precision ``1 / sigma_a^2`` and on ``alpha``.  Paper 002
writes ``w_j ~ N(mu_w, Sigma_w)``; here ``mu_w = 0`` and ``Sigma_w = sigma_a^2 I``.

Gibbs sampler, one sweep:

1. For every sample i (sequential, compiled with numba), for every feature k that another sample
   also uses, ``(z_ik, x_ik)`` jointly: ``x_ik`` is integrated out of ``p(z_ik | .)``
   (Griffiths & Ghahramani 2011 collapsed prior ``m_-ik / N``), then drawn from its Gaussian
   conditional when ``z_ik = 1``.  Then the sample's singleton features (used by no other sample)
   are replaced by ``kappa ~ Poisson(alpha / N)`` new ones, with slab values from the prior and
   the new loadings integrated out (Metropolis-Hastings with the prior as proposal, so the
   acceptance ratio is the marginal likelihood ratio; Knowles & Ghahramani 2011, section 3);
   the new loadings are then drawn from their conditional.
2. Loadings ``w_j`` from their Gaussian conditionals (a batch of K x K solves over features).
3. ``lambda_j``, ``1 / sigma_a^2`` and ``alpha ~ Ga(a + K+, b + H_N)`` from their gamma
   conditionals.

Missing entries (NaN) are left out of every likelihood term: the sampler never reads them.
"""

from functools import partial
from numbers import Integral

import numpy as np
from numba import njit
from scipy import special
from sklearn.utils._param_validation import Interval

from omicsbayes.inference.checkpoint import fingerprint
from omicsbayes.models._base import MCMCEstimator
from omicsbayes.models._validation import MCMC_CONSTRAINTS, POSITIVE, check_rng, heldout_values

_LOG_2PI = np.log(2 * np.pi)


@njit(cache=True)
def _marginal_row(e, o, lam, extra_var):
    """log N(e_j; 0, 1/lam_j + extra_var) summed over the observed entries of one row."""
    total = 0.0
    for j in range(e.shape[0]):
        if o[j] > 0:
            var = 1.0 / lam[j] + extra_var
            total -= 0.5 * (np.log(2 * np.pi * var) + e[j] * e[j] / var)
    return total


@njit(cache=True)
def _z_conditional(e, o, lam, w, m_rest, n):
    """Log odds of ``z_ik = 1`` with ``x_ik ~ N(0, 1)`` integrated out, and ``x_ik | z_ik = 1``.

    ``e`` is the row's observed residual without feature k.  Returns
    ``(log odds, mean, precision)`` with precision ``1 + sum_j o_j lam_j w_j^2`` and mean
    ``sum_j o_j lam_j w_j e_j / precision``; the prior odds are ``m_-ik / (N - m_-ik)``.
    """
    a = 0.0
    b = 0.0
    for j in range(e.shape[0]):
        lw = o[j] * lam[j] * w[j]
        a += lw * w[j]
        b += lw * e[j]
    prec = 1.0 + a
    logit = np.log(m_rest) - np.log(n - m_rest) - 0.5 * np.log(prec) + 0.5 * b * b / prec
    return logit, b / prec, prec


@njit(cache=True)
def _z_sweep(O, E, Z, S, W, m, n_used, lam, sa2, kappa, draws):
    """One sequential sweep over samples of the (z, x) updates and the singleton proposals.

    ``E`` holds the residual ``(Y - (Z*S) W) * O`` and is kept current; ``Z, S, W, m`` have
    capacity for ``n_used + kappa.sum()`` features, of which the first ``n_used`` are in use
    (slots with ``m == 0`` are dead).  ``draws`` are the random numbers, drawn beforehand from
    the estimator's Generator: uniforms and normals per (sample, slot), a uniform per sample, and
    normals for the new slab values, new loadings and noise.  Returns the new number of used slots.
    """
    u_z, g_s, u_acc, g_v, g_w, g_noise = draws
    n, d = E.shape
    offset = 0
    for i in range(n):
        e = E[i]
        o = O[i]
        for k in range(n_used):
            if m[k] == 0:
                continue
            m_rest = m[k] - Z[i, k]
            if m_rest == 0:
                continue  # a singleton of sample i: handled by the proposal below
            w = W[k]
            if Z[i, k]:
                s = S[i, k]
                for j in range(d):
                    e[j] += s * w[j] * o[j]
            logit, mean, prec = _z_conditional(e, o, lam, w, m_rest, n)
            if u_z[i, k] * (1.0 + np.exp(-logit)) < 1.0:
                s = mean + g_s[i, k] / np.sqrt(prec)
                for j in range(d):
                    e[j] -= s * w[j] * o[j]
                S[i, k] = s
                Z[i, k] = 1
            else:
                S[i, k] = 0.0
                Z[i, k] = 0
            m[k] = m_rest + Z[i, k]
        # Singletons of sample i: their loadings are integrated out in both states.
        ss_old = 0.0
        for k in range(n_used):
            if m[k] == 1 and Z[i, k] == 1:
                ss_old += S[i, k] * S[i, k]
                for j in range(d):
                    e[j] += S[i, k] * W[k, j] * o[j]
        n_new = kappa[i]
        v = g_v[offset : offset + n_new]
        ss_new = 0.0
        for t in range(n_new):
            ss_new += v[t] * v[t]
        log_ratio = _marginal_row(e, o, lam, sa2 * ss_new) - _marginal_row(e, o, lam, sa2 * ss_old)
        if np.log(u_acc[i]) < log_ratio:
            for k in range(n_used):
                if m[k] == 1 and Z[i, k] == 1:
                    m[k] = 0
                    Z[i, k] = 0
                    S[i, k] = 0.0
            sd_a = np.sqrt(sa2)
            for t in range(n_new):
                k = n_used + t
                Z[i, k] = 1
                S[i, k] = v[t]
                m[k] = 1
            for j in range(d):
                # Draw from N(0, sa2 I) given e_j = v.w + noise (Matheron's rule).
                wp = sd_a * g_w[offset : offset + n_new, j]
                if o[j] > 0:
                    noise = g_noise[i, j] / np.sqrt(lam[j])
                    resid = e[j] - noise
                    for t in range(n_new):
                        resid -= v[t] * wp[t]
                    gain = resid / (sa2 * ss_new + 1.0 / lam[j])
                    for t in range(n_new):
                        wp[t] += sa2 * v[t] * gain
                for t in range(n_new):
                    W[n_used + t, j] = wp[t]
            n_used += n_new
        offset += n_new
        for k in range(n_used):
            if m[k] == 1 and Z[i, k] == 1:
                for j in range(d):
                    e[j] -= S[i, k] * W[k, j] * o[j]
    return n_used


class IBPState:
    """Sampler state: ``Z, S`` (samples x features), ``W`` (features x outputs), feature ids."""

    def __init__(self, Z, S, W, ids, next_id):
        self.Z, self.S, self.W, self.ids, self.next_id = Z, S, W, ids, next_id

    @property
    def latent(self):
        return self.Z * self.S


def z_step(state, O, E, lam, sa2, alpha, rng):
    """Step 1: the (z, x) sweep and the singleton proposals; drops features no sample uses.

    ``E`` (the observed residual) is updated in place.
    """
    n = O.shape[0]
    kappa = rng.poisson(alpha / n, size=n).astype(np.int64)
    k_used = state.Z.shape[1]
    cap = k_used + int(kappa.sum())
    Z = np.zeros((n, cap), dtype=np.int64)
    S = np.zeros((n, cap))
    W = np.zeros((cap, O.shape[1]))
    Z[:, :k_used], S[:, :k_used], W[:k_used] = state.Z, state.S, state.W
    m = Z.sum(0)
    n_new = int(kappa.sum())
    draws = (
        rng.uniform(size=(n, cap)),
        rng.standard_normal((n, cap)),
        rng.uniform(size=n),
        rng.standard_normal(n_new),
        rng.standard_normal((n_new, O.shape[1])),
        np.zeros((n, O.shape[1])),
    )
    draws[5][kappa > 0] = rng.standard_normal((int(np.count_nonzero(kappa)), O.shape[1]))
    k_after = _z_sweep(O, E, Z, S, W, m, k_used, lam, sa2, kappa, draws)
    ids = np.concatenate([state.ids, state.next_id + np.arange(k_after - k_used)])
    alive = m[:k_after] > 0
    state.Z, state.S, state.W = (
        Z[:, :k_after][:, alive],
        S[:, :k_after][:, alive],
        W[:k_after][alive],
    )
    state.ids, state.next_id = ids[alive], state.next_id + k_after - k_used
    return state


def sample_loadings(X, Yc, O, lam, tau, rng):
    """Step 2: ``w_j ~ N(P_j^-1 h_j, P_j^-1)``, ``P_j = tau I + lam_j sum_obs x_i x_i^T``,
    ``h_j = lam_j sum_obs x_i y_ij``, for all features j at once."""
    n, k = X.shape
    d = O.shape[1]
    if k == 0:
        return np.zeros((0, d))
    outer = (X[:, :, None] * X[:, None, :]).reshape(n, k * k)
    gram = (O.T @ outer).reshape(d, k, k)
    prec = lam[:, None, None] * gram + tau * np.eye(k)
    h = lam[:, None] * (Yc.T @ X)
    chol = np.linalg.cholesky(prec)
    mean = np.linalg.solve(prec, h[:, :, None])[:, :, 0]
    eps = rng.standard_normal((d, k, 1))
    return (mean + np.linalg.solve(np.swapaxes(chol, 1, 2), eps)[:, :, 0]).T


def sample_noise_precision(E, n_obs, prior, rng):
    """Step 3: ``lambda_j ~ Ga(a + n_j / 2, b + sum_obs e_ij^2 / 2)``, E the observed residual."""
    a, b = prior
    return rng.gamma(a + n_obs / 2) / (b + 0.5 * np.sum(E**2, axis=0))


def sample_loading_precision(W, prior, rng):
    """Step 3: ``1 / sigma_a^2 ~ Ga(a + K J / 2, b + ||W||^2 / 2)``."""
    a, b = prior
    return rng.gamma(a + W.size / 2) / (b + 0.5 * np.sum(W**2))


def sample_alpha(k_plus, n, prior, rng):
    """Step 3: ``alpha ~ Ga(a + K+, b + H_N)``, as ``P(Z | alpha) ∝ alpha^K+ exp(-alpha H_N)``."""
    a, b = prior
    return rng.gamma(a + k_plus) / (b + np.sum(1.0 / np.arange(1, n + 1)))


class _IBPSampler:
    """One Gibbs chain of the IBP factor model for
    :func:`~omicsbayes.inference.chain.run_chain` (steps 1-3 of the module docstring)."""

    def __init__(self, est, Y, missing, rng, state=None):
        self.est, self.rng = est, rng
        self.O = (~missing).astype(float)
        self.Yc = np.where(missing, 0.0, Y)
        self.n_obs = self.O.sum(0)
        if state is not None:
            (self.ibp, self.E, self.alpha, self.lam, self.tau) = state
            self.X = self.ibp.latent
            return
        n, d = Y.shape
        self.alpha = float(est.alpha)
        self.lam = np.full(d, 1.0 / est.sigma_x**2)
        self.tau = 1.0 / est.sigma_a**2
        k0 = est.n_init_features
        Z = (rng.uniform(size=(n, k0)) < 0.5).astype(np.int64)
        S = rng.standard_normal((n, k0)) * Z
        self.ibp = IBPState(Z, S, np.zeros((k0, d)), np.arange(k0), k0)
        self.ibp.W = sample_loadings(self.ibp.latent, self.Yc, self.O, self.lam, self.tau, rng)
        self.E = (self.Yc - self.ibp.latent @ self.ibp.W) * self.O
        self.X = self.ibp.latent

    def sweep(self, it):
        est, rng, st = self.est, self.rng, self.ibp
        st = self.ibp = z_step(st, self.O, self.E, self.lam, 1.0 / self.tau, self.alpha, rng)
        self.X = st.latent
        st.W = sample_loadings(self.X, self.Yc, self.O, self.lam, self.tau, rng)
        self.E = (self.Yc - self.X @ st.W) * self.O
        k_plus = self.X.shape[1]
        if est.noise_prior is not None:
            self.lam = sample_noise_precision(self.E, self.n_obs, est.noise_prior, rng)
        if est.loading_prior is not None:
            self.tau = sample_loading_precision(st.W, est.loading_prior, rng)
        if est.alpha_prior is not None:
            self.alpha = sample_alpha(k_plus, self.X.shape[0], est.alpha_prior, rng)
        lam = self.lam
        ll = float(
            -0.5 * np.sum(self.n_obs * (_LOG_2PI - np.log(lam))) - 0.5 * np.sum(lam * self.E**2)
        )
        return {"log_likelihood": ll, "n_active": k_plus, "alpha": self.alpha, "tau": self.tau}

    def draw(self):
        return {
            "latent": self.X.copy(),
            "W": self.ibp.W.copy(),
            "lam": self.lam,
            "ids": self.ibp.ids,
            # each sample's fitted value averaged over features: identified (unlike Z, X, W)
            "predictive_mean": self.X @ self.ibp.W.mean(axis=1),
        }

    def state(self):
        return self.ibp, self.E, self.alpha, self.lam, self.tau

    def final(self):
        return {"ids": self.ibp.ids, "W": self.ibp.W}


class IBPFactorModel(MCMCEstimator):
    """Linear sparse factor model with an IBP prior, Gibbs sampling (paper 002, equation 6).

    Parameters
    ----------
    n_iter : int
        Gibbs sweeps in total, per chain.
    burn_in : int or None
        Sweeps discarded before draws are kept; None means ``n_iter // 2``.
    thin : int
        Keep every ``thin``-th sweep after burn-in.
    n_chains : int
        Independent chains, each seeded from ``random_state``, run in parallel processes where
        cores allow; :meth:`log_likelihood` averages over the draws of all of them.
    alpha : float
        Initial IBP concentration (fixed when ``alpha_prior`` is None).
    sigma_x : float
        Initial noise standard deviation (all features).
    sigma_a : float
        Initial loading standard deviation.
    alpha_prior, noise_prior, loading_prior : (float, float) or None
        Gamma (shape, rate) priors on alpha, on each noise precision and on the loading
        precision; None keeps that quantity fixed at its initial value.
    n_init_features : int
        Features at the start, each sample on with probability 1/2 (paper 002, section 4,
        starts the infinite models from two).
    random_state : None, int or numpy.random.Generator
    verbose : bool, default True
    checkpoint : str, os.PathLike or None
        File to write the sampler state to every ``checkpoint_every`` sweeps (atomically);
        ``fit`` resumes from it when it was written for the same parameters and data, and gives
        the same draws as an uninterrupted chain. Removed after a successful fit. None: off.
    checkpoint_every : int
        Sweeps between checkpoints (one file per chain, ``<checkpoint>.chain<c>``, for several).

    Attributes
    ----------
    latent_ : ndarray, shape (n_samples, n_features_final)
        Posterior mean of ``Z * X`` over the first chain's retained draws for the features alive
        at its end (a feature keeps its identity across sweeps; absent counts as zero).
    loadings_ : ndarray, shape (n_outputs, n_features_final)
        Loadings of the first chain's final draw, one row per column of ``Y`` (genes x latent
        features, as every model's ``loadings_``).
    n_active_ : ndarray of int, shape (n_iter,)
        Number of active features after each sweep (first chain).
    alpha_ : ndarray, shape (n_iter,)
        IBP concentration after each sweep (first chain).
    log_likelihood_ : ndarray, shape (n_iter,)
        Log likelihood of the observed entries after each sweep (first chain).
    idata_ : arviz.InferenceData
        Retained draws of every chain: alpha, n_active, sigma_a and the noise precisions, and
        the log likelihood and each sample's fitted value averaged over features
        ``predictive_mean`` (sample_stats; identifiable, for R-hat and ESS).
    n_iter_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import IBPFactorModel
    >>> rng = np.random.default_rng(0)
    >>> Y = rng.normal(size=(30, 2)) @ rng.normal(size=(2, 8)) + 0.1 * rng.normal(size=(30, 8))
    >>> mask = rng.random(Y.shape) < 0.1  # entries to hold out
    >>> model = IBPFactorModel(n_iter=30, random_state=0).fit(np.where(mask, np.nan, Y))
    >>> model.n_iter_
    30
    >>> bool(np.isfinite(model.log_likelihood(Y, mask)))
    True
    """

    capabilities = frozenset({"heldout_scoring", "mcmc"})

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN = missing
        return tags

    def __init__(
        self,
        n_iter=200,
        burn_in=None,
        thin=1,
        n_chains=1,
        alpha=1.0,
        sigma_x=1.0,
        sigma_a=1.0,
        alpha_prior=(1.0, 1.0),
        noise_prior=(1.0, 1.0),
        loading_prior=(1.0, 1.0),
        n_init_features=2,
        random_state=None,
        verbose=True,
        checkpoint=None,
        checkpoint_every=10,
    ):
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.n_chains = n_chains
        self.alpha = alpha
        self.sigma_x = sigma_x
        self.sigma_a = sigma_a
        self.alpha_prior = alpha_prior
        self.noise_prior = noise_prior
        self.loading_prior = loading_prior
        self.n_init_features = n_init_features
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every

    _parameter_constraints = {
        **MCMC_CONSTRAINTS,
        **{name: [POSITIVE] for name in ("alpha", "sigma_x", "sigma_a")},
        **{
            name: [None, tuple, list, np.ndarray]  # arrays: params read back from an h5ad file
            for name in ("alpha_prior", "noise_prior", "loading_prior")
        },
        "n_init_features": [Interval(Integral, 0, None, closed="left")],
    }

    def _validate_params(self):
        """scikit-learn's checks, then each gamma prior a (shape, rate) pair of positive numbers."""
        super()._validate_params()
        for name in ("alpha_prior", "noise_prior", "loading_prior"):
            value = getattr(self, name)
            if value is not None and (len(value) != 2 or not min(value) > 0):
                raise ValueError(
                    f"The {name!r} parameter of IBPFactorModel must be None or a (shape, rate) "
                    f"pair of positive numbers. Got {value!r} instead."
                )

    def fit(self, Y, y=None):
        """Run ``n_chains`` Gibbs chains on Y (samples x features, NaN = missing)."""
        burn = self._burn_in()
        Y = self._check_X(Y, reset=True)
        if Y.shape[0] < 2:
            raise ValueError(f"Y has {Y.shape[0]} sample; IBPFactorModel needs at least 2")
        missing = np.isnan(Y)
        key = fingerprint(self, Y)
        chains = self._sample_chains(
            partial(_IBPSampler, self, Y, missing),
            check_rng(self.random_state),
            burn_in=burn,
            fingerprint=key,
        )
        first = chains[0]  # features are identified only within a chain
        latent_sum = {}
        for d in first.draws:
            for col, fid in enumerate(d["ids"]):
                latent_sum[fid] = latent_sum.get(fid, 0.0) + d["latent"][:, col]
        ids = first.final["ids"]
        self.latent_ = np.zeros((Y.shape[0], ids.size))
        for col, fid in enumerate(ids):
            self.latent_[:, col] = latent_sum.get(fid, 0.0) / len(first.draws)
        self.loadings_ = first.final["W"].T
        self.n_active_ = first.traces["n_active"]
        self.alpha_ = first.traces["alpha"]
        self._n_samples = Y.shape[0]
        draws = [d for c in chains for d in c.draws]
        self._draws = {
            "latent": [d["latent"] for d in draws],
            "W": [d["W"] for d in draws],
            "lam": np.stack([d["lam"] for d in draws]),
        }
        self._record_chains(
            chains,
            posterior={
                "alpha": [c.kept("alpha") for c in chains],
                "n_active": [c.kept("n_active") for c in chains],
                "sigma_a": [1.0 / np.sqrt(c.kept("tau")) for c in chains],
                "noise_precision": [np.stack([d["lam"] for d in c.draws]) for c in chains],
            },
            sample_stats={
                "log_likelihood_observed": [c.kept("log_likelihood") for c in chains],
                "predictive_mean": [
                    np.stack([d["predictive_mean"] for d in c.draws]) for c in chains
                ],
            },
            dims={"noise_precision": ["feature"], "predictive_mean": ["row"]},
        )
        return self

    def log_likelihood(self, Y, mask):
        """Posterior predictive log likelihood of the held-out entries (mask True).

        ``sum_ij log( (1/S) sum_s N(y_ij; (z_i x_i)^s w_j^s, 1/lambda_j^s) )`` over the S retained
        draws; ``Y`` is the full matrix with the true held-out values.
        """
        rows, cols, y = heldout_values(Y, mask, (self._n_samples, self.n_features_in_), "Y")
        logp = np.empty((len(self._draws["W"]), y.size))
        for s, (X, W) in enumerate(zip(self._draws["latent"], self._draws["W"])):
            mu = np.einsum("ik,ki->i", X[rows], W[:, cols])
            lam = self._draws["lam"][s, cols]
            logp[s] = -0.5 * (_LOG_2PI - np.log(lam) + lam * (y - mu) ** 2)
        return float(np.sum(special.logsumexp(logp, axis=0) - np.log(logp.shape[0])))
