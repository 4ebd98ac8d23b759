"""Poisson factor analysis (Zhou et al. 2012) and the two-step PFA-L-BSVM classifier.

PFA is the count-data baseline of paper 000 (PFA-L-BSVM, Tables 4-5: counts rounded, PFA fitted,
then a Bayesian SVM on the factor scores) and of paper 002 (Table 2, equation 2).  The model, with
samples ``i``, features ``j`` and factors ``k`` (paper 002, equation 2; Zhou et al. 2012, the
beta-gamma-gamma-Poisson PFA)::

    y_ij ~ Poisson(sum_k phi_jk theta_ik)
    phi_k ~ Dirichlet(eta, ..., eta)                      (loadings, one simplex per factor)
    theta_ik ~ Gamma(r_k, scale p_k / (1 - p_k))          (scores)
    r_k ~ Gamma(a0, rate b0),  p_k ~ Beta(c0 eps0, c0 (1 - eps0))

Paper 002 prints the score prior as Gamma(r_d, (1 - p_d) / p_d); read as shape and *rate* this is
Zhou et al.'s Gamma(r_k, scale p_k / (1 - p_k)), which is what is used here.

Gibbs sampler (Zhou et al. 2012, section 4): each count is split among the factors,
``(y_ij1, ..., y_ijK) ~ Mult(y_ij; zeta_ij)``, ``zeta_ijk ∝ phi_jk theta_ik``, as a chain of
binomials over k vectorised over all nonzero entries; then ``phi_k ~ Dir(eta + y_.jk)``,
``p_k ~ Beta(c0 eps0 + y_..k, c0 (1 - eps0) + N r_k)`` and ``r_k`` from its conditional with
theta integrated out (``y_i.k ~ NB(r_k, p_k)``), followed by ``theta_ik ~ Gamma(r_k + y_i.k,
scale p_k)``.  Zhou et al. draw ``r_k`` through the Chinese-restaurant-table augmentation, whose
cost grows with the size of the counts (rounded microarray intensities reach 10^5); the same
conditional is sampled here by a slice sampler on ``log r_k`` (Neal 2003), whose cost does not.
Missing entries (NaN) are imputed from the model at every sweep (data augmentation), so the
observed entries are the only data the sampler sees.
"""

import logging
from functools import partial
from numbers import Integral, Real

import numpy as np
from scipy import special
from sklearn.base import ClassifierMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _num_samples

from omicsbayes.inference import NumericalError
from omicsbayes.inference.checkpoint import fingerprint
from omicsbayes.models._base import MCMCEstimator
from omicsbayes.models._validation import (
    MCMC_CONSTRAINTS,
    POSITIVE,
    binary_labels,
    check_count_values,
    check_rng,
    heldout_values,
)
from omicsbayes.models.bsvm import BayesianSVM

logger = logging.getLogger("omicsbayes")

_TINY = 1e-300
#: Relative change of a sample's q(theta) shapes at which :func:`fold_in_scores` stops.
_FOLD_IN_TOL = 1e-10


def allocate_counts(counts, rows, cols, theta, phi, rng, unit_max=16):
    """Split counts among factors: ``(y_ij1..y_ijK) ~ Mult(y_ij; zeta_ij)``, ``zeta ∝ phi theta``.

    Zhou et al. 2012, section 4.  Two exact ways of drawing the multinomial, each vectorised over
    all the listed entries with a loop over factors only:

    - entries with ``y_ij <= unit_max``: each of the ``y_ij`` units picks its factor by inverting
      the cumulative rates ``sum_{k' <= k} phi_jk' theta_ik'`` with one uniform (cost grows with
      the count, not with the number of binomial draws);
    - larger counts: a chain of binomials,
      ``y_ijk ~ Bin(y_ij - sum_{k'<k} y_ijk', zeta_ijk / sum_{k'>=k} zeta_ijk')``.

    Parameters
    ----------
    counts : ndarray of int, shape (n_entries,)
    rows, cols : ndarray of int, shape (n_entries,)
        Sample and feature index of each entry.
    theta : ndarray, shape (n_samples, n_factors)
    phi : ndarray, shape (n_features, n_factors)
    rng : numpy.random.Generator
    unit_max : int
        Largest count drawn unit by unit.

    Returns
    -------
    per_sample : ndarray, shape (n_samples, n_factors)
        ``y_i.k``, the counts of each sample allocated to each factor.
    per_feature : ndarray, shape (n_features, n_factors)
        ``y_.jk``.
    """
    n, n_factors = theta.shape
    d = phi.shape[0]
    theta_t, phi_t = np.ascontiguousarray(theta.T), np.ascontiguousarray(phi.T)
    counts = np.asarray(counts, dtype=np.int64)
    small = counts <= unit_max
    per_sample = np.zeros((n, n_factors))
    per_feature = np.zeros((d, n_factors))

    # Unit by unit: factor = number of cumulative rates below u * total rate.
    r_s, c_s = rows[small], cols[small]
    unit_entry = np.repeat(np.arange(r_s.size), counts[small])
    total = np.zeros(r_s.size)
    for k in range(n_factors):
        total += theta_t[k][r_s] * phi_t[k][c_s]
    target = rng.uniform(size=unit_entry.size) * total[unit_entry]
    factor = np.zeros(unit_entry.size, dtype=np.int64)
    cum = np.zeros(r_s.size)
    for k in range(n_factors - 1):
        cum += theta_t[k][r_s] * phi_t[k][c_s]
        factor += target > cum[unit_entry]
    per_sample += np.bincount(
        r_s[unit_entry] * n_factors + factor, minlength=n * n_factors
    ).reshape(n, n_factors)
    per_feature += np.bincount(
        c_s[unit_entry] * n_factors + factor, minlength=d * n_factors
    ).reshape(d, n_factors)

    # Chain of binomials for the large counts.
    r_l, c_l = rows[~small], cols[~small]
    rest = counts[~small]
    rest_rate = np.zeros(r_l.size)
    for k in range(n_factors):
        rest_rate += theta_t[k][r_l] * phi_t[k][c_l]
    for k in range(n_factors):
        if k == n_factors - 1:
            n_k = rest
        else:
            rate = theta_t[k][r_l] * phi_t[k][c_l]
            prob = np.clip(rate / np.maximum(rest_rate, _TINY), 0.0, 1.0)
            n_k = rng.binomial(rest, prob)
            rest = rest - n_k
            rest_rate -= rate
        per_sample[:, k] += np.bincount(r_l, weights=n_k, minlength=n)
        per_feature[:, k] += np.bincount(c_l, weights=n_k, minlength=d)
    return per_sample, per_feature


def _nb_log_r(log_r, per_sample, p, a0, b0):
    """Log conditional of ``u = log r_k`` given ``y_i.k ~ NB(r_k, p_k)`` and ``r_k ~ Ga(a0, b0)``.

    Vectorised over factors; ``log_r`` has shape (n_factors,).
    """
    r = np.exp(log_r)
    n = per_sample.shape[0]
    lik = special.gammaln(per_sample + r).sum(0) - n * special.gammaln(r) + n * r * np.log1p(-p)
    return a0 * log_r - b0 * r + lik  # includes the Jacobian dr/du = r


def sample_phi(per_feature, eta, rng):
    """``phi_k ~ Dirichlet(eta + y_.1k, ..., eta + y_.Jk)`` for every factor (columns)."""
    phi = rng.gamma(eta + per_feature)
    return np.maximum(phi / phi.sum(axis=0, keepdims=True), _TINY)


def sample_p(per_sample, r, c0, eps0, rng):
    """``p_k ~ Beta(c0 eps0 + y_..k, c0 (1 - eps0) + N r_k)``, theta integrated out."""
    n = per_sample.shape[0]
    p = rng.beta(c0 * eps0 + per_sample.sum(0), c0 * (1 - eps0) + n * r)
    return np.clip(p, 1e-12, 1 - 1e-12)


def sample_r(r, per_sample, p, a0, b0, rng, iteration=0):
    """``r_k`` from ``p(r_k | y_.k, p_k)`` with theta integrated out (slice sampler on log r_k)."""
    log_r = slice_sample(
        np.log(r),
        lambda u: _nb_log_r(u, per_sample, p, a0, b0),
        rng,
        what=f"r_k update (iteration {iteration})",
    )
    return np.exp(log_r)


def sample_theta(per_sample, r, p, rng):
    """``theta_ik ~ Gamma(r_k + y_i.k, scale p_k)`` (the loadings sum to one over features)."""
    return np.maximum(rng.gamma(r + per_sample) * p, _TINY)


def slice_sample(x0, logf, rng, width=1.0, max_steps=32, max_shrink=200, what="slice sampler"):
    """One univariate slice-sampling update (Neal 2003, stepping out and shrinkage) per coordinate.

    All coordinates are independent targets updated in lockstep; ``logf`` maps an array of
    positions to the array of log densities.
    """
    x0 = np.asarray(x0, dtype=float)
    level = logf(x0) - rng.exponential(size=x0.shape)
    left = x0 - width * rng.uniform(size=x0.shape)
    right = left + width
    j_steps = np.floor(max_steps * rng.uniform(size=x0.shape))
    k_steps = max_steps - 1 - j_steps
    grow = (j_steps > 0) & (logf(left) > level)
    while grow.any():
        left = np.where(grow, left - width, left)
        j_steps -= grow
        grow = (j_steps > 0) & (logf(left) > level)
    grow = (k_steps > 0) & (logf(right) > level)
    while grow.any():
        right = np.where(grow, right + width, right)
        k_steps -= grow
        grow = (k_steps > 0) & (logf(right) > level)
    x1 = x0.copy()
    todo = np.ones(x0.shape, dtype=bool)
    for _ in range(max_shrink):
        prop = left + (right - left) * rng.uniform(size=x0.shape)
        ok = todo & (logf(prop) > level)
        x1[ok] = prop[ok]
        todo &= ~ok
        if not todo.any():
            return x1
        below = todo & (prop < x0)
        left = np.where(below, prop, left)
        right = np.where(todo & ~below, prop, right)
    raise NumericalError(f"{what} found no point on the slice in {max_shrink} shrinkage steps")


def _fold_in_update(shape, counts, phi, r, log_rate, with_bound=True):
    """One VB update of the shapes ``a`` of q(theta) (:func:`fold_in_scores`), and the
    evidence lower bound at ``shape`` up to a constant, per sample (None unless ``with_bound``).

    With ``zeta`` at its optimum the bound is ``sum_j y_ij log sum_k phi_jk
    exp(E[log theta_ik]) + sum_k ((r_k - a_ik) digamma(a_ik) + log Gamma(a_ik))`` plus terms
    free of ``a``; its gradient in ``a_ik`` is ``trigamma(a_ik) (r_k + sum_j y_ij zeta_ijk -
    a_ik)``, zero at the update's fixed point.
    """
    e_log_theta = special.digamma(shape) - log_rate
    top = e_log_theta.max(axis=1, keepdims=True)
    weight = np.exp(e_log_theta - top)  # exp(E[log theta]) up to a factor that cancels in zeta
    mix = np.maximum(weight @ phi.T, _TINY)
    new = r + weight * ((counts / mix) @ phi)
    if not with_bound:
        return new, None
    bound = (
        np.einsum("ij,ij->i", counts, np.log(mix))
        + counts.sum(1) * top[:, 0]
        + np.sum((r - shape) * special.digamma(shape) + special.gammaln(shape), axis=1)
    )
    return new, bound


def fold_in_scores(X, phi, r, p, max_iter, tol=_FOLD_IN_TOL):
    """Mean-field VB posterior of new samples' scores with the loadings and ``r``, ``p`` fixed.

    For one sample ``i`` with ``y_ij = sum_k y_ijk``, ``y_ijk ~ Poisson(phi_jk theta_ik)`` and
    the prior ``theta_ik ~ Gamma(r_k, rate (1 - p_k) / p_k)``, ``q(theta_i) q(y_i..)`` with
    ``q(y_ij.) = Mult(y_ij; zeta_ij)`` has the coordinate updates of LDA's and GaP's fold-in
    (Blei et al. 2003, equations 6-7; Canny 2004)::

        zeta_ijk ∝ phi_jk exp(E[log theta_ik]),   E[log theta_ik] = digamma(a_ik) - log b_ik
        q(theta_ik) = Gamma(a_ik, rate b_ik),
        a_ik = r_k + sum_j y_ij zeta_ijk,   b_ik = (1 - p_k) / p_k + sum_{j observed} phi_jk

    A missing entry (NaN) sums out of the likelihood (``sum_y Poisson(y) = 1``): it adds
    neither counts nor exposure to ``b_ik``. With every entry observed ``b_ik = 1 / p_k``, the
    rate of the Gibbs conditional :func:`sample_theta`; with one factor ``zeta = 1`` and the
    first update is exact, ``a_i = r + sum_j y_ij``.

    The update of ``a`` is a fixed-point map that, like EM, crawls where factors overlap and
    counts are large; each iteration here is one SQUAREM step (Varadhan and Roland 2008,
    scheme S3): two updates, an extrapolation along them, and an update from the extrapolated
    point, kept where the extrapolated point's bound is at least that after the first update
    (otherwise the second plain update is kept; either way the bound does not fall).
    The first update starts from theta at its prior mean. Each update is a pair of matrix
    products over all samples; a sample stops once its last plain update changed no ``a_ik``
    by more than ``tol`` relative, or after ``max_iter`` iterations, so its result depends on
    its own row only.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
        Counts, NaN where missing.
    phi : ndarray, shape (n_features, n_factors)
        Loadings, each column on the simplex.
    r, p : ndarray, shape (n_factors,)
        Prior shapes and ``p_k`` of the scores.
    max_iter : int
        Largest number of iterations (of three updates each) per sample.
    tol : float
        Relative change of ``a_ik`` below which a sample has converged.

    Returns
    -------
    shape, rate : ndarray, shape (n_samples, n_factors)
        ``a_ik`` and ``b_ik``; the posterior mean of the scores is ``shape / rate``.
    """
    observed = ~np.isnan(X)
    counts = np.where(observed, X, 0.0)
    rate = (1 - p) / p + observed @ phi
    log_rate = np.log(rate)
    prior_mean = np.broadcast_to(r * p / (1 - p), rate.shape)
    weight = prior_mean / prior_mean.max(axis=1, keepdims=True)
    shape = r + weight * ((counts / np.maximum(weight @ phi.T, _TINY)) @ phi)
    active = np.arange(X.shape[0])
    for _ in range(max_iter):
        if not active.size:
            break
        start, log_b = shape[active], log_rate[active]
        y = counts if active.size == counts.shape[0] else counts[active]
        first, _ = _fold_in_update(start, y, phi, r, log_b, with_bound=False)
        second, bound = _fold_in_update(first, y, phi, r, log_b)
        step = first - start
        curvature = second - first - step
        alpha = -np.sqrt(np.sum(step**2, axis=1) / np.maximum(np.sum(curvature**2, axis=1), _TINY))
        alpha = np.clip(alpha, -1e4, -1.0)[:, None]  # -1 gives ``second``
        leap = np.maximum(start - 2 * alpha * step + alpha**2 * curvature, r)
        leapt, leap_bound = _fold_in_update(leap, y, phi, r, log_b)
        done = np.max(np.abs(step) / first, axis=1) < tol
        shape[active] = np.where(
            done[:, None], first, np.where((leap_bound >= bound)[:, None], leapt, second)
        )
        active = active[~done]
    return shape, rate


def _entry_index(X, missing):
    """Observed nonzero entries (counts, rows, cols) and missing entries (rows, cols)."""
    observed = ~missing & (np.nan_to_num(X) > 0)
    rows, cols = np.nonzero(observed)
    return X[observed].astype(np.int64), rows, cols, *np.nonzero(missing)


def _completed_entries(index, theta, phi, rng):
    """Nonzero entries of the completed matrix: the observed ones plus the missing ones imputed,
    ``y_ij ~ Poisson(sum_k phi_jk theta_ik)`` (data augmentation)."""
    counts, rows, cols, m_rows, m_cols = index
    if m_rows.size:
        imputed = rng.poisson(np.einsum("ik,ik->i", theta[m_rows], phi[m_cols]))
        keep = imputed > 0
        rows = np.concatenate([rows, m_rows[keep]])
        cols = np.concatenate([cols, m_cols[keep]])
        counts = np.concatenate([counts, imputed[keep]])
    return counts, rows, cols


class _PFASampler:
    """One PFA Gibbs chain for :func:`~omicsbayes.inference.chain.run_chain` (sweep order of
    Zhou et al. 2012, section 4: allocate, phi, p, r, theta)."""

    def __init__(self, est, X, missing, eps0, rng, state=None):
        self.est, self.X, self.missing, self.eps0, self.rng = est, X, missing, eps0, rng
        self.index = _entry_index(X, missing)
        self.log_fact = float(special.gammaln(X[~missing] + 1).sum())
        if state is not None:
            self.r, self.p, self.phi, self.theta = state
            return
        n, d = X.shape
        K = est.n_factors
        # Start from r = 1, p = 1/2 and a random simplex per factor; theta from the per-sample
        # totals so that the first allocation is on the right scale.
        self.r = np.ones(K)
        self.p = np.full(K, 0.5)
        self.phi = rng.dirichlet(np.ones(d), size=K).T
        n_seen = np.maximum((~missing).sum(1), 1)
        row_mean = np.where(missing, 0.0, X).sum(1) / n_seen * d
        self.theta = np.maximum(row_mean[:, None] / K * rng.gamma(1.0, 1.0, size=(n, K)), 1e-6)

    def sweep(self, it):
        est, rng = self.est, self.rng
        counts, rows, cols = _completed_entries(self.index, self.theta, self.phi, rng)
        per_sample, per_feature = allocate_counts(counts, rows, cols, self.theta, self.phi, rng)
        self.phi = sample_phi(per_feature, est.eta, rng)
        self.p = sample_p(per_sample, self.r, est.c0, self.eps0, rng)
        self.r = sample_r(self.r, per_sample, self.p, est.a0, est.b0, rng, it)
        self.theta = sample_theta(per_sample, self.r, self.p, rng)
        rate = self.theta @ self.phi.T
        obs = ~self.missing
        y = self.X[obs]
        ll = float(np.sum(special.xlogy(y, rate[obs]) - rate[obs]) - self.log_fact)
        return {"log_likelihood": ll}

    def draw(self):
        return {"theta": self.theta, "phi": self.phi, "r": self.r, "p": self.p}

    def state(self):
        return self.r, self.p, self.phi, self.theta

    def final(self):
        return None


class PoissonFactorAnalysis(TransformerMixin, MCMCEstimator):
    """Poisson factor analysis with a Gibbs sampler (Zhou et al. 2012; paper 002, equation 2).

    Parameters
    ----------
    n_factors : int
        Number of factors K (a truncation; the beta prior on ``p_k`` switches off unused ones).
    n_iter : int
        Gibbs sweeps in total, per chain.
    burn_in : int or None
        Sweeps discarded before draws are kept; None means ``n_iter // 2``.
    thin : int
        Keep every ``thin``-th sweep after burn-in.
    n_chains : int
        Independent chains, each seeded from ``random_state``, run in parallel processes where
        cores allow.
    a0, b0 : float
        Gamma(shape a0, rate b0) prior on the score shapes ``r_k``.
    c0 : float
        Beta concentration of ``p_k ~ Beta(c0 eps0, c0 (1 - eps0))``.
    eps0 : float or None
        Beta mean of ``p_k``; None means ``1 / n_factors`` (Zhou et al.'s choice; 1/2 for one
        factor).
    eta : float
        Dirichlet concentration of each loading simplex ``phi_k``.
    n_transform_iter : int
        Largest number of iterations of the VB fold-in of new samples in :meth:`transform`
        (:func:`fold_in_scores`; each iteration is three updates and an extrapolation; a
        sample stops earlier once converged).
    random_state : None, int or numpy.random.Generator
    verbose : bool, default True
        Progress bar.
    checkpoint : str, os.PathLike or None
        File to write the sampler state to every ``checkpoint_every`` sweeps (atomically);
        ``fit`` resumes from it when it was written for the same parameters and data, and gives
        the same draws as an uninterrupted chain. Removed after a successful fit. None: off.
        With several chains, one file per chain (``<checkpoint>.chain<c>``).
    checkpoint_every : int
        Sweeps between checkpoints.

    Attributes
    ----------
    components_ : ndarray, shape (n_factors, n_features)
        Posterior mean of the loadings (each row sums to one), over the first chain's draws
        (factors are identified only up to permutation, so chains are not pooled here).
    scores_ : ndarray, shape (n_samples, n_factors)
        Posterior mean of the training scores theta (first chain).
    r_, p_ : ndarray, shape (n_factors,)
        Posterior means of the score shapes and of ``p_k`` (first chain).
    log_likelihood_ : ndarray, shape (n_iter,)
        Log likelihood of the observed entries after each sweep (first chain).
    idata_ : arviz.InferenceData
        Retained draws of every chain: theta, phi, r and p (posterior), the log likelihood and
        each sample's expected total count ``predictive_mean`` (sample_stats, identifiable:
        R-hat and ESS are computed on them).
    n_iter_ : int

    Notes
    -----
    Each sweep moves the chain by about the spread of its conditionals, which narrows as the
    counts grow. On rounded microarray intensities (up to 2 x 10^4 on GSE7390) the chain's
    worst R-hat is still about 3 after 1,000 sweeps; on the same intensities divided by 256 it
    is near 1.05 (fidelity run ``a_pfa_long``). ``omicsbayes.tl.mcmc_diagnostics(fit.idata_)``
    tells which case a fit is in.

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import PoissonFactorAnalysis
    >>> counts = np.random.default_rng(0).poisson(3.0, size=(30, 12))
    >>> pfa = PoissonFactorAnalysis(n_factors=3, n_iter=20, random_state=0).fit(counts)
    >>> pfa.transform(counts[:4]).shape  # factor scores
    (4, 3)
    >>> mask = np.zeros(counts.shape, dtype=bool)
    >>> mask[:, 0] = True
    >>> bool(np.isfinite(pfa.log_likelihood(counts, mask)))
    True
    """

    capabilities = frozenset({"heldout_scoring", "counts", "mcmc"})

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN = missing
        return tags

    def __init__(
        self,
        n_factors=20,
        n_iter=200,
        burn_in=None,
        thin=1,
        n_chains=1,
        a0=1.0,
        b0=1.0,
        c0=1.0,
        eps0=None,
        eta=0.05,
        n_transform_iter=300,
        random_state=None,
        verbose=True,
        checkpoint=None,
        checkpoint_every=10,
    ):
        self.n_factors = n_factors
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.n_chains = n_chains
        self.a0 = a0
        self.b0 = b0
        self.c0 = c0
        self.eps0 = eps0
        self.eta = eta
        self.n_transform_iter = n_transform_iter
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every

    _parameter_constraints = {
        **MCMC_CONSTRAINTS,
        "n_factors": [Interval(Integral, 1, None, closed="left")],
        **{name: [POSITIVE] for name in ("a0", "b0", "c0", "eta")},
        "eps0": [None, Interval(Real, 0, 1, closed="neither")],
        "n_transform_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def fit(self, X, y=None):
        """Run ``n_chains`` Gibbs chains on a samples x features count matrix (NaN = missing;
        non-negative non-integers are rounded to the nearest count)."""
        burn = self._burn_in()
        eps0 = min(1.0 / self.n_factors, 0.5) if self.eps0 is None else self.eps0
        X = self._check_X(X, reset=True)
        missing = np.isnan(X)
        key = fingerprint(self, X)
        chains = self._sample_chains(
            partial(_PFASampler, self, X, missing, eps0),
            check_rng(self.random_state),
            burn_in=burn,
            fingerprint=key,
        )
        names = ("theta", "phi", "r", "p")
        per_chain = [{k: np.stack([d[k] for d in c.draws]) for k in names} for c in chains]
        first = per_chain[0]  # factors are identified only within a chain
        self.scores_ = first["theta"].mean(0)
        phi_mean = first["phi"].mean(0)
        self.components_ = (phi_mean / phi_mean.sum(0, keepdims=True)).T
        self.r_ = first["r"].mean(0)
        self.p_ = first["p"].mean(0)
        self._draws = {k: np.concatenate([c[k] for c in per_chain]) for k in names}
        self._record_chains(
            chains,
            posterior={k: [c[k] for c in per_chain] for k in names},
            sample_stats={
                "log_likelihood_observed": [c.kept("log_likelihood") for c in chains],
                # expected total count of each sample (phi_k sums to one): identifiable
                "predictive_mean": [c["theta"].sum(2) for c in per_chain],
            },
            coords={"factor": np.arange(self.n_factors)},
            dims={
                "theta": ["row", "factor"],
                "phi": ["feature", "factor"],
                "r": ["factor"],
                "p": ["factor"],
                "predictive_mean": ["row"],
            },
        )
        return self

    def transform(self, X):
        """Factor scores of new samples: the posterior mean of theta with the loadings fixed.

        The loadings are fixed at their posterior mean (``components_``) and ``r``, ``p`` at
        ``r_``, ``p_``; the scores' posterior is the mean-field VB fold-in of
        :func:`fold_in_scores` (``q(theta_ik) = Gamma(a_ik, rate b_ik)``, at most
        ``n_transform_iter`` iterations) and the scores are ``a_ik / b_ik``. NaN entries are
        missing and sum out of the likelihood. The result is deterministic and each sample's
        scores depend on its own values only, not on the samples transformed with it
        (``fit_transform`` is ``fit`` then ``transform``; ``scores_`` keeps the posterior mean
        of the training scores).
        """
        X = self._check_X(X, reset=False)
        shape, rate = fold_in_scores(X, self.components_.T, self.r_, self.p_, self.n_transform_iter)
        return shape / rate

    def _heldout_pointwise(self, X, mask):
        shape = (self.scores_.shape[0], self.n_features_in_)
        rows, cols, y = heldout_values(X, mask, shape)
        check_count_values(y, "the held-out evaluation of PoissonFactorAnalysis")
        theta, phi = self._draws["theta"], self._draws["phi"]
        rate = np.stack(  # (draws, entries); one draw at a time keeps memory at entries x K
            [np.einsum("ik,ik->i", th[rows], ph[cols]) for th, ph in zip(theta, phi)]
        )
        return y, rows, rate, theta

    def log_likelihood(self, X, mask):
        """Posterior predictive log likelihood of the held-out entries (mask True).

        ``sum_ij log( (1/S) sum_s Poisson(y_ij; sum_k phi^s_jk theta^s_ik) )`` over the S retained
        draws; ``X`` is the full matrix with the true held-out values (NaN elsewhere is fine).
        """
        y, _, rate, _ = self._heldout_pointwise(X, mask)
        logp = special.xlogy(y, rate) - rate - special.gammaln(y + 1)
        return float(np.sum(special.logsumexp(logp, axis=0) - np.log(rate.shape[0])))

    def perplexity(self, X, mask):
        """Held-out perplexity ``exp(-sum y_ij log f_ij / sum y_ij)`` over entries with mask True.

        ``f_ij`` is the posterior mean over retained draws of the normalised rate
        ``sum_k phi_jk theta_ik / sum_k theta_ik``, the share of sample i's counts that falls on
        feature j (Zhou et al. 2012; the same definition as ``RFLVM.perplexity``).
        """
        y, rows, rate, theta = self._heldout_pointwise(X, mask)
        if y.sum() <= 0:
            raise ValueError("the held-out entries have no counts; perplexity is undefined")
        share = np.mean(rate / theta.sum(axis=2)[:, rows], axis=0)
        return float(np.exp(-np.sum(special.xlogy(y, share)) / y.sum()))


#: The parameters :class:`PFAClassifier` passes on to :class:`PoissonFactorAnalysis`.
_PFA_PARAMS = (
    "n_factors",
    "n_iter",
    "burn_in",
    "thin",
    "n_chains",
    "a0",
    "b0",
    "c0",
    "eps0",
    "eta",
    "n_transform_iter",
)


def _task_matrix(y, n_samples):
    """Labels as an (n_samples, n_tasks) object array with None where a label is missing."""
    if y is None:
        raise ValueError("PFAClassifier requires y to be passed, but the target y is None")
    y = np.asarray(y, dtype=object)
    if y.ndim not in (1, 2):
        raise ValueError(f"y must have shape (n_samples,) or (n_samples, n_tasks); got {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but y has {y.shape[0]} rows")
    Y = y.reshape(n_samples, -1).copy()
    for idx, value in np.ndenumerate(Y):
        if value is not None and isinstance(value, (float, np.floating)) and np.isnan(value):
            Y[idx] = None
    return Y


class PFAClassifier(ClassifierMixin, TransformerMixin, MCMCEstimator):
    """PFA-L-BSVM (paper 000, Tables 4-5): PFA on rounded counts, then a Bayesian SVM on its scores.

    Two steps, as in the paper: the input (intensities or counts) is rounded to the nearest
    integer and :class:`PoissonFactorAnalysis` is fitted without the labels; its posterior mean
    training scores, standardised with the training mean and standard deviation (the hinge
    margin of 1 fixes the scale the SVM works on), are the features of one
    :class:`~omicsbayes.inference.bsvm.BayesianSVM` per task.  New samples are scored by
    :meth:`PoissonFactorAnalysis.transform` with the loadings fixed.

    Parameters
    ----------
    n_factors, n_iter, burn_in, thin, n_chains, a0, b0, c0, eps0, eta, n_transform_iter
        Passed to :class:`PoissonFactorAnalysis` (the SVMs use its first chain's scores).
    svm_inference : {"vb", "gibbs"}
        Inference of the Bayesian SVMs.
    svm_max_iter : int
        VB iterations of each SVM.
    svm_n_samples, svm_burn_in : int
        Gibbs draws kept and discarded by each SVM.
    random_state : None, int or numpy.random.Generator
    verbose : bool, default True

    Attributes
    ----------
    pfa_ : PoissonFactorAnalysis
    svms_ : list of BayesianSVM, one per task
    classes_ : ndarray (one task) or list of ndarray (several)
    scores_ : ndarray, shape (n_samples, n_factors)
        Training factor scores (posterior means, before standardisation).
    idata_ : arviz.InferenceData
        The draws of ``pfa_``.

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import PFAClassifier
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 20)
    >>> counts = rng.poisson(np.where(y[:, None] == 1, 6.0, 2.0), size=(40, 10))
    >>> clf = PFAClassifier(n_factors=3, n_iter=20, random_state=0).fit(counts, y)
    >>> clf.decision_function(counts[:4]).shape
    (4,)
    >>> bool((clf.predict(counts) == y).mean() > 0.7)
    True
    """

    capabilities = frozenset({"classifier", "multi_task", "counts", "mcmc"})

    def __init__(
        self,
        n_factors=20,
        n_iter=200,
        burn_in=None,
        thin=1,
        n_chains=1,
        a0=1.0,
        b0=1.0,
        c0=1.0,
        eps0=None,
        eta=0.05,
        n_transform_iter=300,
        svm_inference="vb",
        svm_max_iter=200,
        svm_n_samples=500,
        svm_burn_in=500,
        random_state=None,
        verbose=True,
    ):
        self.n_factors = n_factors
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.n_chains = n_chains
        self.a0 = a0
        self.b0 = b0
        self.c0 = c0
        self.eps0 = eps0
        self.eta = eta
        self.n_transform_iter = n_transform_iter
        self.svm_inference = svm_inference
        self.svm_max_iter = svm_max_iter
        self.svm_n_samples = svm_n_samples
        self.svm_burn_in = svm_burn_in
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints = {
        **{
            name: PoissonFactorAnalysis._parameter_constraints[name]
            for name in (*_PFA_PARAMS, "random_state", "verbose")
        },
        "svm_inference": [StrOptions({"vb", "gibbs"})],
        "svm_max_iter": [Interval(Integral, 1, None, closed="left")],
        "svm_n_samples": [Interval(Integral, 1, None, closed="left")],
        "svm_burn_in": [Interval(Integral, 0, None, closed="left")],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN = missing
        tags.classifier_tags.multi_class = False  # one binary Bayesian SVM per task
        # scikit-learn's accuracy check fits two blob features shifted to 0-5: rounded to
        # counts they leave a count factor model too little (0.66-0.92 by seed and n_iter)
        tags.classifier_tags.poor_score = True
        return tags

    def _features(self, theta):
        return (theta - self._score_mean) / self._score_sd

    def fit(self, X, y):
        """Fit PFA on ``round(X)`` (NaN = missing), then one Bayesian SVM per task.

        ``y`` has shape (n_samples,) with two class labels, or (n_samples, n_tasks) with NaN or
        None where a sample has no label for that task.
        """
        Y = _task_matrix(y, _num_samples(X))  # labels first: a bad y is refused before X
        tasks = []
        for t in range(Y.shape[1]):
            labelled = np.array([v is not None for v in Y[:, t]])
            if labelled.sum() < 2:
                raise ValueError(
                    f"y has {labelled.sum()} sample(s) labelled for task {t}; PFAClassifier "
                    "needs at least 2"
                )
            labels = np.asarray(Y[labelled, t].tolist())
            binary_labels(labels, "PFAClassifier", len(labels))  # refused before PFA runs
            tasks.append((labelled, labels))
        X = self._check_X(X, reset=True)
        rng = check_rng(self.random_state)
        self.pfa_ = PoissonFactorAnalysis(
            **{name: getattr(self, name) for name in _PFA_PARAMS},
            random_state=int(rng.integers(2**63 - 1)),
            verbose=self.verbose,
        ).fit(X)
        self.scores_ = self.pfa_.scores_
        self._score_mean = self.scores_.mean(0)
        self._score_sd = np.maximum(self.scores_.std(0), 1e-12)
        Z = self._features(self.scores_)
        self.svms_ = []
        for labelled, labels in tasks:
            svm = BayesianSVM(
                inference=self.svm_inference,
                max_iter=self.svm_max_iter,
                n_samples=self.svm_n_samples,
                burn_in=self.svm_burn_in,
                random_state=int(rng.integers(2**63 - 1)),
                verbose=self.verbose,
            )
            self.svms_.append(svm.fit(Z[labelled], labels))
        self._multi = np.asarray(y, dtype=object).ndim == 2
        self.classes_ = [s.classes_ for s in self.svms_] if self._multi else self.svms_[0].classes_
        self.n_iter_ = self.pfa_.n_iter_
        self.idata_ = self.pfa_.idata_
        return self

    def transform(self, X):
        """PFA factor scores of new samples (rounded to counts first), loadings fixed."""
        return self.pfa_.transform(self._check_X(X, reset=False))

    def decision_function(self, X):
        """SVM score per task; shape (n_samples,) for one task, (n_samples, n_tasks) otherwise.

        Positive favours ``classes_[1]`` (of that task).
        """
        Z = self._features(self.transform(X))
        scores = np.column_stack([svm.decision_function(Z) for svm in self.svms_])
        return scores if self._multi else scores[:, 0]

    def predict(self, X):
        """Labels per task, from the sign of :meth:`decision_function`."""
        scores = self.decision_function(X)
        scores = scores.reshape(scores.shape[0], -1)
        labels = [svm.classes_[(scores[:, t] > 0).astype(int)] for t, svm in enumerate(self.svms_)]
        return np.column_stack(labels) if self._multi else labels[0]
