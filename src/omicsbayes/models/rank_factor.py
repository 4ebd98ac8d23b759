"""Discriminative factor models with the max-margin rank likelihood (paper 000, Yuan et al. 2015).

Data ``X`` are (n_samples, n_features) here (the paper's ``X`` is its transpose).  Every data
likelihood and every label likelihood reduces, given its augmentation variables, to a Gaussian
quadratic form in ``w_{n,i} = a_i^T z_n`` (and ``f_n = beta^T z_n + b``)::

    log L = -1/2 P_{n,i} w_{n,i}^2 + H_{n,i} w_{n,i} + const,

so A, Z and beta share one conjugate update:

==============  =================================  ========================================
likelihood      P                                  H
==============  =================================  ========================================
gaussian        tau_i (noise precision, Gamma)     tau_i x_{n,i}
rank (Hoff)     1                                  E[w], w ~ TN(a^T z, 1, w^l, w^u)
maxmargin exact 1/lam^l + 1/lam^u                  (w^l + eps)/lam^l + (w^u - eps)/lam^u
bsvm labels     1/lam^c                            y (1 + 1/lam^c)  (eq. 8)
probit labels   1                                  E[s], s ~ TN(f, 1, sign y)
==============  =================================  ========================================

(maxmargin row: expanding eq. 7; it is the paper's Delta^{(k)}_{i,n} of section 7 summed over the
coordinate updates, plus +-1 at the ends of a row, see below.)  A, Z and beta are
updated in blocks (rows of A, columns of Z, one coefficient vector per task) rather than
coordinate-wise over k as printed; the coordinate-wise updates of sections 7-8 are the
fully-factorised special case.

Two forms of the max-margin rank likelihood (``maxmargin_form``):

* ``"exact"`` -- as printed: ``w = a^T z`` exactly (sections 2-3, 7), the pseudo-likelihood of
  eq. 6 with neighbours fixed, P and H as in the table.  On noisy data this form has its optimum
  at a vanishing scale of w (every margin violated by eps costs only 2 eps per term, while a
  misordered spread costs in proportion to the scale), and VB and Gibbs both contract the
  loadings to zero (observed on simulated cohorts; held-out AUROC well below the Gaussian model).
* ``"latent"`` (default) -- eq. 1 kept: ``w = a^T z + v``, ``v ~ N(0, 1)``, with the max-margin
  pseudo-likelihood (eqs. 5-7) on the latent w, which is drawn from its augmented conditional
  (Gaussian given lambda); A and Z then see P = 1, H = w.  In VB, E[w] under the optimal q(W)
  (no closed form) is a Robbins-Monro average of draws (see ``_Engine._maxmargin_latent``).

Errata applied (ERRATA.md, 000) and found here:

* Section 7/8, sigma_{a_{i,k}}^{-2}: the printed sum uses ``lambda_{i,n}^{-1}``, but with
  ``lambda_{i,n} = 1/lam^l + 1/lam^u`` as defined there, the quadratic term of eq. 7 has weight
  ``lambda_{i,n}`` itself (consistent with the ``a_{i,k} z_{k,n} lambda_{i,n}`` term of Delta).
  Likewise in sigma_{z_{k,n}}^{-2}.
* Delta_{i,n}^{(k)} (section 7) omits the terms linear in w of the augmented density (the
  ``-u`` of ``-(u + lam)^2 / (2 lam)``): they cancel when both neighbours exist, but for the
  smallest (largest) value of a row they add +1 (-1) to H.
* Neighbours: ``w^l`` is the running maximum of ``w`` over strictly smaller values of the row,
  ``w^u`` the running minimum over strictly larger ones; ties are neither; at the ends the
  missing side is absent (``1/lam = 0``).  Neighbours are fixed when updating A, Z and w
  (pseudo-likelihood, as published).
* Lambda updates (sections 7-8): VB uses second moments, ``E[1/lam] = E[u^2]^(-1/2)``, with
  ``E[u^2] = (<w^l> + eps - <w>)^2 + Var(w)`` (neighbour fixed); Gibbs draws IG(1/|u|, 1).
* <Gamma_{k,n}> and <beta_k> (section 8): the block form above is the corrected one.
* Shrinkage conditionals: see :mod:`omicsbayes.inference.tpbn`.
* DP mixture: psi_t ~ Ga(psi_s + K n_t / 2, psi_r + sum ||z_n - mu_t||^2 / 2); prior precision of
  z_n is psi_{t(n)}, with mean mu_{t(n)}; p(t(n) = t) includes the label pseudo-likelihood in
  training and not at prediction.
"""

import functools
import math
import types
from numbers import Integral, Real

import numpy as np
from numba import njit, prange
from scipy import linalg, special
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from ..inference.bsvm import (
    expected_hinge,
    expected_inv_lambda,
    sample_inv_lambda,
)
from ..inference.chain import chains_to_idata, run_chain, run_vb, sample_chains
from ..inference.convergence import check_finite
from ..inference.stick_breaking import (
    alpha_posterior,
    expected_log_1m_nu,
    expected_log_weights,
    sample_categorical,
    stick_posterior,
    stick_weights,
)
from ..inference.tpbn import TPBNShrinkage
from ..inference.truncnorm import _log_diff_cdf, sample_truncnorm, truncnorm_moments
from ._base import MCMC_CONSTRAINTS, POSITIVE, SMALL_PROBLEM, check_rng, limit_blas

VARIANTS = {
    "G-L-Probit": ("gaussian", "probit", False),
    "G-L-BSVM": ("gaussian", "bsvm", False),
    "OR-L-Probit": ("rank", "probit", False),
    "OR-L-BSVM": ("rank", "bsvm", False),
    "R-L-BSVM": ("maxmargin_rank", "bsvm", False),
    "G-NL-BSVM": ("gaussian", "bsvm", True),
    "R-NL-BSVM": ("maxmargin_rank", "bsvm", True),
}

_LOG2PI = np.log(2 * np.pi)


# --------------------------------------------------------------------------- small helpers
class _Sym:
    """Upper-triangle flattening of symmetric K x K matrices, so that sums of them over samples or
    features are single matrix products of half the size."""

    def __init__(self, k):
        self.k = k
        self.iu = np.triu_indices(k)
        self.weight = np.where(self.iu[0] == self.iu[1], 1.0, 2.0)

    def flat(self, m):
        return m[..., self.iu[0], self.iu[1]]

    def unflat(self, f):
        out = np.empty(f.shape[:-1] + (self.k, self.k))
        out[..., self.iu[0], self.iu[1]] = f
        out[..., self.iu[1], self.iu[0]] = f
        return out

    def inner(self, f1, f2):
        """``sum_{kl} M1_kl M2_kl`` for all pairs of rows of flattened f1 (a, q), f2 (b, q)."""
        return (f1 * self.weight) @ f2.T


_CHUNK = 32  # matrices per vector step of the batched Gaussian block (working set in cache)


@njit(cache=True, error_model="numpy")
def _gaussian_chunks(S, rhs, eps):
    """Batched Gaussian moments, 32 matrices at a time with the batch innermost (vector steps).

    ``S`` (m, k, k, C) symmetric positive definite (lower triangle read), ``rhs`` (m, k, C),
    ``eps`` (m, k, C) or empty.  With ``L L^T = S`` and ``Linv = L^-1`` returns ``cov =
    Linv^T Linv``, ``mean = cov rhs (+ Linv^T eps)``, ``log det cov`` and whether every S was
    positive definite.
    """
    m, k, _, C = S.shape
    cov = np.zeros((m, k, k, C))
    mean = np.zeros((m, k, C))
    logdet = np.zeros((m, C))
    L = np.empty((k, k, C))
    Linv = np.zeros((k, k, C))
    acc = np.empty(C)
    for q in range(m):
        for j in range(k):
            acc[:] = S[q, j, j]
            for p in range(j):
                for c in range(C):
                    acc[c] -= L[j, p, c] * L[j, p, c]
            for c in range(C):
                if not acc[c] > 0.0:
                    return cov, mean, logdet, False
                L[j, j, c] = np.sqrt(acc[c])
                Linv[j, j, c] = 1.0 / L[j, j, c]
                logdet[q, c] -= 2.0 * np.log(L[j, j, c])
            for i in range(j + 1, k):
                acc[:] = S[q, i, j]
                for p in range(j):
                    for c in range(C):
                        acc[c] -= L[i, p, c] * L[j, p, c]
                for c in range(C):
                    L[i, j, c] = acc[c] / L[j, j, c]
        for j in range(k):
            for i in range(j + 1, k):
                acc[:] = 0.0
                for p in range(j, i):
                    for c in range(C):
                        acc[c] += L[i, p, c] * Linv[p, j, c]
                for c in range(C):
                    Linv[i, j, c] = -acc[c] / L[i, i, c]
        for a in range(k):
            for b in range(a + 1):
                acc[:] = 0.0
                for p in range(a, k):
                    for c in range(C):
                        acc[c] += Linv[p, a, c] * Linv[p, b, c]
                cov[q, a, b] = acc
                cov[q, b, a] = acc
        for a in range(k):
            for b in range(k):
                for c in range(C):
                    mean[q, a, c] += cov[q, a, b, c] * rhs[q, b, c]
            if eps.shape[0] == m:
                for p in range(a, k):
                    for c in range(C):
                        mean[q, a, c] += Linv[p, a, c] * eps[q, p, c]
    return cov, mean, logdet, True


def _to_chunks(a, fill):
    """(b, ...) -> (ceil(b / C), ..., C), padding the batch with ``fill``."""
    b = a.shape[0]
    m = -(-b // _CHUNK)
    padded = np.empty((m * _CHUNK,) + a.shape[1:])
    padded[:b] = a
    padded[b:] = fill
    return np.ascontiguousarray(np.moveaxis(padded.reshape((m, _CHUNK) + a.shape[1:]), 1, -1))


def _from_chunks(a, b):
    """Inverse of :func:`_to_chunks`: (m, ..., C) -> (b, ...), C-contiguous (a fitted array's
    layout must not change when it is saved and loaded: BLAS rounds by layout)."""
    return np.ascontiguousarray(np.moveaxis(a, -1, 1).reshape((-1,) + a.shape[1:-1])[:b])


def _gaussian_block(precision, rhs, rng=None):
    """Batched N(prec^-1 rhs, prec^-1) over the leading axes: ``(mean, cov, logdet cov)``, or a
    draw instead of the mean when ``rng`` is given (``mean + L^-T eps``, ``L L^T = prec``)."""
    lead, k = precision.shape[:-2], precision.shape[-1]
    b = int(np.prod(lead))
    eps = np.empty((0, 0, 0))
    if rng is not None:
        eps = _to_chunks(rng.standard_normal(rhs.shape).reshape(b, k), 0.0)
    cov, mean, logdet, ok = _gaussian_chunks(
        _to_chunks(precision.reshape(b, k, k), np.eye(k)), _to_chunks(rhs.reshape(b, k), 0.0), eps
    )
    if not ok:
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    return (
        _from_chunks(mean, b).reshape(*lead, k),
        _from_chunks(cov, b).reshape(*lead, k, k),
        _from_chunks(logdet, b).reshape(lead),
    )


def _second(mean, cov):
    return mean[..., :, None] * mean[..., None, :] + cov


def _with_one(ez, ezz):
    """Moments of z~ = [z, 1] from those of z."""
    n, k = ez.shape
    ezt = np.hstack([ez, np.ones((n, 1))])
    ezzt = np.empty((n, k + 1, k + 1))
    ezzt[:, :k, :k] = ezz
    ezzt[:, :k, k] = ez
    ezzt[:, k, :k] = ez
    ezzt[:, k, k] = 1.0
    return ezt, ezzt


def _log_interval(mean, sd, lower, upper):
    """log(Phi((upper-mean)/sd) - Phi((lower-mean)/sd)), floored, for monitoring."""
    hi = special.ndtr((upper - mean) / sd)
    lo = special.ndtr((lower - mean) / sd)
    return np.log(np.maximum(hi - lo, 1e-300))


def margin_conditional_moments(mu, lower, upper, eps):
    """Mean, variance and log normaliser of the density proportional to
    ``N(w; mu, 1) exp(-l(w^l - w) - l(w - w^u))`` with ``l(u) = 2 max(0, u + eps)`` (eq. 6), i.e.
    the max-margin pseudo-likelihood of a latent w with the augmentation integrated out (eq. 7).

    With ``l' = w^l + eps`` and ``u' = w^u - eps`` the density is a Gaussian N(mu + 2, 1) below
    ``min(l', u')``, N(mu, 1) between and N(mu - 2, 1) above ``max(l', u')``; each piece is a
    truncated normal.  ``lower = -inf`` (``upper = +inf``) drops that side.
    """
    lp = lower + eps
    up = upper - eps
    m1 = np.minimum(lp, up)
    m2 = np.maximum(lp, up)
    has_l, has_u = np.isfinite(lower), np.isfinite(upper)
    m1 = np.where(has_l, m1, -np.inf)
    m2 = np.where(has_u, m2, np.inf)
    m1 = np.where(has_l & ~has_u, lp, m1)
    m2 = np.where(has_u & ~has_l, up, m2)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        lw1 = np.where(
            has_l, 2 * mu + 2 - 2 * np.where(has_l, lp, 0) + special.log_ndtr(m1 - mu - 2), -np.inf
        )
        both_pen = np.where(has_l & has_u & (up < lp), -2 * (lp - up), 0.0)
        hi = special.log_ndtr(m2 - mu)
        lo = special.log_ndtr(m1 - mu)
        lw2 = hi + np.log1p(-np.exp(np.minimum(lo - hi, 0.0))) + both_pen
        lw3 = np.where(
            has_u, -2 * mu + 2 + 2 * np.where(has_u, up, 0) + special.log_ndtr(mu - 2 - m2), -np.inf
        )
    lw = np.stack([lw1, lw2, lw3])
    log_z = np.logaddexp.reduce(lw, axis=0)
    pw = np.exp(lw - log_z)
    means = np.empty_like(lw)
    vars_ = np.empty_like(lw)
    means[0], vars_[0] = truncnorm_moments(mu + 2, 1.0, -np.inf, np.where(has_l, m1, 0.0))
    means[1], vars_[1] = truncnorm_moments(mu, 1.0, m1, m2)
    means[2], vars_[2] = truncnorm_moments(mu - 2, 1.0, np.where(has_u, m2, 0.0), np.inf)
    means = np.where(pw > 0, means, 0.0)
    vars_ = np.where(pw > 0, vars_, 0.0)
    mean = np.sum(pw * means, axis=0)
    var = np.sum(pw * (vars_ + means**2), axis=0) - mean**2
    return mean, np.maximum(var, 1e-12), log_z


def _serial_and_threaded(py_func):
    """Compile ``py_func`` twice, serial and threaded over its ``prange``, and pick by size as
    for BLAS (``_base.SMALL_PROBLEM``): threads pay off only on large matrices (their start-up
    costs milliseconds, and on a busy machine a thread that waits for a core stalls the rest).
    The threaded copy gets its own name, so that numba's on-disk cache (keyed by the
    function's name) keeps the two apart."""
    serial = njit(cache=True, error_model="numpy")(py_func)
    clone = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_threads")
    clone.__qualname__ = py_func.__qualname__ + "_threads"
    threaded = njit(cache=True, parallel=True, error_model="numpy")(clone)

    def dispatch(first, *args):
        return (threaded if first.size >= SMALL_PROBLEM else serial)(first, *args)

    dispatch.__doc__ = f":func:`{py_func.__name__}`, compiled, threaded for large matrices."
    dispatch.serial, dispatch.threaded = serial, threaded
    return dispatch


_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)
_BLOCK = 1 << 23  # entries of a^T z held at once by the latent max-margin step


@njit(cache=True)
def _log_ndtr(x):
    """log Phi(x), as ``scipy.special.log_ndtr``: erfc above -20, the asymptotic series below."""
    if x > 6.0:
        return np.log1p(-0.5 * math.erfc(x / np.sqrt(2.0)))
    if x > -20.0:
        return np.log(0.5 * math.erfc(-x / np.sqrt(2.0)))
    x2 = 1.0 / (x * x)
    series = 1.0 - x2 * (1.0 - 3.0 * x2 * (1.0 - 5.0 * x2 * (1.0 - 7.0 * x2)))
    return -0.5 * x * x - np.log(-x) - _HALF_LOG_2PI + np.log(series)


def _margin_moments_py(mu, lower, upper, eps, mean, var):
    """Mean and variance of :func:`margin_conditional_moments`' density, elementwise into
    ``mean`` and ``var`` (2-D arrays, rows in parallel in the threaded version); returns the sum
    of its log normaliser over each row.

    With ``l' = w^l + eps``, ``u' = w^u - eps``, ``m1 = min(l', u')``, ``m2 = max(l', u')``, the
    density is ``e^{k1} N(mu + 2, 1)`` below m1, ``e^{pen} N(mu, 1)`` between and ``e^{k3}
    N(mu - 2, 1)`` above m2 (``k1 = 2 mu + 2 - 2 l'``, ``k3 = -2 mu + 2 + 2 u'``, ``pen = -2
    (l' - u')`` when the margins overlap).  Each piece N(mu + c, 1) on (a, b) adds, relative to
    mu, mass ``e Z``, first moment ``e (c Z + phi(a) - phi(b))`` and second moment ``e ((c^2 + 1)
    Z + (2 c + a) phi(a) - (2 c + b) phi(b))`` (standardised bounds), all scaled by the largest
    log mass.
    """
    n_rows, n_cols = mu.shape
    log_z = np.zeros(n_rows)
    for row in prange(n_rows):
        total_log_z = 0.0
        for col in range(n_cols):
            m = mu[row, col]
            lo = lower[row, col]
            up = upper[row, col]
            has_l = lo > -np.inf
            has_u = up < np.inf
            lp = lo + eps
            upp = up - eps
            m1 = min(lp, upp) if has_l else -np.inf
            m2 = max(lp, upp) if has_u else np.inf
            if has_l and not has_u:
                m1 = lp
            if has_u and not has_l:
                m2 = upp
            pen = -2.0 * (lp - upp) if has_l and has_u and upp < lp else 0.0
            b1 = m1 - m
            b2 = m2 - m
            a1 = b1 - 2.0  # piece 1: N(mu + 2, 1) below m1
            a3 = b2 + 2.0  # piece 3: N(mu - 2, 1) above m2
            k1 = 2.0 * m + 2.0 - 2.0 * lp if has_l else 0.0
            k3 = -2.0 * m + 2.0 + 2.0 * upp if has_u else 0.0
            lw1 = k1 + _log_ndtr(a1) if has_l else -np.inf
            lw3 = k3 + _log_ndtr(-a3) if has_u else -np.inf
            lw2 = -np.inf
            if b2 > b1:  # log(Phi(b2) - Phi(b1)) on the accurate tail
                if b1 > 0:
                    hi, lo_ = _log_ndtr(-b1), _log_ndtr(-b2)
                else:
                    hi, lo_ = _log_ndtr(b2), _log_ndtr(b1)
                lw2 = pen + hi + np.log1p(-np.exp(min(lo_ - hi, 0.0)))
            top = max(lw1, max(lw2, lw3))
            e1 = np.exp(lw1 - top)
            e2 = np.exp(lw2 - top)
            e3 = np.exp(lw3 - top)
            s0 = e1 + e2 + e3
            s1 = 2.0 * e1 - 2.0 * e3
            s2 = 5.0 * (e1 + e3) + e2
            if has_l:
                p = np.exp(k1 - 0.5 * a1 * a1 - _HALF_LOG_2PI - top)
                s1 -= p
                s2 -= (4.0 + a1) * p
            if has_u:
                p = np.exp(k3 - 0.5 * a3 * a3 - _HALF_LOG_2PI - top)
                s1 += p
                s2 += (a3 - 4.0) * p
            if b2 > b1:
                if has_l:
                    p = np.exp(pen - 0.5 * b1 * b1 - _HALF_LOG_2PI - top)
                    s1 += p
                    s2 += b1 * p
                if has_u:
                    p = np.exp(pen - 0.5 * b2 * b2 - _HALF_LOG_2PI - top)
                    s1 -= p
                    s2 -= b2 * p
            shift = s1 / s0
            mean[row, col] = m + shift
            var[row, col] = max(s2 / s0 - shift * shift, 1e-12)
            total_log_z += top + np.log(s0)
        log_z[row] = total_log_z
    return log_z


_margin_moments = _serial_and_threaded(_margin_moments_py)


@njit(cache=True)
def _inv_gauss(mu, normal, uniform):
    """IG(mu, 1) draw from one standard normal and one uniform (Michael, Schucany & Haas 1976),
    in the cancellation-free form x = mu / (1 + a + sqrt(a (2 + a))), a = mu v^2 / 2."""
    a = 0.5 * mu * normal * normal
    x = mu / (1.0 + a + np.sqrt(a * (2.0 + a)))
    return x if uniform * (mu + x) <= mu else mu * mu / x


@njit(cache=True, error_model="numpy")
def _margin_draws(w, lo, up, mu, eps, n0, n1, n2, u0, u1, new, ll_lo, ll_up):
    """Branch-free draws of :func:`_margin_half_sweep_py` for entries with current value ``w``,
    neighbours ``lo`` / ``up`` (+-inf: none) and mean ``mu = a^T z``: 1/lam^l, 1/lam^u ~
    IG(1/|u|, 1) from (n0, u0), (n1, u1), then ``new = m + n2 / sqrt(p)`` (eq. 7), and the hinge
    terms of eq. 6 of each side."""
    for s in range(len(w)):
        has_l = lo[s] > -np.inf
        has_u = up[s] < np.inf
        u = lo[s] + eps - w[s]
        il = _inv_gauss(1.0 / max(abs(u), 1e-6), n0[s], u0[s])
        ll_lo[s] = 2.0 * max(u, 0.0) if has_l else 0.0
        prec = 1.0 + il if has_l else 1.0
        lin = mu[s] + (il * (lo[s] + eps) + 1.0) if has_l else mu[s]
        u = w[s] + eps - up[s]
        iu = _inv_gauss(1.0 / max(abs(u), 1e-6), n1[s], u1[s])
        ll_up[s] = 2.0 * max(u, 0.0) if has_u else 0.0
        prec = prec + iu if has_u else prec
        lin = lin + (iu * (up[s] - eps) - 1.0) if has_u else lin
        new[s] = lin / prec + n2[s] / np.sqrt(prec)


def _margin_half_sweep_py(ew, wbar, order, new_group, offset, parity, eps, normals, uniforms):
    """One half-sweep of the latent max-margin w (eq. 7 augmentation), feature by feature.

    ``ew`` and ``wbar`` are (n_features, n_samples); ``order[i]`` lists the samples of feature i
    in increasing x and ``new_group[i, p]`` is True where sorted position p starts a new tie
    group.  For the entries of tie groups whose rank has the given parity: w^l / w^u are the
    maximum / minimum of the current w over the groups below / above (section 2, ERRATA),
    1/lam ~ IG(1/|u|, 1) (section 7, item 3), and w ~ N(m, 1/p) as in
    ``_Engine._maxmargin_latent``.  The random numbers come from the caller's Generator
    (``normals`` (3, m), ``uniforms`` (2, m), m the number of entries of this parity, numbered
    feature by feature in sorted order from ``offset[i]`` on), so the result does not depend on
    how features are spread over threads.  Per feature, a sequential pass over the sorted row
    collects each entry's neighbours, then one branch-free (vectorised) pass draws all of them.
    Returns the log pseudo-likelihood (eq. 6) at the w before the update.
    """
    d, n = ew.shape
    ll_feature = np.zeros(d)
    for i in prange(d):
        ws = np.empty(n)
        cmin = np.empty(n)
        col = np.empty(n, np.int32)  # the entries of this parity: sample, w, w^l, w^u, a^T z
        cur = np.empty(n)
        lo = np.empty(n)
        up = np.empty(n)
        mu = np.empty(n)
        for p in range(n):
            ws[p] = ew[i, order[i, p]]
        m = np.inf
        for p in range(n - 1, -1, -1):
            m = min(m, ws[p])
            cmin[p] = m
        t = 0
        below = -np.inf  # max of w over the groups before the current one
        start = 0
        group = 0
        while start < n:
            end = start
            while end + 1 < n and not new_group[i, end + 1]:
                end += 1
            if group % 2 == parity:
                above = cmin[end + 1] if end < n - 1 else np.inf
                for p in range(start, end + 1):
                    col[t] = order[i, p]
                    mu[t] = wbar[i, col[t]]
                    cur[t] = ws[p]
                    lo[t] = below
                    up[t] = above
                    t += 1
            for p in range(start, end + 1):
                below = max(below, ws[p])
            start = end + 1
            group += 1
        k0 = offset[i]
        new = np.empty(t)
        ll_lo = np.empty(t)
        ll_up = np.empty(t)
        _margin_draws(
            cur[:t],
            lo[:t],
            up[:t],
            mu[:t],
            eps,
            normals[0, k0 : k0 + t],
            normals[1, k0 : k0 + t],
            normals[2, k0 : k0 + t],
            uniforms[0, k0 : k0 + t],
            uniforms[1, k0 : k0 + t],
            new,
            ll_lo,
            ll_up,
        )
        ll = 0.0
        for s in range(t):
            ew[i, col[s]] = new[s]
            ll -= ll_lo[s]
            ll -= ll_up[s]
        ll_feature[i] = ll
    return ll_feature.sum()


_margin_half_sweep = _serial_and_threaded(_margin_half_sweep_py)


@njit(cache=True)
def _running_average(h, ew, wbar, rho):
    """``h <- (1 - rho) h + rho ew`` in place (the Robbins-Monro step of
    ``_Engine._maxmargin_latent``); returns ``(sum ew^2, sum h wbar)`` for the objective."""
    sq = 0.0
    cross = 0.0
    d, n = h.shape
    for i in range(d):
        for j in range(n):
            e = ew[i, j]
            v = (1 - rho) * h[i, j] + rho * e
            h[i, j] = v
            sq += e * e
            cross += v * wbar[i, j]
    return sq, cross


@njit(cache=True)
def _rank_fractions(order, new_group):
    """Average ranks over n + 1, (n_features, n_samples), from the sorted order and tie groups
    of :class:`_RankIndex`."""
    d, n = order.shape
    out = np.empty((d, n))
    for i in range(d):
        start = 0
        while start < n:
            end = start
            while end + 1 < n and not new_group[i, end + 1]:
                end += 1
            rank = (0.5 * (start + end) + 1.0) / (n + 1)
            for p in range(start, end + 1):
                out[i, order[i, p]] = rank
            start = end + 1
    return out


@njit(cache=True)
def _place(sorted_x, order, w, xnew, lo, up):
    """Neighbours of new values among the training values, feature by feature (paper 000,
    section 3, predictions): for ``xnew[i, m]``, ``lo[i, m]`` is the maximum of the training
    ``w[i]`` over strictly smaller training x and ``up[i, m]`` the minimum over strictly larger
    (+-inf when there is none).  All arrays are (n_features, samples); ``sorted_x[i]`` holds
    feature i's training values in increasing order, ``order[i]`` their samples."""
    d, n = sorted_x.shape
    cmax = np.empty(n)
    cmin = np.empty(n)
    for i in range(d):
        m = -np.inf
        for p in range(n):
            m = max(m, w[i, order[i, p]])
            cmax[p] = m
        m = np.inf
        for p in range(n - 1, -1, -1):
            m = min(m, w[i, order[i, p]])
            cmin[p] = m
        row = sorted_x[i]
        for j in range(xnew.shape[1]):
            x = xnew[i, j]
            n_lt = np.searchsorted(row, x, side="left")
            n_le = np.searchsorted(row, x, side="right")
            lo[i, j] = cmax[n_lt - 1] if n_lt > 0 else -np.inf
            up[i, j] = cmin[n_le] if n_le < n else np.inf


class _RankIndex:
    """Sorted order of each training feature and its tie groups (paper 000, section 2).

    Kept compact, (n_features, n_samples) each: ``order_t`` (int32, samples in increasing x),
    ``new_group_t`` (bool, sorted position starts a tie group) and ``sorted_t`` (the sorted
    training values, to place new samples).  ``neighbours(W)`` returns, for every entry of ``W``
    (training w, (n_samples, n_features)), the running maximum of w over strictly smaller x
    (``w^l``) and the running minimum over strictly larger x (``w^u``), +-inf where there is
    none (ERRATA.md, section 2); the arrays it needs (flat gathers, group bounds) are built on
    first use, by the likelihoods that need them (rank, exact max-margin), not by the default
    latent form.  ``new_neighbours(W, X_new)`` does the same for new values.
    """

    def __init__(self, X):
        n, d = X.shape
        self.n, self.d = n, d
        order = np.argsort(X, axis=0, kind="stable")
        self.sorted_t = np.ascontiguousarray(np.take_along_axis(X, order, axis=0).T)
        self.order_t = np.ascontiguousarray(order.T, dtype=np.int32)
        del order
        self.new_group_t = np.ones((d, n), bool)
        np.not_equal(self.sorted_t[:, 1:], self.sorted_t[:, :-1], out=self.new_group_t[:, 1:])
        # entries of even / odd group rank per feature, and where each feature's entries start
        # in the numbering of the random numbers of a half-sweep
        group = np.cumsum(self.new_group_t, axis=1, dtype=np.int32) - 1  # rank of tie group
        odd = (group % 2).sum(axis=1)
        del group
        counts = np.stack([n - odd, odd])
        self.parity_count = [int(c) for c in counts.sum(axis=1)]
        self.parity_offset = np.zeros((2, d), np.int64)
        self.parity_offset[:, 1:] = np.cumsum(counts, axis=1)[:, :-1]

    def normal_scores(self):
        """Van der Waerden scores of the (average) ranks of each feature, (n_features,
        n_samples); they depend on the ranks only."""
        scores = _rank_fractions(self.order_t, self.new_group_t)
        return special.ndtri(scores, out=scores)

    @functools.cached_property
    def _bounds(self):
        """(n_samples, n_features) gathers of :meth:`neighbours`: sorted position -> flat sample
        index, first / last sorted position of each entry's tie group, its dense group rank."""
        n, d = self.n, self.d
        flat = (self.order_t.T.astype(np.intp) * d + np.arange(d)).ravel()
        new_group = self.new_group_t.T
        pos = np.broadcast_to(np.arange(n)[:, None], (n, d))
        end_group = np.ones((n, d), bool)
        end_group[:-1] = new_group[1:]
        start = np.maximum.accumulate(np.where(new_group, pos, 0), axis=0)
        end = np.minimum.accumulate(np.where(end_group, pos, n - 1)[::-1], axis=0)[::-1]
        group = np.cumsum(new_group, axis=0) - 1
        return flat, start, end, group

    @property
    def flat(self):
        return self._bounds[0]

    @functools.cached_property
    def _gathers(self):
        n, d = self.n, self.d
        _, start, end, _ = self._bounds
        has_l, has_u = start > 0, end < n - 1
        lpos = (np.maximum(start - 1, 0) * d + np.arange(d)).ravel()
        upos = (np.minimum(end + 1, n - 1) * d + np.arange(d)).ravel()
        return has_l, has_u, lpos, upos

    def _sorted(self, W):
        return W.ravel()[self.flat].reshape(self.n, self.d)

    def _unsort(self, sorted_values):
        out = np.empty(self.n * self.d)
        out[self.flat] = sorted_values.ravel()
        return out.reshape(self.n, self.d)

    def neighbours(self, W):
        has_l, has_u, lpos, upos = self._gathers
        ws = self._sorted(W)
        cmax = np.maximum.accumulate(ws, axis=0).ravel()
        cmin = np.minimum.accumulate(ws[::-1], axis=0)[::-1].ravel()
        lo = np.where(has_l, cmax[lpos].reshape(ws.shape), -np.inf)
        up = np.where(has_u, cmin[upos].reshape(ws.shape), np.inf)
        return self._unsort(lo), self._unsort(up)

    def subset(self, flat_index):
        """Precomputed positions for :meth:`neighbours_at` on the entries ``flat_index``."""
        has_l, has_u, lpos, upos = self._gathers
        inverse = np.empty(self.n * self.d, dtype=np.intp)
        inverse[self.flat] = np.arange(self.n * self.d)
        at = inverse[flat_index]
        return lpos[at], upos[at], has_l.ravel()[at], has_u.ravel()[at]

    def neighbours_at(self, W, subset):
        """:meth:`neighbours` at the entries of a :meth:`subset` only (flat arrays)."""
        lpos, upos, has_l, has_u = subset
        ws = self._sorted(W)
        cmax = np.maximum.accumulate(ws, axis=0).ravel()
        cmin = np.minimum.accumulate(ws[::-1], axis=0)[::-1].ravel()
        return np.where(has_l, cmax[lpos], -np.inf), np.where(has_u, cmin[upos], np.inf)

    def group_parity(self):
        return self._unsort((self._bounds[3] % 2).astype(float)).astype(int)

    def new_neighbours(self, W_t, Xnew_t):
        """Training neighbours ``(w^l, w^u)`` of new values, all (n_features, samples): ``W_t``
        the fitted training w, ``Xnew_t`` the new values."""
        lo = np.empty(Xnew_t.shape)
        up = np.empty(Xnew_t.shape)
        _place(self.sorted_t, self.order_t, W_t, np.ascontiguousarray(Xnew_t), lo, up)
        return lo, up


def _kl_diag_prior(mean, cov_diag, logdet, prior_precision):
    """sum of KL(N(mean, cov) || N(0, diag(1/prior_precision))) over the leading axes."""
    k = mean.shape[-1]
    return 0.5 * np.sum(
        np.sum(prior_precision * (cov_diag + mean**2) - np.log(prior_precision), axis=-1)
        - k
        - logdet
    )


# --------------------------------------------------------------------------- the engine
class _Engine:
    """State and updates of one fit: VB when ``gibbs`` is False, Gibbs otherwise (``rng`` drives
    the Gibbs draws and the Monte Carlo w step of the latent max-margin form)."""

    def __init__(self, est, X, Y, O, rng, gibbs):
        self.est = est
        self.gibbs = gibbs
        self.rng = rng
        n, d = X.shape
        k = int(est.n_factors)
        self.n, self.d, self.k = n, d, k
        self.t = Y.shape[1]
        self.c = int(est.n_components) if est.mixture else 1
        self.sym = _Sym(k)
        self.sym1 = _Sym(k + 1)
        self.Y, self.O = Y, O
        self.like = est.likelihood
        if self.like == "gaussian":
            self.center = X.mean(axis=0)
            scale = X.std(axis=0)
            self.scale = np.where(scale > 0, scale, 1.0)
            self.Xs = (X - self.center) / self.scale
            init = self.Xs
            self.tau_shape = 1.0 + 0.5 * n  # Ga(1, 1) prior on each noise precision
            self.Etau = np.ones(d)
            self.Elogtau = np.zeros(d)
        else:
            self.index = _RankIndex(X)
            init_t = self.index.normal_scores()
            init = init_t.T
            if self.like == "maxmargin_rank" and est.maxmargin_form == "latent":
                # w and its running average in (features, samples) layout, as the sweep walks them
                # (w starts as the scores: the sweep changes it only after the set-up below)
                self.Ew_t = init_t
                self.H_t = init_t.copy()
                self.sum_h2 = float(np.sum(init_t**2))
                self.n_draws = 0
            if self.like == "rank":
                self.Ew = init.copy()
                parity = self.index.group_parity().ravel()
                self.parity_index = (np.flatnonzero(parity == 0), np.flatnonzero(parity == 1))
                self.parity_subset = [self.index.subset(sel) for sel in self.parity_index]
        # principal components of the (normal-scored) data through the smaller Gram matrix
        centred = init - init.mean(axis=0)
        small = centred @ centred.T if n <= d else centred.T @ centred
        top = min(k, len(small))
        with threadpool_limits(1):  # a small eigenproblem: threads only contend (seconds, not ms)
            evals, evecs = linalg.eigh(small, subset_by_index=[len(small) - top, len(small) - 1])
        evals, evecs = evals[::-1], evecs[:, ::-1]
        k0 = int(np.sum(evals > 1e-10 * max(evals[0], 1e-300)))
        evals, evecs = evals[:k0], evecs[:, :k0]
        sv = np.sqrt(evals)
        u, v = (evecs, centred.T @ evecs / sv) if n <= d else (centred @ evecs / sv, evecs)
        self.Ez = np.zeros((n, k))
        self.Ea = np.zeros((d, k))
        self.Ez[:, :k0] = u * np.sqrt(n)
        self.Ea[:, :k0] = v * (sv / np.sqrt(n))
        if k0 < k:
            self.Ez[:, k0:] = 0.01 * rng.standard_normal((n, k - k0))
            self.Ea[:, k0:] = 0.01 * rng.standard_normal((d, k - k0))
        eye = np.eye(k)
        self.EZZ = _second(self.Ez, 0.01 * eye)
        self.EAA = _second(self.Ea, 0.01 * eye)
        self.logdet_z = np.full(n, k * np.log(0.01))
        self.logdet_a = np.full(d, k * np.log(0.01))
        t, c = self.t, self.c
        self.Eb = np.zeros((t, c, k + 1))
        self.EBB = np.zeros((t, c, k + 1, k + 1))
        self.logdet_b = np.zeros(t * c)
        # The DP mixture's local classifiers are beta^(t)T z without intercept, as in the paper
        # (prior precision 1e10 pins it at 0): with an intercept the label term of the
        # responsibilities splits the components by label, each local classifier reduces to its
        # intercept, and without labels at prediction the components cannot be told apart.
        self.b0_prec = 1e10 if est.mixture else 1.0 / est.intercept_scale**2
        self.shrink_a = TPBNShrinkage((1, k, d), est.r_a, est.s_a)
        self.shrink_b = TPBNShrinkage((t * c, 1, k), est.r_beta, est.s_beta)
        self.R = np.ones((n, 1))
        if est.mixture:
            self._init_dp()
        self.data_ll = 0.0

    # ----------------------------------------------------------------- DP initialisation
    def _init_dp(self):
        from sklearn.cluster import KMeans

        c, k = self.c, self.k
        seed = int(self.rng.integers(2**31 - 1))
        labels = KMeans(n_clusters=c, n_init=3, random_state=seed).fit_predict(self.Ez)
        self.R = np.eye(c)[labels]
        if not self.gibbs:
            self.R = 0.9 * self.R + 0.1 / c
        counts = self.R.sum(axis=0)
        self.Emu = (self.R.T @ self.Ez) / np.maximum(counts, 1.0)[:, None]
        self.Enorm_mu = np.sum(self.Emu**2, axis=1) + k / (1.0 + counts)
        self.Epsi = np.ones(c)
        self.Elogpsi = np.zeros(c)
        self.Ealpha = 1.0
        self.g1, self.g2 = stick_posterior(counts, self.Ealpha)
        self.Elogq = expected_log_weights(self.g1, self.g2)
        self.nu = self.g1 / (self.g1 + self.g2)  # Gibbs state of the stick proportions

    # ----------------------------------------------------------------- data likelihood
    def data_step(self):
        est = self.est
        if self.like == "gaussian":
            self._gaussian_step()
        elif self.like == "rank":
            self._rank_step()
        else:
            self._maxmargin_step(est.epsilon)

    def _gaussian_step(self):
        n = self.n
        wbar = self.Ez @ self.Ea.T
        if self.gibbs:
            resid2 = np.sum((self.Xs - wbar) ** 2, axis=0)
        else:
            ew2 = self.sym.inner(self.sym.flat(self.EAA), self.sym.flat(self.EZZ.sum(0))[None])
            resid2 = np.sum(self.Xs**2, axis=0) - 2 * np.sum(self.Xs * wbar, axis=0) + ew2[:, 0]
            resid2 = np.maximum(resid2, 1e-12)
        rate = 1.0 + 0.5 * resid2
        if self.gibbs:
            self.Etau = self.rng.gamma(self.tau_shape, 1.0 / rate)
            self.Elogtau = np.log(self.Etau)
        else:
            self.Etau = self.tau_shape / rate
            self.Elogtau = special.digamma(self.tau_shape) - np.log(rate)
        self.P = self.Etau[None, :]
        self.H = self.Etau * self.Xs
        self.data_ll = float(np.sum(0.5 * n * (self.Elogtau - _LOG2PI) - 0.5 * self.Etau * resid2))

    def _rank_step(self):
        # Hoff's rank likelihood: w ~ TN(a^T z, 1, w^l, w^u).  Entries of even and odd tie-group
        # rank are updated in turn, so that each half-step conditions on fixed neighbours and
        # keeps the ordering of w (paper 000, section 2; ERRATA section 2 for w^l, w^u).
        wbar = self.Ez @ self.Ea.T
        ew = self.Ew.ravel()
        for sel, subset in zip(self.parity_index, self.parity_subset):
            lo, up = self.index.neighbours_at(self.Ew, subset)
            mu = wbar.ravel()[sel]
            if self.gibbs:
                ew[sel] = sample_truncnorm(mu, 1.0, lo, up, self.rng)
            else:
                ew[sel] = truncnorm_moments(mu, 1.0, lo, up)[0]
        lo, up = self.index.neighbours(self.Ew)
        self.P = np.ones((1, self.d))
        self.H = self.Ew
        if self.gibbs:
            resid2 = np.sum((self.Ew - wbar) ** 2)
            self.data_ll = float(-0.5 * resid2 - 0.5 * _LOG2PI * self.Ew.size)
        else:
            var = np.maximum(
                self.sym.inner(self.sym.flat(self.EZZ), self.sym.flat(self.EAA)) - wbar**2, 0
            )
            self.data_ll = float(np.sum(_log_interval(wbar, np.sqrt(1 + var), lo, up)))

    def _maxmargin_step(self, eps):
        if self.est.maxmargin_form == "latent":
            self._maxmargin_latent(eps)
            return
        wbar = self.Ez @ self.Ea.T
        lo, up = self.index.neighbours(wbar)
        il, iu, self.data_ll = self._margin_weights(wbar, lo, up, None, eps)
        # Conditional of w_n = a^T z_n given fixed neighbours (sections 3 and 7): Gaussian with
        # precision 1/lam^l + 1/lam^u and linear coefficient (w^l + eps)/lam^l + 1 +
        # (w^u - eps)/lam^u - 1; the +-1 (the "-u" of each augmented term) cancel only when both
        # neighbours exist.
        self.P = il + iu
        self.H = self._margin_linear(il, iu, lo, up, eps)

    def _margin_weights(self, w, lo, up, var_extra, eps):
        """E[1/lam^l], E[1/lam^u] (VB) or draws (Gibbs), and the log pseudo-likelihood (eq. 6)."""
        has_l, has_u = np.isfinite(lo), np.isfinite(up)
        u_l = np.where(has_l, lo, 0.0) + eps - w  # hinge residual of the lower neighbour
        u_u = w + eps - np.where(has_u, up, 0.0)  # and of the upper one
        if self.gibbs:
            il = np.where(has_l, sample_inv_lambda(u_l, self.rng), 0.0)
            iu = np.where(has_u, sample_inv_lambda(u_u, self.rng), 0.0)
            hinge = np.where(has_l, np.maximum(u_l, 0), 0) + np.where(has_u, np.maximum(u_u, 0), 0)
            return il, iu, float(-2.0 * hinge.sum())
        var = var_extra
        if var is None:
            var = self.sym.inner(self.sym.flat(self.EZZ), self.sym.flat(self.EAA)) - w**2
            var = np.maximum(var, 0.0)
        il = np.where(has_l, expected_inv_lambda(u_l**2 + var), 0.0)
        iu = np.where(has_u, expected_inv_lambda(u_u**2 + var), 0.0)
        hinge = np.where(has_l, expected_hinge(u_l, var), 0) + np.where(
            has_u, expected_hinge(u_u, var), 0
        )
        return il, iu, float(-2.0 * hinge.sum())

    @staticmethod
    def _margin_linear(il, iu, lo, up, eps):
        has_l, has_u = np.isfinite(lo), np.isfinite(up)
        return (
            il * (np.where(has_l, lo, 0.0) + eps)
            + iu * (np.where(has_u, up, 0.0) - eps)
            + has_l
            - has_u
        )

    def _maxmargin_latent(self, eps):
        # w = a^T z + v, v ~ N(0, 1) (eq. 1) with the max-margin pseudo-likelihood (eqs. 5-7) on
        # w, augmented as in eq. 7: given 1/lam^l, 1/lam^u (section 7, item 3) w_n | . ~ N(m, 1/p),
        # p = 1 + 1/lam^l + 1/lam^u,
        # m = (a^T z + (w^l + eps)/lam^l + (w^u - eps)/lam^u + [has l] - [has u]) / p.
        # Even and odd tie-group ranks in turn, so that neighbours are fixed in each half-step
        # (as in Hoff's sampler).  Gibbs draws w here.  VB: the optimal mean-field factor q(W) is
        # this conditional with a^T z replaced by <a>^T <z> jointly over each row (the neighbours
        # couple a row), with no closed form; its mean, the only moment that the A and Z updates
        # need (P = 1), is estimated from these draws by a Robbins-Monro average with step
        # 10 / (t + 9) (sum of steps infinite, of squares finite), so that the noise of the
        # estimate vanishes as the iterations go on (Monte Carlo within VB).  A deterministic
        # Gaussian q(w) per entry (with E[1/lam], or the exact one-entry conditional of
        # :func:`margin_conditional_moments`) loses the spread that the ordering of noisy w forces,
        # and the scale of w contracts to zero over the iterations (observed on simulated data).
        # Blocks of features keep a^T z (computed per block) to a few million entries at once.
        ix = self.index
        rows = max(1, _BLOCK // self.n)
        blocks = [slice(i, i + rows) for i in range(0, self.d, rows)]

        def wbar(block):
            return self.Ea[block] @ self.Ez.T

        ll = 0.0
        for parity in (0, 1):
            count = ix.parity_count[parity]
            normals, uniforms = self.rng.standard_normal((3, count)), self.rng.random((2, count))
            for block in blocks:
                ll += _margin_half_sweep(
                    self.Ew_t[block],
                    wbar(block),
                    ix.order_t[block],
                    ix.new_group_t[block],
                    ix.parity_offset[parity, block],
                    parity,
                    eps,
                    normals,
                    uniforms,
                )
            del normals, uniforms
        self.P = np.ones((1, self.d))
        if self.gibbs:
            self.H = self.Ew_t.T
            resid2 = sum(float(np.sum((self.Ew_t[b] - wbar(b)) ** 2)) for b in blocks)
            self.data_ll = ll - 0.5 * resid2 - 0.5 * _LOG2PI * self.Ew_t.size
            return
        self.n_draws += 1
        rho = 10.0 / (self.n_draws + 9)
        sum_w2, cross = np.sum(
            [_running_average(self.H_t[b], self.Ew_t[b], wbar(b), rho) for b in blocks], axis=0
        )
        self.sum_h2 = (1 - rho) * self.sum_h2 + rho * sum_w2
        self.H = self.H_t.T
        # VB objective for this form: E_q[log N(w; a^T z, 1)] with the averaged moments of q(W);
        # the pseudo-likelihood and the entropy of q(W) have no closed form and are left out
        # (they do not depend on q(A), q(Z), q(beta)).
        # sum_{n,i} E[(a_i^T z_n)^2] = tr(sum_i E[a_i a_i^T] sum_n E[z_n z_n^T])
        eww = float(np.sum(self.EAA.sum(axis=0) * self.EZZ.sum(axis=0)))
        resid2 = self.sum_h2 - 2 * cross + eww
        self.data_ll = -0.5 * resid2 - 0.5 * _LOG2PI * self.H_t.size

    # ----------------------------------------------------------------- loadings
    def update_a(self):
        prec = self.shrink_a.prior_precision[0].T  # d x K
        if self.P.shape[0] == 1:
            S = self.P[0][:, None, None] * self.EZZ.sum(axis=0)[None]
        else:
            S = self.sym.unflat(self.P.T @ self.sym.flat(self.EZZ))
        rhs = self.H.T @ self.Ez
        S[:, np.arange(self.k), np.arange(self.k)] += prec
        self.Ea, cov, self.logdet_a = _gaussian_block(S, rhs, self.rng if self.gibbs else None)
        self.EAA = _second(self.Ea, 0.0 if self.gibbs else cov)

    # ----------------------------------------------------------------- labels
    def label_step(self):
        est = self.est
        n, t, c = self.n, self.t, self.c
        self.Ezt, self.EZZt = _with_one(self.Ez, self.EZZ)
        fbar = np.einsum("nk,tck->ntc", self.Ezt, self.Eb)
        if self.gibbs:
            var = np.zeros_like(fbar)
        else:
            var = self.sym1.inner(
                self.sym1.flat(self.EZZt), self.sym1.flat(self.EBB).reshape(t * c, -1)
            ).reshape(n, t, c)
            var = np.maximum(var - fbar**2, 0.0)
        y = self.Y[:, :, None]
        if est.classifier == "bsvm":
            u = 1.0 - y * fbar
            if self.gibbs:
                self.Pc = sample_inv_lambda(u, self.rng)
                self.label_ll = -2.0 * np.maximum(u, 0.0)
            else:
                self.Pc = expected_inv_lambda(u**2 + var)
                self.label_ll = -2.0 * expected_hinge(u, var)
            self.Hc = y * (1.0 + self.Pc)
        else:
            lower = np.where(y > 0, 0.0, -np.inf)
            upper = np.where(y > 0, np.inf, 0.0)
            if self.gibbs:
                self.Hc = sample_truncnorm(fbar, 1.0, lower, upper, self.rng)
            else:
                self.Hc, _ = truncnorm_moments(fbar, 1.0, lower, upper)
            self.Pc = np.ones_like(fbar)
            self.label_ll = special.log_ndtr(y * fbar / np.sqrt(1.0 + var))
        self.label_ll = self.label_ll * self.O[:, :, None]

    def update_beta(self):
        n, t, c, k = self.n, self.t, self.c, self.k
        mask = self.R[:, None, :] * self.O[:, :, None]
        W = (mask * self.Pc).reshape(n, t * c)
        S = self.sym1.unflat(W.T @ self.sym1.flat(self.EZZt))
        prior = np.concatenate(
            [self.shrink_b.prior_precision[:, 0, :], np.full((t * c, 1), self.b0_prec)], axis=1
        )
        S[:, np.arange(k + 1), np.arange(k + 1)] += prior
        rhs = (mask * self.Hc).reshape(n, t * c).T @ self.Ezt
        eb, cov, self.logdet_b = _gaussian_block(S, rhs, self.rng if self.gibbs else None)
        self.Eb = eb.reshape(t, c, k + 1)
        self.EBB = _second(self.Eb, 0.0 if self.gibbs else cov.reshape(t, c, k + 1, k + 1))
        self.prior_b = prior

    # ----------------------------------------------------------------- scores
    def update_z(self):
        n, t, c, k = self.n, self.t, self.c, self.k
        if self.est.mixture:
            psibar = self.R @ self.Epsi
            rhs = self.R @ (self.Epsi[:, None] * self.Emu)
        else:
            psibar = np.ones(n)
            rhs = np.zeros((n, k))
        if self.P.shape[0] == 1:
            S = np.broadcast_to(np.einsum("i,ikl->kl", self.P[0], self.EAA), (n, k, k)).copy()
        else:
            S = self.sym.unflat(self.P @ self.sym.flat(self.EAA))
        mask = self.R[:, None, :] * self.O[:, :, None]
        W = (mask * self.Pc).reshape(n, t * c)
        ebb = self.EBB.reshape(t * c, k + 1, k + 1)
        S += self.sym.unflat(W @ self.sym.flat(ebb[:, :k, :k]))
        S[:, np.arange(k), np.arange(k)] += psibar[:, None]
        eb = self.Eb.reshape(t * c, k + 1)
        rhs = rhs + self.H @ self.Ea
        rhs += (mask * self.Hc).reshape(n, t * c) @ eb[:, :k] - W @ ebb[:, :k, k]
        self.Ez, cov, self.logdet_z = _gaussian_block(S, rhs, self.rng if self.gibbs else None)
        self.EZZ = _second(self.Ez, 0.0 if self.gibbs else cov)
        self.psibar = psibar

    # ----------------------------------------------------------------- shrinkage
    def update_shrinkage(self):
        t, c, k = self.t, self.c, self.k
        if self.gibbs:
            self.shrink_a.update_gibbs(self.Ea.T[None], self.rng)
            self.shrink_b.update_gibbs(self.Eb[..., :k].reshape(t * c, 1, k), self.rng)
        else:
            diag_a = np.diagonal(self.EAA, axis1=1, axis2=2)
            self.shrink_a.update_vb(diag_a.T[None])
            diag_b = np.diagonal(self.EBB, axis1=2, axis2=3)[..., :k]
            self.shrink_b.update_vb(diag_b.reshape(t * c, 1, k))

    # ----------------------------------------------------------------- DP mixture
    def _sq_dist(self):
        norm_z = np.trace(self.EZZ, axis1=1, axis2=2)
        return norm_z[:, None] - 2 * self.Ez @ self.Emu.T + self.Enorm_mu[None, :]

    def update_dp(self):
        est = self.est
        k, c = self.k, self.c
        label = self.label_ll.sum(axis=1)  # (n, c)
        if self.gibbs:
            log_q = np.log(np.maximum(stick_weights(self.nu), 1e-300))
            logp = (
                log_q
                + 0.5 * k * (np.log(self.Epsi) - _LOG2PI)
                - 0.5 * self.Epsi * self._sq_dist()
                + label
            )
            self.R = np.eye(c)[sample_categorical(logp, self.rng)]
            counts = self.R.sum(axis=0)
            prec = 1.0 + self.Epsi * counts
            mean = self.Epsi[:, None] * (self.R.T @ self.Ez) / prec[:, None]
            self.Emu = mean + self.rng.standard_normal((c, k)) / np.sqrt(prec)[:, None]
            self.Enorm_mu = np.sum(self.Emu**2, axis=1)
            sq = np.sum(self.R * self._sq_dist(), axis=0)
            self.Epsi = self.rng.gamma(est.psi_s + 0.5 * k * counts, 1.0 / (est.psi_r + 0.5 * sq))
            g1, g2 = stick_posterior(counts, self.Ealpha)
            self.nu = np.clip(self.rng.beta(g1, g2), 1e-12, 1 - 1e-12)
            shape, rate = alpha_posterior(np.sum(np.log1p(-self.nu)), c, est.alpha_s, est.alpha_r)
            self.Ealpha = self.rng.gamma(shape, 1.0 / rate)
            self.Elogq = np.log(np.maximum(stick_weights(self.nu), 1e-300))
            self.Elogpsi = np.log(self.Epsi)
            return
        logp = (
            self.Elogq
            + 0.5 * k * (self.Elogpsi - _LOG2PI)
            - 0.5 * self.Epsi * self._sq_dist()
            + label
        )
        logp -= logp.max(axis=1, keepdims=True)
        R = np.exp(logp)
        self.R = R / R.sum(axis=1, keepdims=True)
        counts = self.R.sum(axis=0)
        prec = 1.0 + self.Epsi * counts
        self.Emu = self.Epsi[:, None] * (self.R.T @ self.Ez) / prec[:, None]
        self.Enorm_mu = np.sum(self.Emu**2, axis=1) + k / prec
        sq = np.sum(self.R * self._sq_dist(), axis=0)
        shape = est.psi_s + 0.5 * k * counts
        rate = est.psi_r + 0.5 * sq
        self.Epsi = shape / rate
        self.Elogpsi = special.digamma(shape) - np.log(rate)
        self.g1, self.g2 = stick_posterior(counts, self.Ealpha)
        shape, rate = alpha_posterior(
            np.sum(expected_log_1m_nu(self.g1, self.g2)), c, est.alpha_s, est.alpha_r
        )
        self.Ealpha = shape / rate
        self.Elogq = expected_log_weights(self.g1, self.g2)

    # ----------------------------------------------------------------- monitoring
    def objective(self):
        """VB: expected log pseudo-likelihood (augmentation integrated out, Gaussian approximation
        of q(w), q(f)) minus KL terms of q(A), q(Z), q(beta) against their current priors.
        Gibbs: log pseudo-likelihood of the current draw."""
        label = float(np.sum(self.R[:, None, :] * self.label_ll))
        if self.gibbs:
            return self.data_ll + label
        k = self.k
        kl_a = _kl_diag_prior(
            self.Ea,
            np.diagonal(self.EAA, axis1=1, axis2=2) - self.Ea**2,
            self.logdet_a,
            self.shrink_a.prior_precision[0].T,
        )
        ebb = self.EBB.reshape(-1, k + 1, k + 1)
        eb = self.Eb.reshape(-1, k + 1)
        kl_b = _kl_diag_prior(
            eb, np.diagonal(ebb, axis1=1, axis2=2) - eb**2, self.logdet_b, self.prior_b
        )
        if self.est.mixture:
            log_prior = np.sum(
                self.R
                * (
                    0.5 * k * (self.Elogpsi - _LOG2PI)
                    - 0.5 * self.Epsi * self._sq_dist()
                    + self.Elogq
                    - np.log(np.maximum(self.R, 1e-300))
                )
            )
        else:
            log_prior = np.sum(-0.5 * k * _LOG2PI - 0.5 * np.trace(self.EZZ, axis1=1, axis2=2))
        entropy_z = np.sum(0.5 * self.logdet_z + 0.5 * k * (1 + _LOG2PI))
        return self.data_ll + label + log_prior + entropy_z - kl_a - kl_b


def _newton_scores(moments, Ea, EAA, m, max_iter):
    """Scores z_* of new samples with the loadings fixed (section 3, "Predictions"), for a rank
    likelihood without the mixture: each z_* maximises

        L(z) = sum_i log Z_i(a_i^T z) - z^T (C + I) z / 2,   C = sum_i Cov(a_i),

    with ``Z_i(mu)`` the normaliser of N(w; mu, 1) times the pseudo-likelihood of w given its
    training neighbours (``moments(mu, rows)`` -> E[w], Var(w) and row sums of log Z for the
    new samples ``rows``, all (samples, features)).  Its stationary point is the fixed point of
    the VB update ``z = S^-1 A^T E[w]``, ``S = sum_i E[a_i a_i^T] + I``; L is concave (log Z_i
    is, the pseudo-likelihood being log-concave), with Hessian ``-(S - A^T diag(Var w) A)``.
    Newton steps, each checked against L and replaced by the VB (EM) step where L would not
    increase; a sample stops when its z_* moves by less than 1e-3 of the mean magnitude of all
    z_*.  Returns ``(E[z], Cov(z) = S^-1)`` per sample.
    """
    d, k = Ea.shape
    S = EAA.sum(axis=0) + np.eye(k)
    _, cov, _ = _gaussian_block(S[None], np.zeros((1, k)))
    CI = S - Ea.T @ Ea
    sym = _Sym(k)
    aa_flat = sym.flat(Ea[:, :, None] * Ea[:, None, :])
    z = np.zeros((m, k))
    mean, var, log_z = moments(z @ Ea.T)
    value = log_z - 0.5 * np.einsum("nk,kl,nl->n", z, CI, z)
    active = np.arange(m)  # samples still moving; each stops on its own
    for _ in range(max_iter):
        grad = mean @ Ea - z[active] @ S
        hess = S - sym.unflat(var @ aa_flat)
        step, _, _ = _gaussian_block(hess, grad)
        new = z[active] + step
        new_mean, new_var, log_z = moments(new @ Ea.T, active)
        new_value = log_z - 0.5 * np.einsum("nk,kl,nl->n", new, CI, new)
        worse = new_value < value
        if worse.any():  # the VB step never decreases L (it is an EM step in w)
            new[worse] = (mean[worse] @ Ea) @ cov[0]
            new_mean[worse], new_var[worse], log_z = moments(new[worse] @ Ea.T, active[worse])
            new_value[worse] = log_z - 0.5 * np.einsum("nk,kl,nl->n", new[worse], CI, new[worse])
        change = np.max(np.abs(new - z[active]), axis=1)
        z[active] = new
        moving = change >= 1e-3 * max(1.0, float(np.abs(z).mean()))
        active, mean, var, value = (a[moving] for a in (active, new_mean, new_var, new_value))
        if not active.size:
            break
    return z, np.broadcast_to(cov, (len(z), k, k))


# --------------------------------------------------------------------------- targets
def _encode_targets(y, n):
    """``(mode, classes, Y in {-1, +1}, observed mask)``; mode: binary, multiclass, multitask."""
    y = np.asarray(y)
    if y.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {y.shape[0]}")
    if y.ndim == 1:
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(
                f"y has {len(classes)} distinct label(s); RankFactorClassifier needs at least 2"
            )
        if len(classes) == 2:
            Y = np.where(y == classes[1], 1.0, -1.0)[:, None]
            return "binary", classes, Y, np.ones((n, 1))
        Y = np.where(y[:, None] == classes[None, :], 1.0, -1.0)
        return "multiclass", classes, Y, np.ones_like(Y)
    if y.ndim != 2:
        raise ValueError(f"y must be 1-D labels or a 2-D (n_samples, n_tasks) array, got {y.shape}")
    try:
        yf = y.astype(float)
    except (TypeError, ValueError) as err:
        raise ValueError("a 2-D multi-task y must be numeric with NaN for missing labels") from err
    observed = ~np.isnan(yf)
    classes, Y = [], np.ones(yf.shape)
    for j in range(yf.shape[1]):
        cj = np.unique(yf[observed[:, j], j])
        if len(cj) != 2:
            raise ValueError(
                f"task {j} of y has {len(cj)} distinct observed label(s) {cj.tolist()[:5]}; "
                "each task must have exactly 2"
            )
        classes.append(cj)
        Y[:, j] = np.where(yf[:, j] == cj[1], 1.0, -1.0)
    return "multitask", classes, Y, observed.astype(float)


class _GibbsSampler:
    """One Gibbs chain of :class:`RankFactorClassifier` for
    :func:`~omicsbayes.inference.chain.run_chain`: the sweep is ``_iterate``; each kept draw
    adds to running sums of the moments prediction reads and returns the draws of ``idata_``."""

    def __init__(self, est, eng):
        self.est, self.eng = est, eng
        self.sums, self.count = {}, 0
        self.keep_loadings = est.n_features_in_ * est.n_factors * est.n_samples <= 5_000_000

    @staticmethod
    def current(est, eng):
        """The moments prediction reads, at the engine's current state."""
        out = {"Ea": eng.Ea, "EAA": eng.EAA, "Ez": eng.Ez, "Eb": eng.Eb, "EBB": eng.EBB}
        out["W"] = est._train_w(eng)
        if est.mixture:
            out.update(Emu=eng.Emu, Epsi=eng.Epsi, Elogpsi=eng.Elogpsi, Elogq=eng.Elogq, R=eng.R)
        return out

    def sweep(self, it):
        return {"log_likelihood": self.est._iterate(self.eng, it)}

    def draw(self):
        eng, k = self.eng, self.est.n_factors
        current = self.current(self.est, eng)
        if self.est.mixture:
            current["q"] = np.exp(current.pop("Elogq"))
        for key, val in current.items():
            self.sums[key] = self.sums.get(key, 0.0) + val
        self.count += 1
        ezt = np.hstack([eng.Ez, np.ones((len(eng.Ez), 1))])
        return {
            "coef": eng.Eb[..., :k],
            "intercept": eng.Eb[..., k],
            "train_decision": np.einsum("nk,tck,nc->nt", ezt, eng.Eb, eng.R),
            "scores": eng.Ez,
            "loadings": eng.Ea if self.keep_loadings else None,
        }

    def state(self):
        raise NotImplementedError("RankFactorClassifier does not checkpoint its Gibbs chain")

    def final(self):
        means = {key: val / self.count for key, val in self.sums.items()}
        if self.est.mixture:
            means["Elogq"] = np.log(np.maximum(means.pop("q"), 1e-300))
        return {"means": means, "engine": self.eng}


# --------------------------------------------------------------------------- estimator
class RankFactorClassifier(ClassifierMixin, BaseEstimator):
    """Discriminative factor model of paper 000 (Yuan, Henao et al., ICML 2015).

    ``X`` (n_samples, n_features) is modelled through ``w_{n,i} = a_i^T z_n`` with a Gaussian,
    ordinary rank (Hoff) or max-margin rank likelihood (eqs. 1-7); labels through a probit or a
    Bayesian SVM (eq. 8) on the factor scores, optionally as a Dirichlet-process mixture of local
    linear classifiers (eq. 9).  TPBN shrinkage on loadings (global scale per column) and
    coefficients (sections 3 and 6).

    Parameters
    ----------
    likelihood : {"gaussian", "rank", "maxmargin_rank"}
    classifier : {"probit", "bsvm"}
    mixture : bool
        DP mixture of local linear classifiers, truncated at ``n_components``.
    n_factors : int
    n_components : int
    epsilon : float
        Margin of the max-margin rank likelihood (eq. 5).
    maxmargin_form : {"latent", "exact"}
        ``"latent"``: w = a^T z + v with the max-margin pseudo-likelihood on w (default);
        ``"exact"``: w = a^T z as printed (collapses on noisy data, see the module docstring).
    r_a, s_a, r_beta, s_beta : float
        TPBN parameters (1/2: horseshoe).
    psi_s, psi_r, alpha_s, alpha_r : float
        Gamma (shape, rate) priors of the component precisions and the DP concentration.
    intercept_scale : float
        Prior sd of an unshrunk intercept added to each linear classifier (not in the paper, whose
        decision is sign(beta^T z); AUROC is unaffected, accuracy on unbalanced tasks improves).
        The local classifiers of the DP mixture have no intercept.
    inference : {"vb", "gibbs"}
    max_iter, tol : VB iterations and relative-change stopping rule of the monitoring bound.
    n_samples, burn_in, thin : Gibbs settings: draws kept, sweeps discarded first (None: as many
        as are kept, ``n_samples * thin``, i.e. half of the chain) and the thinning interval.
    n_chains : int
        Gibbs: independent chains, each seeded from ``random_state``, in parallel processes where
        cores allow. Prediction uses the first chain's posterior means (factors are identified
        only within a chain); ``idata_`` holds every chain for R-hat / ESS.
    transform_iter : int
        At most this many iterations of the z_* update for new samples (Newton steps for the
        rank likelihoods without the mixture; it stops when z_* changes by less than 1e-3 of its
        mean magnitude).
    random_state : int, Generator or None
    verbose : bool

    Attributes
    ----------
    loadings_ : (n_features, n_factors) posterior mean of A
    scores_ : (n_samples, n_factors) posterior mean of Z
    coef_ : (n_tasks, n_factors); with ``mixture`` the mixture-weighted average, and
        ``component_coef_`` (n_tasks, n_components, n_factors)
    intercept_ : (n_tasks,)
    classes_ : labels (binary, multiclass) or a list of per-task label pairs (multitask)
    lower_bound_ : VB history of the monitored objective (see ``_Engine.objective``): expected
        log pseudo-likelihood minus KL terms. With the latent max-margin form q(W) has no closed
        form and its mean is a Robbins-Monro average of draws (Monte Carlo within VB): the
        objective then leaves out the pseudo-likelihood and entropy of q(W), fluctuates with the
        draws and is not monotone; the stopping rule uses its change over 20 iterations
    idata_ : Gibbs draws (arviz.InferenceData, one entry of ``chain`` per chain): ``coef``,
        ``intercept``, ``train_decision`` (the identifiable decision function on the training
        samples, for R-hat / ESS), ``scores`` and, when small enough, ``loadings`` (both only up
        to rotation and scale); the log pseudo-likelihood in sample_stats.
    log_likelihood_ : Gibbs: log pseudo-likelihood after each sweep (first chain).
    n_iter_ : int
    """

    capabilities = frozenset({"classifier", "multi_task", "vb", "mcmc"})

    def __init__(
        self,
        likelihood="maxmargin_rank",
        classifier="bsvm",
        mixture=False,
        n_factors=20,
        n_components=5,
        epsilon=0.05,
        maxmargin_form="latent",
        r_a=0.5,
        s_a=0.5,
        r_beta=0.5,
        s_beta=0.5,
        psi_s=1.1,
        psi_r=0.001,
        alpha_s=1.0,
        alpha_r=1.0,
        intercept_scale=10.0,
        inference="vb",
        max_iter=100,
        tol=1e-4,
        n_samples=200,
        burn_in=None,
        thin=1,
        n_chains=1,
        transform_iter=50,
        random_state=None,
        verbose=False,
    ):
        self.likelihood = likelihood
        self.classifier = classifier
        self.mixture = mixture
        self.n_factors = n_factors
        self.n_components = n_components
        self.epsilon = epsilon
        self.maxmargin_form = maxmargin_form
        self.r_a = r_a
        self.s_a = s_a
        self.r_beta = r_beta
        self.s_beta = s_beta
        self.psi_s = psi_s
        self.psi_r = psi_r
        self.alpha_s = alpha_s
        self.alpha_r = alpha_r
        self.intercept_scale = intercept_scale
        self.inference = inference
        self.max_iter = max_iter
        self.tol = tol
        self.n_samples = n_samples
        self.burn_in = burn_in
        self.thin = thin
        self.n_chains = n_chains
        self.transform_iter = transform_iter
        self.random_state = random_state
        self.verbose = verbose

    @classmethod
    def from_variant(cls, name, **kwargs):
        """Estimator for a Table 1 name (G-L-Probit, ..., R-NL-BSVM) with other settings."""
        if name not in VARIANTS:
            raise ValueError(f"unknown variant {name!r}; expected one of {sorted(VARIANTS)}")
        likelihood, classifier, mixture = VARIANTS[name]
        fixed = {"likelihood": likelihood, "classifier": classifier, "mixture": mixture}
        clash = sorted(set(fixed) & set(kwargs))
        if clash:
            raise ValueError(f"variant {name!r} fixes {clash}; do not pass them")
        return cls(**fixed, **kwargs)

    # ----------------------------------------------------------------- validation
    _parameter_constraints = {
        "likelihood": [StrOptions({"gaussian", "rank", "maxmargin_rank"})],
        "classifier": [StrOptions({"probit", "bsvm"})],
        "mixture": ["boolean"],
        "inference": [StrOptions({"vb", "gibbs"})],
        "maxmargin_form": [StrOptions({"latent", "exact"})],
        **{
            name: [Interval(Integral, 1, None, closed="left")]
            for name in ("n_factors", "n_components", "max_iter", "n_samples", "transform_iter")
        },
        **{name: [Interval(Real, 0, None, closed="left")] for name in ("epsilon", "tol")},
        **{
            name: [POSITIVE]
            for name in (
                "r_a",
                "s_a",
                "r_beta",
                "s_beta",
                "psi_s",
                "psi_r",
                "alpha_s",
                "alpha_r",
                "intercept_scale",
            )
        },
        **{
            k: v
            for k, v in MCMC_CONSTRAINTS.items()
            if k not in ("n_iter", "checkpoint", "checkpoint_every")
        },
    }

    def _check_X(self, X, fitting):
        X = np.asarray(X, dtype=float)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
        n_nan = int(np.isnan(X).sum())
        if n_nan:
            raise ValueError(
                f"X has {n_nan} NaN values; RankFactorClassifier needs a complete matrix"
            )
        if not np.all(np.isfinite(X)):
            raise ValueError("X has infinite values; RankFactorClassifier needs finite values")
        if fitting and X.shape[0] < 2:
            raise ValueError(f"X has {X.shape[0]} sample(s); at least 2 are needed")
        if not fitting and X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features; the model was fitted on {self.n_features_in_}"
            )
        return X

    # ----------------------------------------------------------------- fit
    @limit_blas
    def fit(self, X, y):
        """Fit on ``X`` (n_samples, n_features) and labels ``y`` (1-D, or 2-D with NaN)."""
        self._validate_params()
        X = self._check_X(X, fitting=True)
        self._mode, self.classes_, Y, O = _encode_targets(y, X.shape[0])
        self.n_features_in_ = X.shape[1]
        self.n_tasks_ = Y.shape[1]
        rng = check_rng(self.random_state)
        if self.inference == "gibbs":
            eng = self._fit_gibbs(X, Y, O, rng)
        else:
            eng = _Engine(self, X, Y, O, rng, False)
            self._fit_vb(eng)
        self._finish(eng)
        return self

    def _iterate(self, eng, it):
        eng.data_step()
        check_finite(eng.data_ll, f"{self.likelihood} likelihood step", it)
        eng.update_a()
        check_finite(eng.Ea, "loadings update", it)
        eng.label_step()
        eng.update_beta()
        check_finite(eng.Eb, "classifier coefficient update", it)
        if self.likelihood == "maxmargin_rank" and self.maxmargin_form == "exact":
            eng.data_step()  # refresh neighbours and lambda with the new loadings
        eng.update_z()
        check_finite(eng.Ez, "factor score update", it)
        eng.update_shrinkage()
        if self.mixture:
            eng.label_step()
            eng.update_dp()
        value = eng.objective()
        what = "log pseudo-likelihood" if eng.gibbs else "lower bound"
        return check_finite(value, what, it)

    def _fit_vb(self, eng):
        # The Monte Carlo estimate of q(W) in the latent max-margin form makes the objective
        # fluctuate: there the change is taken over the last `lag` iterations, per iteration.
        lag = 20 if self.likelihood == "maxmargin_rank" and self.maxmargin_form == "latent" else 1
        self.lower_bound_, self.n_iter_, _ = run_vb(
            lambda it: self._iterate(eng, it),
            max_iter=self.max_iter,
            tol=self.tol,
            name="RankFactorClassifier VB",
            verbose=self.verbose,
            lag=lag,
            min_iter=10 + lag,
        )
        self._means = _GibbsSampler.current(self, eng)

    def _train_w(self, eng):
        """Training w in (features, samples) layout, which new samples are placed among."""
        if self.likelihood == "rank":
            return np.ascontiguousarray(eng.Ew.T)
        if self.likelihood == "maxmargin_rank" and self.maxmargin_form == "latent":
            return eng.H.T.copy()
        return eng.Ea @ eng.Ez.T

    def _fit_gibbs(self, X, Y, O, rng):
        """``n_chains`` Gibbs chains through :func:`~omicsbayes.inference.chain.run_chain`;
        returns the first chain's engine (its posterior means predict: factors are identified
        only within a chain)."""
        burn = self.n_samples * self.thin if self.burn_in is None else int(self.burn_in)
        total = burn + int(self.n_samples) * int(self.thin)

        def run(rng, chain):
            return run_chain(
                lambda state: _GibbsSampler(self, _Engine(self, X, Y, O, rng, True)),
                rng,
                n_iter=total,
                burn_in=burn,
                thin=self.thin,
                name="RankFactorClassifier Gibbs",
                verbose=self.verbose,
            )

        chains = sample_chains(run, rng, self.n_chains)
        first = chains[0]
        self.n_iter_ = total
        self.log_likelihood_ = first.traces["log_likelihood"]
        self._means = first.final["means"]
        names = [k for k in first.draws[0] if first.draws[0][k] is not None]
        posterior = {k: [np.stack([d[k] for d in c.draws]) for c in chains] for k in names}
        if not self.mixture:
            for k in ("coef", "intercept"):
                posterior[k] = [v[:, :, 0] for v in posterior[k]]
        keep = slice(burn, None, self.thin)
        self.idata_ = chains_to_idata(
            posterior=posterior,
            sample_stats={
                "log_pseudo_likelihood": [c.traces["log_likelihood"][keep] for c in chains]
            },
        )
        return first.final["engine"]

    def _finish(self, eng):
        means = self._means
        self._fit_shape = (eng.n, eng.d)  # prediction multiplies n x d matrices (limit_blas)
        k = self.n_factors
        self.loadings_ = means["Ea"]
        self.scores_ = means["Ez"]
        eb = means["Eb"]  # (tasks, components, K + 1)
        if self.mixture:
            weights = means["R"].mean(axis=0)
            self.component_coef_ = eb[..., :k]
            self.coef_ = np.einsum("c,tck->tk", weights, eb[..., :k])
            self.intercept_ = np.einsum("c,tc->t", weights, eb[..., k])
        else:
            self.coef_ = eb[:, 0, :k]
            self.intercept_ = eb[:, 0, k]
        if self.likelihood == "gaussian":
            self.center_, self.scale_ = eng.center, eng.scale
            self.noise_precision_ = eng.Etau
        else:
            self._index = eng.index

    # ----------------------------------------------------------------- prediction
    def _infer_new(self, X):
        """Posterior moments of z_* for new samples with the loadings fixed (section 3,
        "Predictions"): ``(E[z], E[z z^T], responsibilities)``.  All samples are updated together,
        as matrix products and elementwise kernels over (samples, features) arrays."""
        check_is_fitted(self, "loadings_")
        X = self._check_X(X, fitting=False)
        means = self._means
        k = self.n_factors
        sym = _Sym(k)
        Ea, EAA = means["Ea"], means["EAA"]
        m = X.shape[0]
        latent = self.likelihood == "maxmargin_rank" and self.maxmargin_form != "exact"
        exact = self.likelihood == "maxmargin_rank" and not latent
        eps = self.epsilon
        if self.likelihood == "gaussian":
            Xs = (X - self.center_) / self.scale_
            P = self.noise_precision_[None, :]
            H = self.noise_precision_ * Xs
        else:
            P = np.ones((1, self.n_features_in_))

            def neighbours(rows):
                lo_t, up_t = self._index.new_neighbours(means["W"], X[rows].T)
                return np.ascontiguousarray(lo_t.T), np.ascontiguousarray(up_t.T)

            def moments_of(lo, up):
                def moments(mu, rows=slice(None)):
                    if latent:
                        mean, var = np.empty_like(mu), np.empty_like(mu)
                        log_z = _margin_moments(mu, lo[rows], up[rows], eps, mean, var)
                        return mean, var, log_z
                    mean, var = truncnorm_moments(mu, 1.0, lo[rows], up[rows])
                    return mean, var, _log_diff_cdf(lo[rows] - mu, up[rows] - mu).sum(axis=1)

                return moments

            if not (self.mixture or exact):
                # samples in blocks of a few million entries (each sample's z_* is its own problem)
                step = max(1, _BLOCK // self.n_features_in_)
                Ez = np.empty((m, k))
                for start in range(0, m, step):
                    rows = slice(start, min(start + step, m))
                    moments = moments_of(*neighbours(rows))
                    Ez[rows], cov = _newton_scores(
                        moments, Ea, EAA, rows.stop - rows.start, self.transform_iter
                    )
                cov = np.broadcast_to(cov[0], (m, k, k))
                return Ez, _second(Ez, cov), np.ones((m, 1))
            lo, up = neighbours(slice(None))
            moments = moments_of(lo, up)
        if exact:
            eaa_flat = sym.flat(EAA)
            has_l, has_u = np.isfinite(lo), np.isfinite(up)
            lo0, up0 = np.where(has_l, lo, 0.0), np.where(has_u, up, 0.0)
        if self.mixture:
            c = means["Emu"].shape[0]
            R = np.full((m, c), 1.0 / c)
        else:
            R = np.ones((m, 1))
        Ez = np.zeros((m, k))
        EZZ = np.broadcast_to(np.eye(k), (m, k, k)).copy()
        for _ in range(self.transform_iter):
            if self.likelihood in ("rank", "maxmargin_rank") and not exact:
                H, _, _ = moments(Ez @ Ea.T)
            elif exact:
                wbar = Ez @ Ea.T
                var = np.maximum(sym.inner(sym.flat(EZZ), eaa_flat) - wbar**2, 0.0)
                u_l = lo0 + eps - wbar
                u_u = wbar + eps - up0
                il = np.where(has_l, expected_inv_lambda(u_l**2 + var), 0.0)
                iu = np.where(has_u, expected_inv_lambda(u_u**2 + var), 0.0)
                P = il + iu
                H = il * (lo0 + eps) + iu * (up0 - eps) + has_l - has_u
            if self.mixture:
                psibar = R @ means["Epsi"]
                rhs = R @ (means["Epsi"][:, None] * means["Emu"])
            else:
                psibar, rhs = np.ones(m), np.zeros((m, k))
            if P.shape[0] == 1:
                S = np.broadcast_to(np.einsum("i,ikl->kl", P[0], EAA), (m, k, k)).copy()
            else:
                S = sym.unflat(P @ eaa_flat)
            S[:, np.arange(k), np.arange(k)] += psibar[:, None]
            new, cov, _ = _gaussian_block(S, rhs + H @ Ea)
            change = np.max(np.abs(new - Ez))
            Ez, EZZ = new, _second(new, cov)
            if self.mixture:
                norm_mu = np.sum(means["Emu"] ** 2, axis=1)
                sq = np.trace(EZZ, axis1=1, axis2=2)[:, None] - 2 * Ez @ means["Emu"].T + norm_mu
                logp = means["Elogq"] + 0.5 * k * means["Elogpsi"] - 0.5 * means["Epsi"] * sq
                logp -= logp.max(axis=1, keepdims=True)
                R = np.exp(logp)
                R /= R.sum(axis=1, keepdims=True)
            if change < 1e-3 * max(1.0, float(np.abs(Ez).mean())) and self.likelihood != "gaussian":
                break
            if self.likelihood == "gaussian" and not self.mixture:
                break
        return Ez, EZZ, R

    @limit_blas
    def transform(self, X):
        """Posterior mean factor scores z_* (n_samples, n_factors) of new samples."""
        return self._infer_new(X)[0]

    def _task_scores(self, X):
        """Mean and variance of the decision function per task: (n, tasks) each."""
        Ez, EZZ, R = self._infer_new(X)
        means = self._means
        Ezt, EZZt = _with_one(Ez, EZZ)
        eb, ebb = means["Eb"], means["EBB"]
        t, c, k1 = eb.shape
        sym1 = _Sym(k1)
        f = np.einsum("nk,tck->ntc", Ezt, eb)
        f2 = sym1.inner(sym1.flat(EZZt), sym1.flat(ebb).reshape(t * c, -1)).reshape(-1, t, c)
        var = np.maximum(f2 - f**2, 0.0)
        return f, var, R

    @limit_blas
    def decision_function(self, X):
        """Score ``E[beta]^T z_* + b`` per task (mixture: weighted by the responsibilities of
        z_* under the components, without labels); positive favours the second class.

        Returns (n_samples,) for binary ``y``, (n_samples, n_classes) for multiclass (one
        versus rest) and (n_samples, n_tasks) for multi-task ``y``.
        """
        f, _, R = self._task_scores(X)
        dec = np.einsum("ntc,nc->nt", f, R)
        return dec[:, 0] if self._mode == "binary" else dec

    def predict(self, X):
        """Labels: sign of the decision per task (argmax for multiclass)."""
        dec = self.decision_function(X)
        if self._mode == "binary":
            return self.classes_[(dec > 0).astype(int)]
        if self._mode == "multiclass":
            return self.classes_[np.argmax(dec, axis=1)]
        return np.column_stack(
            [self.classes_[j][(dec[:, j] > 0).astype(int)] for j in range(self.n_tasks_)]
        )

    def _has_proba(self):
        return self.classifier == "probit"

    @available_if(_has_proba)
    @limit_blas
    def predict_proba(self, X):
        """Probit probabilities ``Phi(f / sqrt(1 + Var f))``: (n, 2) binary, (n, n_classes)
        multiclass (normalised one-versus-rest), (n, n_tasks) of the second class per task."""
        f, var, R = self._task_scores(X)
        p = np.einsum("ntc,nc->nt", special.ndtr(f / np.sqrt(1.0 + var)), R)
        if self._mode == "binary":
            return np.column_stack([1 - p[:, 0], p[:, 0]])
        if self._mode == "multiclass":
            return p / p.sum(axis=1, keepdims=True)
        return p
