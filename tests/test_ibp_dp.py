"""IBP stick-breaking slice sampler and DP-NIW mixture utilities against exact answers."""

import itertools

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import gammaln

from omicsbayes.inference.dp import (
    NIWPrior,
    escobar_west,
    sample_dp_assignments,
    sample_dp_components,
)
from omicsbayes.inference.ibp import (
    harmonic,
    ibp_slice_sweep,
    sample_ibp_alpha,
    sample_new_sticks,
    sample_z_column,
)


def test_ibp_slice_sampler_prior_matches_poisson_alpha_hn():
    """No data: K+ ~ Poisson(alpha H_N). Independent chains start from exact IBP draws (truncated
    stick-breaking, eq. 16) and take three slice sweeps; a kernel that does not leave the IBP
    invariant shifts the distribution (visiting the active columns first did, by +6 %)."""
    rng = np.random.default_rng(0)
    n, alpha, reps = 4, 1.5, 2500
    counts = np.empty(reps, int)
    for r in range(reps):
        pi = np.cumprod(rng.beta(alpha, 1.0, size=60))
        Z = rng.uniform(size=(n, 60)) < pi
        Z = Z[:, Z.any(0)]
        pi = rng.beta(Z.sum(0), 1.0 + n - Z.sum(0))
        for _ in range(3):
            Z, pi, _ = ibp_slice_sweep(Z, pi, alpha, rng)
        counts[r] = Z.shape[1]
    lam = alpha * harmonic(n)
    assert abs(counts.mean() - lam) < 4 * np.sqrt(lam / reps)
    assert abs(counts.var() - lam) < 0.4
    k = np.arange(12)
    emp = np.bincount(counts, minlength=40)[:12] / reps
    assert 0.5 * np.abs(emp - stats.poisson.pmf(k, lam)).sum() < 0.05


def _eq19_cdf(alpha, n, upper):
    """CDF of density (19) on (0, upper), by the trapezoid rule in t = log(pi)."""
    t = np.linspace(np.log(upper) - 40.0 / alpha, np.log(upper) - 1e-9, 200001)
    p = np.exp(t)
    i = np.arange(1, n + 1)
    series = np.sum((1 - p[:, None]) ** i / i, axis=1)
    logd = alpha * series + alpha * t + n * np.log1p(-p)
    d = np.exp(logd - logd.max())
    c = np.concatenate([[0.0], np.cumsum(0.5 * (d[1:] + d[:-1]) * np.diff(t))])
    return lambda x: np.interp(np.log(x), t, c / c[-1])


def test_new_sticks_follow_equation_19():
    """The first new stick has density (19) on (0, 1), the second (19) on (0, first); the count
    above s has mean alpha int_s^1 pi^-1 (1 - pi)^N (numerical integration)."""
    rng = np.random.default_rng(1)
    alpha, n, s = 2.0, 10, 1e-4
    sticks = [sample_new_sticks(s, alpha, n, rng) for _ in range(4000)]
    first = np.array([st[0] for st in sticks if st.size])
    assert stats.kstest(first, _eq19_cdf(alpha, n, 1.0)).pvalue > 0.01
    lo, hi = 0.08, 0.12
    second = np.array([st[1] / st[0] for st in sticks if st.size > 1 and lo < st[0] < hi])
    cdf2 = _eq19_cdf(alpha, n, 0.1)
    assert stats.kstest(second, lambda x: cdf2(0.1 * np.asarray(x))).pvalue > 0.01
    mass = integrate.quad(lambda p: (1 - p) ** n / p, s, 1, points=[0.01, 0.1])[0]
    counts = np.array([st.size for st in sticks])
    assert abs(counts.mean() - alpha * mass) < 4 * np.sqrt(alpha * mass / counts.size)


def test_z_column_block_update_matches_enumeration():
    """Column update of eq. (17) with the pi* slice factor, against all 2^3 columns."""
    rng = np.random.default_rng(2)
    pi_k, pi_rest = 0.2, 0.5
    ll_on = np.array([0.3, -1.0, 0.5])
    ll_off = np.array([0.0, 0.2, -0.4])
    cols = np.array(list(itertools.product([0, 1], repeat=3)), bool)
    logp = np.where(cols, np.log(pi_k) + ll_on, np.log1p(-pi_k) + ll_off).sum(1)
    logp -= np.log(np.where(cols.any(1), min(pi_k, pi_rest), pi_rest))
    exact = np.exp(logp - logp.max())
    exact /= exact.sum()
    draws = np.array(
        [
            sample_z_column(np.log(pi_k) + ll_on, np.log1p(-pi_k) + ll_off, pi_k, pi_rest, rng)
            for _ in range(20000)
        ]
    )
    codes = draws @ np.array([4, 2, 1])
    emp = np.bincount(codes, minlength=8) / len(codes)
    assert np.abs(emp - exact).max() < 0.015


def test_ibp_alpha_conditional():
    rng = np.random.default_rng(3)
    draws = np.array([sample_ibp_alpha(4, 10, 2.0, 1.0, rng) for _ in range(20000)])
    assert abs(draws.mean() - 6.0 / (1.0 + harmonic(10))) < 0.02


def _partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for p in _partitions(rest):
        yield [[first]] + p
        for i in range(len(p)):
            yield p[:i] + [[first] + p[i]] + p[i + 1 :]


def test_dp_assignments_match_exact_partition_posterior():
    """Collapsed sweep (eq. 22) on 4 points: stationary partition frequencies vs enumeration
    with the closed-form NIW marginal likelihood and the CRP prior."""
    rng = np.random.default_rng(4)
    W = np.array([[-1.5, 0.2], [-1.2, 0.0], [1.0, 0.4], [1.4, -0.3]])
    prior = NIWPrior(2, lam0=0.5)
    eta = 0.8
    parts = list(_partitions(list(range(4))))
    logp = []
    for p in parts:
        crp = len(p) * np.log(eta) + sum(gammaln(len(b)) for b in p)
        logp.append(crp + sum(prior.log_marginal(W[b]) for b in p))
    logp = np.asarray(logp)
    exact = np.exp(logp - logp.max())
    exact /= exact.sum()
    keys = [frozenset(frozenset(b) for b in p) for p in parts]
    labels = np.zeros(4, int)
    freq = dict.fromkeys(keys, 0)
    n_sweeps = 3000
    for _ in range(n_sweeps):
        labels = sample_dp_assignments(W, labels, eta, prior, rng)
        key = frozenset(frozenset(np.flatnonzero(labels == k)) for k in range(labels.max() + 1))
        freq[key] += 1
    emp = np.array([freq[k] / n_sweeps for k in keys])
    assert np.abs(emp - exact).max() < 0.045


def test_predictive_is_ratio_of_marginals():
    prior = NIWPrior(3)
    rng = np.random.default_rng(5)
    W = rng.standard_normal((5, 3))
    old = W[:4]
    pred = prior.log_predictive(W[4], [4], old.sum(0)[None], (old.T @ old)[None])[0]
    assert np.isclose(pred, prior.log_marginal(W) - prior.log_marginal(old))


def test_dp_assignments_reject_non_finite_input():
    """A NaN frequency, a negative concentration or weights that overflow is one clear error, not
    a silent draw (the compiled sweep would otherwise index past its components)."""
    rng = np.random.default_rng(9)
    W = rng.standard_normal((6, 2))
    labels = np.zeros(6, int)
    bad = W.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        sample_dp_assignments(bad, labels, 1.0, NIWPrior(2), rng)
    with pytest.raises(ValueError, match="eta must be >= 0"):
        sample_dp_assignments(W, labels, -1.0, NIWPrior(2), rng)
    bad[2, 1] = 1e200  # finite, but its square overflows inside the sweep
    with pytest.raises(ValueError, match="not finite and positive"):
        sample_dp_assignments(bad, labels, 1.0, NIWPrior(2), rng)


def test_predictive_is_scipys_multivariate_t():
    """The compiled t predictive (eq. 22-23) against scipy's multivariate t built from the NIW
    posterior's scatter form, for components of 0 to 6 points and a non-default prior."""
    rng = np.random.default_rng(8)
    d = 3
    A = rng.standard_normal((d, d))
    prior = NIWPrior(d, mu0=rng.standard_normal(d), lam0=0.7, Psi0=A @ A.T + np.eye(d), nu0=6.5)
    w = rng.standard_normal(d)
    for n in range(7):
        old = rng.standard_normal((n, d)) * 2.0 + 1.0
        mu_n, lam_n, Psi_n, nu_n = prior.posterior(n, old.sum(0), old.T @ old)
        df = nu_n - d + 1.0
        expected = stats.multivariate_t(mu_n, Psi_n * (lam_n + 1) / (lam_n * df), df=df).logpdf(w)
        got = prior.log_predictive(w, [n], old.sum(0)[None], (old.T @ old)[None])[0]
        assert np.isclose(got, expected, rtol=1e-12, atol=1e-12)


def test_niw_component_draws_match_posterior_moments():
    rng = np.random.default_rng(6)
    W = rng.standard_normal((8, 2)) + [1.0, -1.0]
    prior = NIWPrior(2)
    labels = np.zeros(8, int)
    draws = [sample_dp_components(W, labels, prior, rng) for _ in range(4000)]
    mus = np.array([d[0][0] for d in draws])
    Sig = np.array([d[1][0] for d in draws])
    mu_n, lam_n, Psi_n, nu_n = prior.posterior(8, W.sum(0), W.T @ W)
    assert np.allclose(mus.mean(0), mu_n, atol=0.03)
    assert np.allclose(Sig.mean(0), Psi_n / (nu_n - 2 - 1), rtol=0.06, atol=0.02)


def test_escobar_west_matches_exact_conditional():
    """(25) as a two-block Gibbs chain; stationary eta vs p(eta | K) on a grid (Antoniak)."""
    rng = np.random.default_rng(7)
    k, n, a, b = 4, 50, 2.0, 1.0
    eta = rng.gamma(a, 1 / b, size=20000)
    for _ in range(30):
        eta = escobar_west(eta, k, n, a, b, rng)
    grid = np.linspace(1e-4, 15, 20000)
    logd = stats.gamma.logpdf(grid, a, scale=1 / b) + k * np.log(grid)
    logd += gammaln(grid) - gammaln(grid + n)
    d = np.exp(logd - logd.max())
    cdf = np.cumsum(d) / d.sum()
    assert stats.kstest(eta, lambda x: np.interp(x, grid, cdf)).pvalue > 0.01


def test_z_column_with_x_ensemble_matches_enumeration_and_integration():
    """(z_ik, x_ik) jointly, x_ik ~ N(0, 1): the ensemble {current, K - 1 prior draws} summed
    out (ensemble_log_mean) in the eq. (17) column update, then x_ik picked (ensemble_pick).
    Stationary P(z column) against enumeration of the 2^3 columns with the slice factor and
    int N(x) L_i(x) dx by quadrature; E[x_1 | z_1 = 1] against quadrature."""
    from scipy.special import logsumexp

    from omicsbayes.inference.ibp import ensemble_log_mean, ensemble_pick

    rng = np.random.default_rng(7)
    pi_k, pi_rest, n, K = 0.3, 0.6, 3, 5
    centre, sharp = np.array([1.5, -0.5, 0.2]), np.array([2.0, 0.5, 4.0])
    ll_off = np.array([0.2, -0.3, 0.6])

    def ll_on(x):
        return -0.5 * sharp * (x - centre) ** 2

    g = np.linspace(-8, 8, 4001)
    dens = stats.norm.pdf(g)[:, None] * np.exp(ll_on(g[:, None]))
    log_int = np.log(integrate.trapezoid(dens, g, axis=0))
    e_x1 = integrate.trapezoid(g * dens[:, 0], g) / integrate.trapezoid(dens[:, 0], g)
    ref = {}
    for z in itertools.product([0, 1], repeat=n):
        z = np.array(z, bool)
        lp = np.sum(np.where(z, np.log(pi_k) + log_int, np.log1p(-pi_k) + ll_off))
        lp -= np.log(min(pi_rest, pi_k) if z.any() else pi_rest)
        ref[tuple(z)] = lp
    norm = logsumexp(list(ref.values()))
    x = rng.standard_normal(n)
    counts, x1 = {}, []
    T = 12000
    for _ in range(T):
        xs = np.vstack([x, rng.standard_normal((K - 1, n))])
        ll = ll_on(xs)
        z = sample_z_column(
            np.log(pi_k) + ensemble_log_mean(ll), np.log1p(-pi_k) + ll_off, pi_k, pi_rest, rng
        )
        x = xs[ensemble_pick(ll, z, rng), np.arange(n)]
        counts[tuple(z)] = counts.get(tuple(z), 0) + 1
        if z[0]:
            x1.append(x[0])
    for z, lp in ref.items():
        p = np.exp(lp - norm)
        assert abs(counts.get(z, 0) / T - p) < 5 * np.sqrt(p * (1 - p) / T) + 2e-3
    assert abs(np.mean(x1) - e_x1) < 0.03
