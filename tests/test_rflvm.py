"""RFLVM / IBP RFLVM (paper 002): every sampler step against an independent reference."""

import arviz as az
import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, gammaln, logsumexp
from threadpoolctl import threadpool_limits

from omicsbayes.inference import polyagamma_mean, sample_polyagamma
from omicsbayes.models import RFLVM
from omicsbayes.models.rflvm import _Chain, rff, sample_crt, sample_nb_dispersion
from omicsbayes.models.rflvm._updates import chol_inverse, rff_from_arg


def test_rff_approximates_rbf_kernel_better_with_more_features():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3)) * 0.7
    K = np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2, axis=2))
    errs = []
    for M in (10, 100, 1000):
        e = []
        for _ in range(5):
            Phi = rff(X, rng.standard_normal((M, 3)))
            e.append(np.abs(Phi @ Phi.T - K).mean())
        errs.append(np.mean(e))
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 0.03
    # Monte Carlo rate: error ~ M^-1/2
    assert errs[0] / errs[2] > 5


def test_rff_kernels_match_numpy_definition_and_chain_rule():
    """The compiled feature map against [cos G, sin G] / sqrt(M) written with numpy, and the
    chain rule to X and W (:func:`_grad_latent`) against central differences of a linear
    function of Phi(X * Z W^T) plus the Gaussian priors of X and W, with some z_ik off."""
    from omicsbayes.models.rflvm._kernels import _grad_latent

    rng = np.random.default_rng(20)
    G = rng.standard_normal((7, 5)) * 3
    Phi = rff_from_arg(G)
    assert np.allclose(Phi, np.hstack([np.cos(G), np.sin(G)]) / np.sqrt(5), rtol=0, atol=1e-15)
    N, M, D = 7, 5, 3
    X, W = rng.standard_normal((N, D)), rng.standard_normal((M, D))
    Z = rng.uniform(size=(N, D)) < 0.7
    mu = rng.standard_normal((M, D))
    chol_inv = np.linalg.inv(np.linalg.cholesky(stats.wishart.rvs(5, np.eye(D), M, rng)))
    Dphi = rng.standard_normal((N, 2 * M))  # f = sum(Dphi * Phi), df/dPhi = Dphi

    def f(X, W):
        white = np.einsum("mij,mj->mi", chol_inv, W - mu)
        return np.sum(Dphi * rff(X * Z, W)) - 0.5 * np.sum(X * X) - 0.5 * np.sum(white**2)

    gx, gw = _grad_latent(Dphi, rff(X * Z, W), X, Z, W, mu, chol_inv)
    h = 1e-6
    for which, grad in ((0, gx), (1, gw)):
        for idx in np.ndindex(grad.shape):
            up, down = [X.copy(), W.copy()], [X.copy(), W.copy()]
            up[which][idx] += h
            down[which][idx] -= h
            assert np.isclose((f(*up) - f(*down)) / (2 * h), grad[idx], rtol=1e-6, atol=1e-8)


def test_vectorised_sincos_matches_libm_over_every_magnitude():
    """The branch-free sin / cos of the feature maps (Cody-Waite reduction, fdlibm polynomials)
    against numpy's (libm) from 1e-8 to 1e8 in magnitude, across the 1e6 switch to libm, at
    multiples of pi / 4 and at non-finite arguments; and the row feature map of the sweep."""
    from omicsbayes.models.rflvm._kernels import _row_features, _sincos_into

    rng = np.random.default_rng(23)
    x = rng.uniform(-1, 1, 200_000) * 10.0 ** rng.uniform(-8, 8, 200_000)
    special = [0.0, -0.0, 1e6, -1e6, np.nextafter(1e6, 2e6), 1e300, np.inf, -np.inf, np.nan]
    x = np.concatenate([x, np.arange(-40, 41) * np.pi / 4, special])
    s, c = np.empty_like(x), np.empty_like(x)
    _sincos_into(x, s, c, 1.0)
    with np.errstate(invalid="ignore"):
        assert np.allclose(s, np.sin(x), rtol=0, atol=2.3e-16, equal_nan=True)
        assert np.allclose(c, np.cos(x), rtol=0, atol=2.3e-16, equal_nan=True)
    assert np.isnan(s[-3:]).all() and np.isnan(c[-3:]).all()
    g, phi = x[:7].copy(), np.empty(14)
    _row_features(g, phi, 7)
    assert np.allclose(phi, np.concatenate([np.cos(g), np.sin(g)]) / np.sqrt(7), rtol=0, atol=1e-16)


def test_logistic_rows_match_scipy_bernoulli_and_negative_binomial():
    """Row sums of y psi - w softplus(psi) against scipy's log pmfs (their psi-free constants
    added back), with extreme psi, in blocks that do not divide the rows."""
    from omicsbayes.models.rflvm._updates import logistic_rows

    rng = np.random.default_rng(22)
    psi = rng.standard_normal((6, 9)) * 4
    psi[0, 0], psi[1, 1] = 800.0, -800.0
    r = 2.5
    y = rng.poisson(3, psi.shape).astype(float)
    rows = logistic_rows(y, y + r, psi, block=4)
    ref = stats.nbinom.logpmf(y, r, 1 - expit(psi)) - (gammaln(y + r) - gammaln(r) - gammaln(y + 1))
    assert np.allclose(rows[2:], ref[2:].sum(1), rtol=1e-12)  # scipy overflows at |psi| = 800
    ref = y * psi - (y + r) * np.logaddexp(0, psi)
    assert np.allclose(rows, ref.sum(1), rtol=1e-12)
    b = (rng.uniform(size=psi.shape) < 0.5).astype(float)
    rows = logistic_rows(b, np.ones_like(b), psi)
    assert np.allclose(rows[2:], stats.bernoulli.logpmf(b, expit(psi))[2:].sum(1), rtol=1e-12)
    assert np.allclose(rows, np.sum(b * psi - np.logaddexp(0, psi), 1), rtol=1e-12)


def test_gauss_rows_match_scipy_normal_over_observed_entries():
    """The Gaussian row log likelihoods of the row-wise X step (a subset of rows, missing
    entries) against scipy's normal log density summed over the observed entries."""
    from omicsbayes.models.rflvm._kernels import _gauss_rows

    rng = np.random.default_rng(24)
    Y = rng.standard_normal((9, 6))
    obs = rng.uniform(size=Y.shape) < 0.7
    sigma2 = rng.uniform(0.2, 2.0, 6)
    const = np.sum(np.where(obs, -0.5 * np.log(2 * np.pi * sigma2), 0.0), axis=1)
    rows = np.array([7, 0, 3])
    psi = rng.standard_normal((3, 6))
    ref = np.where(obs[rows], stats.norm.logpdf(Y[rows], psi, np.sqrt(sigma2)), 0.0).sum(1)
    assert np.allclose(_gauss_rows(psi, Y, obs, sigma2, const, rows), ref, rtol=1e-13)


def test_gauss_grad_rhs_matches_dense_inverse():
    """The right-hand side of the Gaussian HMC gradient (:func:`_gauss_grad_rhs`, triangular
    inverse in numba) against the formula with numpy's dense inverse, on an ill-conditioned A."""
    from omicsbayes.models.rflvm._kernels import _gauss_grad_rhs

    rng = np.random.default_rng(25)
    N, p, J, c = 40, 12, 5, 300.0
    Phi = rff_from_arg(rng.standard_normal((N, 2)) @ rng.standard_normal((2, p // 2)) * 0.3)
    Y = rng.standard_normal((N, J))
    A = Phi.T @ Phi + np.eye(p) / c
    C, yy, a_n, b0 = Phi.T @ Y, np.sum(Y**2, 0), 3.0 + N / 2, 2.0
    Ainv = np.linalg.inv(A)
    mean = Ainv @ C
    ms = mean * (a_n / (b0 + 0.5 * (yy - np.sum(C * mean, 0))))
    rhs = np.empty((p + J, p))
    _gauss_grad_rhs(np.linalg.cholesky(A), C, yy, a_n, b0, J, rhs)
    assert np.linalg.cond(A) > 1e4
    assert np.allclose(rhs[:p], -(ms @ mean.T + J * Ainv), rtol=1e-9, atol=0)
    assert np.allclose(rhs[p:], ms.T, rtol=1e-9, atol=0)


def test_chol_inverse_matches_dense_inverse_and_rejects_indefinite():
    rng = np.random.default_rng(21)
    B = rng.standard_normal((30, 12))
    A = B.T @ B + 0.1 * np.eye(12)
    L, Ainv = chol_inverse(A)
    assert np.allclose(L, np.linalg.cholesky(A), rtol=1e-12, atol=1e-12)
    assert np.allclose(Ainv, np.linalg.inv(A), rtol=1e-9, atol=1e-12)
    assert np.array_equal(Ainv, Ainv.T)
    with pytest.raises(np.linalg.LinAlgError):
        chol_inverse(A - 2 * np.abs(np.linalg.eigvalsh(A)).max() * np.eye(12))


def test_polyagamma_mean():
    rng = np.random.default_rng(1)
    b = np.repeat([1.0, 3.5, 20.0], 40000)
    c = np.repeat([0.3, -2.0, 4.0], 40000)
    w = sample_polyagamma(b, c, rng).reshape(3, -1)
    exact = np.array([bb / (2 * cc) * np.tanh(cc / 2) for bb, cc in [(1, 0.3), (3.5, -2), (20, 4)]])
    se = w.std(1) / np.sqrt(w.shape[1])
    assert np.all(np.abs(w.mean(1) - exact) < 4 * se)
    assert np.allclose(polyagamma_mean([1.0, 3.5, 20.0], [0.3, -2.0, 4.0]), exact)


def test_crt_mean():
    rng = np.random.default_rng(2)
    y = np.repeat([0, 1, 7, 30], 20000)
    r = np.repeat([2.0, 0.5, 1.5, 4.0], 20000)
    L = sample_crt(y, r, rng, chunk=50000).reshape(4, -1)
    exact = [
        sum(rr / (rr + t) for t in range(yy)) for yy, rr in [(0, 2), (1, 0.5), (7, 1.5), (30, 4)]
    ]
    assert np.allclose(L.mean(1), exact, atol=0.05)
    assert np.all(L[0] == 0) and np.all(L[1] == 1)


def test_nb_dispersion_crt_gibbs_matches_exact_conditional():
    """Columns are independent chains of (L | r, y), (r | L) on the same data: their stationary
    r must follow Gamma(a, b) prior x prod_i NB(y_i; r, sigmoid(psi_i)) (grid)."""
    rng = np.random.default_rng(3)
    n, chains, a, b = 12, 4000, 2.0, 0.5
    psi = rng.normal(0.0, 0.7, size=n)
    y = rng.negative_binomial(3.0, 1 - expit(psi))
    Y = np.repeat(y[:, None], chains, axis=1)
    sp = np.repeat(np.logaddexp(0, psi)[:, None], chains, axis=1)
    obs = np.ones_like(Y, bool)
    r = rng.gamma(a, 1 / b, size=chains)
    for _ in range(40):
        r = sample_nb_dispersion(Y, sp, obs, r, a, b, rng)
    grid = np.linspace(1e-3, 40, 20000)
    logp = stats.gamma.logpdf(grid, a, scale=1 / b)
    logp += np.sum(
        gammaln(y[:, None] + grid)
        - gammaln(grid)
        + y[:, None] * psi[:, None]
        - (y[:, None] + grid) * np.logaddexp(0, psi)[:, None],
        axis=0,
    )
    d = np.exp(logp - logp.max())
    cdf = np.cumsum(d) / d.sum()
    assert stats.kstest(r, lambda x: np.interp(x, grid, cdf)).pvalue > 0.01


def _chain(likelihood, Y, seed=0, M=1):
    est = RFLVM(likelihood=likelihood, sparse=False, n_random_features=M, n_latent=1)
    obs = ~np.isnan(Y)
    return _Chain(est, Y, obs, np.random.default_rng(seed))


@pytest.mark.parametrize(
    "name", ["gaussian", "bernoulli", "negative_binomial", "poisson", "multinomial"]
)
def test_likelihood_objects_heldout_density_and_rate_match_scipy(name):
    """Each likelihood object (chosen once by name) scores held-out entries of a draw as scipy's
    distribution does, and gives the log expected counts of the perplexity (counts only)."""
    from omicsbayes.models.rflvm import COUNT_LIKELIHOODS, likelihood_of

    rng = np.random.default_rng(21)
    psi = rng.standard_normal((6, 4))
    theta = rng.uniform(0.5, 3.0, size=4)
    rows, cols = np.array([0, 2, 5, 5]), np.array([1, 3, 0, 2])
    y = rng.integers(0, 2, size=4).astype(float) if name == "bernoulli" else rng.poisson(2.0, 4)
    mu = psi[rows, cols]
    ref = {
        "gaussian": lambda: stats.norm.logpdf(y, mu, np.sqrt(theta[cols])),
        "bernoulli": lambda: stats.bernoulli.logpmf(y, expit(mu)),
        "negative_binomial": lambda: stats.nbinom.logpmf(y, theta[cols], 1 - expit(mu)),
        "poisson": lambda: stats.poisson.logpmf(y, np.exp(mu)),
        "multinomial": lambda: (
            y * np.log(np.exp(psi) / np.exp(psi).sum(1, keepdims=True))[rows, cols]
        ),
    }[name]()
    family = likelihood_of(name)
    assert family.name == name and family.counts == (name in COUNT_LIKELIHOODS)
    assert np.allclose(family.heldout_logpdf(psi, theta, rows, cols, y), ref, rtol=1e-12)
    if (
        family.counts
    ):  # the mean of y_ij: exp(psi), r exp(psi) (NB), proportional to it (multinomial)
        mean = np.exp(family.log_rate(psi, theta))
        expected = {
            "poisson": np.exp(psi),
            "negative_binomial": stats.nbinom.mean(theta, 1 - expit(psi)),
            "multinomial": np.exp(psi),
        }[name]
        assert np.allclose(mean, expected, rtol=1e-12)


def test_gaussian_collapsed_likelihood_is_multivariate_t():
    """beta_j | sigma_j^2 ~ N(0, sigma_j^2 c I) and sigma_j^-2 ~ Ga(a0, b0) integrated out:
    y_j ~ t_{2 a0}(0, (b0 / a0)(I + c Phi Phi^T)) (scipy, dense N x N scale), at several c."""
    rng = np.random.default_rng(4)
    Y = rng.standard_normal((8, 3)) * [0.3, 1.0, 4.0]
    est = RFLVM(sparse=False, n_random_features=3, n_latent=1, noise_prior=(1.5, 0.7))
    ch = _Chain(est, Y, np.ones_like(Y, bool), np.random.default_rng(0))
    S = ch.Phi @ ch.Phi.T
    for c in (0.01, 1.0, 250.0):
        ch.c = c
        ll = ch.family.collapsed(ch, *ch.family.stats(ch, ch.Phi))
        shape = (0.7 / 1.5) * (np.eye(8) + c * S)
        ref = sum(
            stats.multivariate_t.logpdf(Y[:, j], np.zeros(8), shape, df=3.0) for j in range(3)
        )
        assert np.isclose(ll, ref, rtol=1e-10)


def test_gaussian_collapsed_likelihood_matches_monte_carlo_over_prior():
    """The same marginal for one column against a Monte Carlo average over (sigma^2, beta)
    drawn from the normal-inverse-gamma prior."""
    rng = np.random.default_rng(12)
    Y = rng.standard_normal((3, 2))
    est = RFLVM(sparse=False, n_random_features=1, n_latent=1, noise_prior=(2.0, 1.0))
    ch = _Chain(est, Y, np.ones_like(Y, bool), np.random.default_rng(1))
    ch.c = 2.0
    lam, _, Q = ch.family.eig(*ch.family.stats(ch, ch.Phi))
    exact = ch.family.marginal_cols(ch, lam, Q * Q, [2.0])[0, 0]
    S = 200_000
    s2 = 1.0 / rng.gamma(2.0, 1.0, size=S)
    beta = rng.standard_normal((S, 2)) * np.sqrt(2.0 * s2)[:, None]
    mean = beta @ ch.Phi.T
    logp = stats.norm.logpdf(Y[:, 0], mean, np.sqrt(s2)[:, None]).sum(1)
    mc = logsumexp(logp) - np.log(S)
    assert abs(mc - exact) < 0.02


def test_gaussian_scale_step_matches_exact_conditional_on_grid():
    """c | Y, Phi on its grid (uniform prior over the grid points): the draws' frequencies
    against prod_j multivariate_t(y_j; 0, (b0 / a0)(I + c Phi Phi^T)), scipy, dense."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((10, 1))
    Y = np.sin(2 * x) @ rng.standard_normal((1, 3)) + 0.3 * rng.standard_normal((10, 3))
    est = RFLVM(sparse=False, n_random_features=2, n_latent=1, beta_scale_prior=(0.1, 100.0))
    ch = _Chain(est, Y, np.ones_like(Y, bool), np.random.default_rng(2))
    grid = ch.c_grid
    assert grid.size == 31 and np.isclose(grid[0], 0.1) and np.isclose(grid[-1], 100.0)
    S = ch.Phi @ ch.Phi.T
    lp = np.array(
        [
            sum(
                stats.multivariate_t.logpdf(Y[:, j], np.zeros(10), np.eye(10) + c * S, df=2.0)
                for j in range(3)
            )
            for c in grid
        ]
    )
    p = np.exp(lp - lp.max())
    p /= p.sum()
    lam, _, Q = ch.family.eig(*ch.family.stats(ch, ch.Phi))
    n = 20000
    idx = np.empty(n, int)
    for t in range(n):
        ch.family.scale_step(ch, lam, Q * Q)
        idx[t] = np.argmin(np.abs(grid - ch.c))
    freq = np.bincount(idx, minlength=grid.size) / n
    assert 0.5 * np.abs(freq - p).sum() < 0.02
    assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / n) + 1e-3)


def test_gaussian_nig_posterior_draws_match_closed_form():
    """(beta_j, sigma_j^2) | y_j, Phi, c from the normal-inverse-gamma posterior: mean of
    sigma^2 is b_n / (a_n - 1), beta has mean A^-1 Phi^T y and covariance E[sigma^2] A^-1 with
    A = Phi^T Phi + I / c (dense inverse here)."""
    rng = np.random.default_rng(11)
    Y = rng.standard_normal((12, 2))
    est = RFLVM(sparse=False, n_random_features=2, n_latent=1, noise_prior=(3.0, 2.0))
    ch = _Chain(est, Y, np.ones_like(Y, bool), np.random.default_rng(3))
    ch.c = 5.0
    Phi, y = ch.Phi, Y[:, 0]
    A = Phi.T @ Phi + np.eye(4) / 5.0
    m = np.linalg.solve(A, Phi.T @ y)
    b_n = 2.0 + 0.5 * (y @ y - (Phi.T @ y) @ m)
    a_n = 3.0 + 6.0
    n = 20000
    draws, s2 = np.empty((n, 4)), np.empty(n)
    for t in range(n):
        ch.family.draw_beta(ch)
        draws[t], s2[t] = ch.beta[:, 0], ch.sigma2[0]
    e_s2 = b_n / (a_n - 1)
    sd_s2 = e_s2 / np.sqrt(a_n - 2)
    assert abs(s2.mean() - e_s2) < 4 * sd_s2 / np.sqrt(n)
    cov = e_s2 * np.linalg.inv(A)
    assert np.allclose(draws.mean(0), m, atol=4 * np.sqrt(np.diag(cov).max() / n))
    assert np.allclose(np.cov(draws.T), cov, atol=0.05 * np.abs(cov).max())


def test_collapsed_row_sweep_targets_x_posterior_on_grid():
    """Gaussian collapsed X sweep (ensemble under the leave-one-out multivariate t): with Z, W,
    c and the data fixed, the draws of X (3 rows, D = 1) must follow
    N(X; 0, I) prod_j t_{2 a0}(y_j; 0, (b0 / a0)(I + c Phi Phi^T)) (a0 = b0 = 1), computed on a
    3-D grid with dense matrices. The posterior is symmetric under X -> -X, so second and
    cross moments are compared."""
    rng = np.random.default_rng(14)
    W = np.array([[1.3], [-0.6]])
    Y = rff(np.array([[1.2], [-0.3], [0.4]]), W) @ rng.standard_normal((4, 10)) * 2
    Y += 0.3 * rng.standard_normal(Y.shape)
    est = RFLVM(sparse=False, n_random_features=2, n_latent=1, n_x_proposals=6)
    ch = _Chain(est, Y, np.ones_like(Y, bool), np.random.default_rng(5))
    ch.W, ch.c = W, 3.0
    ch.Phi = rff(ch.X, W)
    g = np.linspace(-4.5, 4.5, 61)
    G = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    arg = G[:, :, None] * W[:, 0]
    Phi = np.concatenate([np.cos(arg), np.sin(arg)], 2) / np.sqrt(2)
    S = np.eye(3) + 3.0 * Phi @ np.swapaxes(Phi, 1, 2)
    _, logdet = np.linalg.slogdet(S)
    quad = np.einsum("gij,jk,ik->gk", np.linalg.inv(S), Y, Y)
    lp = -0.5 * np.sum(G**2, 1) - 5.0 * logdet - 2.5 * np.sum(np.log1p(quad / 2), 1)
    p = np.exp(lp - lp.max())
    p /= p.sum()
    pairs = ([0, 0, 1], [1, 2, 2])
    T = 20000
    draws = np.empty((T, 3))
    for t in range(T):
        ch.family.collapsed_sweep(ch, update_z=False)
        draws[t] = ch.X[:, 0]
    assert np.allclose((draws**2).mean(0), p @ G**2, atol=0.05)
    cross = (draws[:, pairs[0]] * draws[:, pairs[1]]).mean(0)
    assert np.allclose(cross, p @ (G[:, pairs[0]] * G[:, pairs[1]]), atol=0.05)
    assert np.allclose(ch.Phi, rff(ch.X, ch.W))


def test_collapsed_z_sweep_matches_enumeration_and_quadrature(check_z_draws):
    """Collapsed (z_ik, x_ik) sweep of the sparse Gaussian model with W, pi, c and the data
    fixed: the draws of (Z, X) (2 rows, 2 dimensions) must follow
    prod_ik N(x_ik; 0, 1) pi_k^z_ik (1 - pi_k)^(1 - z_ik) / pi*(Z)
    prod_j t_{2 a0}(y_j; 0, (b0 / a0)(I + c Phi Phi^T)) (a0 = b0 = 1), pi*(Z) the smallest
    weight of a non-empty column (1 if none). Reference: the 16 matrices Z enumerated, the active
    x_ik integrated out on a grid; compared: P(Z) and E[x_00 | z_00 = 1]."""
    from omicsbayes.models.rflvm import _collapsed_row_sweep

    rng = np.random.default_rng(21)
    N, D, J, c, K = 2, 2, 3, 2.0, 6
    W = np.array([[1.1, -0.7], [0.4, 1.3]])
    pi = np.array([0.6, 0.3])
    Y = rff(np.array([[1.0, 0.0], [-0.8, 0.9]]), W) @ rng.standard_normal((4, J)) * 1.5
    Y += 0.3 * rng.standard_normal(Y.shape)

    def log_marginal(XZ):
        """sum_j log t(y_j; 0, I + c Phi Phi^T) for a stack of X * Z (G, N, D)."""
        Phi = np.concatenate([np.cos(XZ @ W.T), np.sin(XZ @ W.T)], 2) / np.sqrt(2)
        S = np.eye(N) + c * Phi @ np.swapaxes(Phi, 1, 2)
        _, logdet = np.linalg.slogdet(S)
        quad = np.einsum("gij,jk,ik->gk", np.linalg.inv(S), Y, Y)
        return -0.5 * J * logdet - (1 + N / 2) * np.sum(np.log1p(quad / 2), 1)

    X, Z = rng.standard_normal((N, D)), np.ones((N, D), bool)
    T = 40000
    counts, x00 = {}, []
    for _ in range(T):
        Phi = rff(X * Z, W)
        _collapsed_row_sweep(
            X,
            Z,
            W,
            Y,
            Phi,
            np.linalg.inv(Phi.T @ Phi + np.eye(4) / c),
            Phi.T @ Y,
            np.sum(Y**2, 0),
            pi,
            rng.standard_normal((K - 1, N, D)),
            rng.gumbel(size=(N, D, K)),
            rng.uniform(size=(N, D)),
            np.argsort(rng.uniform(size=(N, D)), axis=1),
            1.0,
            1.0,
            True,
        )
        key = tuple(Z.ravel().astype(int))
        counts[key] = counts.get(key, 0) + 1
        if Z[0, 0]:
            x00.append(X[0, 0])
    check_z_draws(log_marginal, pi, counts, x00, p_slack=2e-3, x_tol=0.05)


def _grid_posterior(loglik):
    """Mean and covariance of a 2-D posterior N(beta; 0, I) x lik on a grid."""
    g = np.linspace(-6, 6, 241)
    B1, B2 = np.meshgrid(g, g, indexing="ij")
    B = np.stack([B1.ravel(), B2.ravel()], 1)
    lp = -0.5 * np.sum(B**2, 1) + loglik(B)
    p = np.exp(lp - lp.max())
    p /= p.sum()
    mean = p @ B
    cov = (B - mean).T @ ((B - mean) * p[:, None])
    return mean, cov


@pytest.mark.parametrize("likelihood", ["bernoulli", "poisson", "multinomial"])
def test_beta_step_matches_grid_posterior(likelihood):
    """M = 1 gives a 2-D beta_j: Polya-gamma Gibbs (eq. 27, 33-35) and the Poisson
    NB-proposal Metropolis step, run with X and W fixed, against a grid posterior."""
    rng = np.random.default_rng(5)
    n = 25
    x = rng.standard_normal((n, 1))
    w = np.array([[1.3]])
    Phi = rff(x, w)
    true = np.array([1.5, -1.0])
    psi = Phi @ true * 2.0
    if likelihood == "bernoulli":
        y = (rng.uniform(size=n) < expit(psi)).astype(float)
        Y = np.column_stack([y, y])

        def loglik(B):
            e = B @ Phi.T
            return np.sum(y * e - np.logaddexp(0, e), 1)

    elif likelihood == "poisson":
        y = rng.poisson(np.exp(psi + 1.0)).astype(float)
        Y = np.column_stack([y, y])

        def loglik(B):
            e = B @ Phi.T
            return np.sum(y * e - np.exp(e), 1)

    else:  # two categories, beta_2 = 0: binomial in column 1 with n_i trials
        tot = rng.integers(1, 6, size=n)
        y = rng.binomial(tot, expit(psi)).astype(float)
        Y = np.column_stack([y, tot - y])

        def loglik(B):
            e = B @ Phi.T
            return np.sum(y * e - tot * np.logaddexp(0, e), 1)

    ch = _chain(likelihood, Y, seed=6)
    ch.X, ch.W = x, w
    ch.Phi = Phi.copy()
    draws = []
    for it in range(2500):
        ch.step_beta(it)
        draws.append(ch.beta[:, 0].copy())
    draws = np.asarray(draws[200:])
    mean, cov = _grid_posterior(loglik)
    batches = draws[: len(draws) // 50 * 50].reshape(50, -1, 2).mean(1)
    se = batches.std(0, ddof=1) / np.sqrt(50)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se + 0.02)
    assert np.allclose(np.cov(draws.T), cov, atol=0.15 * np.abs(cov).max())


def _bars_data(seed, n=100, J=100, noise=0.05):
    """Cambridge-bars style data in the spirit of section 4.1: four latent dimensions, each on
    for a row with probability 1/2, x ~ N(0, 1); the frequencies W are the pixels of four bar
    images on a 6 x 6 grid (two horizontal and two vertical bars, two pixels wide), each pixel
    scaled by U(0.5, 2.5), so w_m is non-zero on the dimensions whose bar covers pixel m (32
    distinct frequencies); beta ~ N(0, I) from the prior, columns standardised, noise 0.05.
    Why these sizes: with J = 30 columns a linear model with ~20 factors fits the random-feature
    map almost exactly; with J = 100 columns, 64 random features and frequencies up to 2.5 the
    signal has a higher rank than the linear IBP factor model affords (it settles at ~20
    factors), while smaller frequency scales make the map so smooth that the linear model
    matches the planted non-linear one. Returns Y, the held-out mask (20 %) and the planted
    (X, Z, W)."""
    rng = np.random.default_rng(seed)
    grid = np.zeros((4, 6, 6))
    grid[0, 0:2, :] = grid[1, 4:6, :] = grid[2, :, 0:2] = grid[3, :, 4:6] = 1.0
    W = grid.reshape(4, 36).T * rng.uniform(0.5, 2.5, size=(36, 1))
    W = W[W.any(1)]
    X = rng.standard_normal((n, 4))
    Z = rng.uniform(size=(n, 4)) < 0.5
    F = rff(X * Z, W) @ rng.standard_normal((2 * W.shape[0], J))
    Y = (F - F.mean(0)) / F.std(0) + noise * rng.standard_normal((n, J))
    return Y, rng.uniform(size=Y.shape) < 0.2, (X, Z, W)


def test_cambridge_bars_planted_state_keeps_four_dims_and_beats_ibp_factor_model():
    """Started at the planted X, Z and W (everything else from the sampler: alpha, pi, the DP
    mixture, c, beta, sigma^2), the Gaussian IBP RFLVM keeps about four active dimensions (a
    biased Z update drifts away) and its held-out log likelihood beats IBPFactorModel's on the
    same mask by a wide margin. Held-out entries are NaN for both samplers. From the paper's
    start (two dimensions, PCA scores) the chain does not reach this mode in a test-sized run;
    see the next test and the report."""
    from omicsbayes.models import IBPFactorModel
    from omicsbayes.models.rflvm import STEPS

    Y, mask, (X, Z, W) = _bars_data(7)
    Ytr = np.where(mask, np.nan, Y)
    lin = IBPFactorModel(n_iter=300, burn_in=150, random_state=0).fit(Ytr)
    est = RFLVM(n_random_features=W.shape[0], n_latent=4)
    rng = np.random.default_rng(0)
    ch = _Chain(est, Ytr, ~mask, rng)
    ch.X, ch.Z, ch.W = X.copy(), Z.copy(), W.copy()
    ch.pi = rng.beta(Z.sum(0), 1.0 + Z.shape[0] - Z.sum(0))
    ch._dp_update()
    ch.Phi = rff(ch.XZ, ch.W)
    ch.step_beta(0)
    draws, n_active = [], []
    with threadpool_limits(1):  # as RFLVM.fit
        for it in range(60):
            for name in STEPS:
                getattr(ch, f"step_{name}")(it)
            n_active.append(ch.D)
            if it >= 30:
                draws.append(ch.snapshot())
    est.draws_ = draws
    est.n_samples_fit_, est.n_features_in_ = Y.shape
    est.offset_ = np.zeros(Y.shape[1])  # the chain ran on Y as it is
    assert 3 <= np.median(n_active[30:]) <= 6
    assert est.log_likelihood(Y, mask) > lin.log_likelihood(Y, mask) + 200


def test_cambridge_bars_from_pca_start_switches_dims_off_and_beats_ibp_factor_model():
    """From a non-planted start (8 dimensions of PCA scores, near-linear frequencies, every
    z_ik = 1) the IBP RFLVM switches dimensions the data do not need off: every retained draw
    uses fewer than the 8 it started with (counting the dimensions used by at least 10 % of
    the samples), and the median count lies between 3 and 7. On this draw, over chain seeds 7
    to 11, the median after 200 sweeps is 6, 7, 5, 6 and 4: the sampler mixes slowly in the
    count, so one chain need not reach the four planted dimensions, and which chain stops
    where depends on the floating-point rounding of the machine. It beats IBPFactorModel's
    held-out log likelihood on the same mask by a wide margin (at least +505 over those
    seeds). From the paper's start (2 dimensions) the chain reaches three dimensions and
    scores below the linear model (docs/models.md, Paper 002)."""
    from omicsbayes.models import IBPFactorModel

    Y, mask, _ = _bars_data(7)
    Ytr = np.where(mask, np.nan, Y)
    lin = IBPFactorModel(n_iter=300, burn_in=150, random_state=0).fit(Ytr)
    m = RFLVM(n_random_features=32, n_latent=8, n_iter=200, random_state=8).fit(Ytr)
    major = [int(np.sum((d["XZ"] != 0).sum(0) >= 10)) for d in m.draws_]
    assert max(major) < 8
    assert 3 <= np.median(major) <= 7
    assert m.log_likelihood(Y, mask) > lin.log_likelihood(Y, mask) + 300


def _toy_matrix(likelihood, rng, n, J, gaussian_noise=0.0):
    """A rank-2 matrix in the data type of ``likelihood`` and a 20 % held-out mask."""
    psi = rng.standard_normal((n, 2)) @ rng.standard_normal((2, J))
    noise = gaussian_noise * rng.standard_normal(psi.shape) if gaussian_noise else 0.0
    Y = {
        "gaussian": psi + noise,
        "bernoulli": (rng.uniform(size=psi.shape) < expit(psi)).astype(float),
        "negative_binomial": rng.poisson(np.exp(psi + 1)).astype(float),
        "poisson": rng.poisson(np.exp(psi)).astype(float),
        "multinomial": rng.poisson(np.exp(psi + 1)).astype(float),
    }[likelihood]
    return Y, rng.uniform(size=Y.shape) < 0.2


def _observed_loglik(m, Y, obs):
    """Observed-entry log likelihood of the last draw, written out independently."""
    d = m.draws_[-1]
    psi = rff(d["XZ"], d["W"]) @ d["beta"] + m.offset_
    th = d["theta"]
    if m.likelihood == "gaussian":
        e = stats.norm.logpdf(Y, psi, np.sqrt(th))
    elif m.likelihood == "bernoulli":
        e = stats.bernoulli.logpmf(Y, expit(psi))
    elif m.likelihood == "negative_binomial":
        e = stats.nbinom.logpmf(Y, th, 1 - expit(psi))
    elif m.likelihood == "poisson":
        e = stats.poisson.logpmf(Y, np.exp(psi))
    else:
        lse = logsumexp(np.where(obs, psi, -np.inf), axis=1, keepdims=True)
        n = np.where(obs, Y, 0).sum(1)
        row = gammaln(n + 1) - np.sum(np.where(obs, gammaln(np.where(obs, Y, 0) + 1), 0), 1)
        return float(np.sum(np.where(obs, np.where(obs, Y, 0) * (psi - lse), 0)) + row.sum())
    return float(np.sum(e[obs]))


@pytest.mark.parametrize(
    "likelihood", ["gaussian", "bernoulli", "negative_binomial", "poisson", "multinomial"]
)
def test_nan_poisoned_heldout_entries_are_never_used(likelihood):
    """Held-out entries are NaN in the fitted matrix: the sampler must stay finite and its
    log likelihood must be exactly the sum over the observed entries."""
    rng = np.random.default_rng(8)
    Y, mask = _toy_matrix(likelihood, rng, 30, 8)
    Ytr = np.where(mask, np.nan, Y)
    m = RFLVM(likelihood=likelihood, n_random_features=6, n_iter=4, random_state=1).fit(Ytr)
    assert np.all(np.isfinite(m.log_likelihood_))
    assert np.isclose(m.log_likelihood_[-1], _observed_loglik(m, Y, ~mask), rtol=1e-8)
    assert np.isfinite(m.log_likelihood(Y, mask))
    if likelihood in ("negative_binomial", "poisson", "multinomial"):
        assert m.perplexity(Y, mask) > 1.0
    assert m.latent_.shape[0] == 30
    assert m.idata_.posterior["n_active"].shape == (1, 2)


def test_gaussian_fits_uncentred_columns_and_its_predictive_recovers_the_offset():
    """Eq. (13)'s weights have prior mean zero and the features no constant: the Gaussian RFLVM
    samples the centred columns and its predictive adds the observed column means back, so a
    level of 100 (scikit-learn's check_n_features_in) neither breaks the beta step's Cholesky
    factor nor the predictive. The count likelihoods keep a zero offset."""
    rng = np.random.default_rng(31)
    level = np.array([100.0, -40.0, 250.0, 7.0])
    Y = level + rng.standard_normal((60, 4))
    mask = rng.uniform(size=Y.shape) < 0.1
    m = RFLVM(n_iter=10, burn_in=5, n_latent=2, n_random_features=6, random_state=0)
    m.fit(np.where(mask, np.nan, Y))
    assert np.allclose(m.offset_, level, atol=0.5)
    psi = np.mean([m._draw_psi(d) for d in m.draws_], axis=0)
    assert np.allclose(psi.mean(axis=0), level, atol=0.5)
    assert np.allclose(m.idata_.sample_stats["predictive_mean"].mean(), level.mean(), atol=0.5)
    # held-out entries of unit noise: a per-entry log density near N(0, 1)'s, not ~ -level^2
    assert m.log_likelihood(Y, mask) / mask.sum() > -3.0
    counts = RFLVM(likelihood="poisson", n_iter=2, n_random_features=4, random_state=0)
    assert np.array_equal(counts.fit(rng.poisson(5.0, (10, 3))).offset_, np.zeros(3))


def test_a_fit_without_offset_predicts_as_it_was_fitted_on_uncentred_columns():
    """A fit file written before ``offset_`` existed holds a model of the uncentred columns: its
    predictive is the draws' own, with no offset added."""
    rng = np.random.default_rng(5)
    Y = rng.standard_normal((20, 4))
    mask = rng.uniform(size=Y.shape) < 0.2
    m = RFLVM(n_iter=6, burn_in=3, n_latent=2, n_random_features=4, random_state=0)
    m.fit(np.where(mask, np.nan, Y))
    m.offset_ = np.zeros(4)
    expected = m.log_likelihood(Y, mask)
    del m.offset_
    assert m.log_likelihood(Y, mask) == expected


def test_thin_keeps_every_thin_th_draw_of_the_same_chain():
    """thin changes which draws are kept, never the chain: the draws of thin=3 are every third
    draw of thin=1 with the same seed."""
    rng = np.random.default_rng(23)
    Y = rng.standard_normal((15, 5))
    kw = {"n_random_features": 4, "n_latent": 2, "n_iter": 10, "burn_in": 2, "random_state": 4}
    a = RFLVM(**kw).fit(Y)
    b = RFLVM(thin=3, **kw).fit(Y)
    assert len(a.draws_) == 8 and len(b.draws_) == 3
    for da, db in zip(a.draws_[::3], b.draws_, strict=True):
        assert all(np.array_equal(da[k], db[k]) for k in da)
    assert np.array_equal(a.log_likelihood_, b.log_likelihood_)


def test_dense_model_keeps_its_dimension_and_reproduces_with_seed():
    rng = np.random.default_rng(9)
    Y = rng.standard_normal((20, 6))
    a = RFLVM(sparse=False, n_latent=3, n_random_features=5, n_iter=4, random_state=3).fit(Y)
    b = RFLVM(sparse=False, n_latent=3, n_random_features=5, n_iter=4, random_state=3).fit(Y)
    assert np.all(a.n_active_ == 3)
    assert np.array_equal(a.latent_, b.latent_)
    assert "alpha" not in a.idata_.posterior


@pytest.mark.parametrize(
    "kwargs,Y,match",
    [
        ({"likelihood": "gamma"}, np.ones((4, 4)), "likelihood"),
        ({"n_latent": 0}, np.ones((4, 4)), "n_latent"),
        ({"n_x_proposals": 0}, np.ones((4, 4)), "n_x_proposals"),
        ({"hmc_moves": -1}, np.ones((4, 4)), "hmc_moves"),
        ({"hmc_leapfrog": 0}, np.ones((4, 4)), "hmc_leapfrog"),
        ({"beta_scale_prior": (10.0, 1.0)}, np.ones((4, 4)), "beta_scale_prior"),
        ({"beta_scale_prior": (0.0, 1.0)}, np.ones((4, 4)), "beta_scale_prior"),
        ({"n_iter": 5, "burn_in": 5}, np.ones((4, 4)), "burn_in"),
        ({"likelihood": "bernoulli"}, np.full((4, 4), 2.0), "0/1"),
        ({"likelihood": "poisson"}, np.full((4, 4), -1.0), "16 negative values"),
        ({}, np.ones(4), "2D array"),
        ({}, np.full((4, 4), np.nan), "only NaN values"),
    ],
)
def test_bad_input_messages(kwargs, Y, match):
    with pytest.raises(ValueError, match=match):
        RFLVM(**{"n_iter": 2, **kwargs}).fit(Y)


def test_heldout_requires_values_and_count_likelihood_for_perplexity():
    rng = np.random.default_rng(10)
    Y = rng.standard_normal((10, 4))
    m = RFLVM(n_random_features=4, n_iter=2, random_state=0).fit(Y)
    mask = np.zeros_like(Y, bool)
    mask[0, 0] = True
    with pytest.raises(ValueError, match="NaN"):
        m.log_likelihood(np.where(mask, np.nan, Y), mask)
    with pytest.raises(ValueError, match="count likelihood"):
        m.perplexity(Y, mask)


@pytest.mark.parametrize(
    "likelihood", ["gaussian", "bernoulli", "negative_binomial", "poisson", "multinomial"]
)
def test_hmc_target_gradient_matches_finite_differences(likelihood):
    """The (X, W) target of the HMC step: its gradient against central differences of the
    float64 target, with some z_ik off and missing entries (to float32 accuracy where the
    gradient is computed in float32: Gaussian, Bernoulli, negative binomial); for the Gaussian
    its value against the collapsed marginal (:meth:`Gaussian.collapsed`) plus the X and W
    priors, up to one constant."""
    rng = np.random.default_rng(11)
    Y, mask = _toy_matrix(likelihood, rng, 12, 7, gaussian_noise=0.3)
    est = RFLVM(likelihood=likelihood, n_random_features=5, n_latent=3)
    ch = _Chain(est, np.where(mask, np.nan, Y), ~mask, rng)
    ch.Z[rng.uniform(size=ch.Z.shape) < 0.3] = False
    chol_inv = np.linalg.inv(np.linalg.cholesky(ch.Sigmas))[ch.labels]
    value = ch._log_target_xw(ch.X, ch.W, chol_inv)
    gx, gw = ch._grad_xw(ch.X, ch.W, chol_inv, ch._grad_prep())
    single = likelihood in ("gaussian", "bernoulli", "negative_binomial")
    rtol = 1e-4 if single else 1e-5
    atol = rtol * max(np.abs(gx).max(), np.abs(gw).max())
    h = 1e-6
    for which, grad in ((0, gx), (1, gw)):
        for idx in ((0, 0), (3, 1), (4, 2)):
            pos = [ch.X.copy(), ch.W.copy()]
            pos[which][idx] += h
            up = ch._log_target_xw(*pos, chol_inv)
            pos[which][idx] -= 2 * h
            down = ch._log_target_xw(*pos, chol_inv)
            assert np.isclose((up - down) / (2 * h), grad[idx], rtol=rtol, atol=atol)
    if likelihood == "gaussian":

        def reference(X, W):
            Phi = rff(X * ch.Z, W)
            prior_w = sum(
                stats.multivariate_normal.logpdf(W[m], ch.mus[k], ch.Sigmas[k])
                for m, k in enumerate(ch.labels)
            )
            prior_x = stats.norm.logpdf(X).sum()
            return ch.family.collapsed(ch, *ch.family.stats(ch, Phi)) + prior_w + prior_x

        X2, W2 = ch.X + 0.3 * rng.standard_normal(ch.X.shape), ch.W * 1.2
        diff = ch._log_target_xw(X2, W2, chol_inv) - value
        assert np.isclose(diff, reference(X2, W2) - reference(ch.X, ch.W), rtol=1e-9)


def test_gaussian_hmc_gradient_agrees_with_a_numpy_float32_formula():
    """The Gaussian HMC gradient (numba kernels for A^-1 and the chain rule) against a
    float32 gradient written out with numpy (chol_inverse, two products for d/dPhi,
    the chain rule and the priors by einsum), on a 60 x 8 problem with missing entries and
    some z_ik off: both within float32 accuracy of the float64 gradient, and of each other."""
    rng = np.random.default_rng(26)
    Y, mask = _toy_matrix("gaussian", rng, 60, 8, gaussian_noise=0.3)
    est = RFLVM(n_random_features=10, n_latent=3)
    ch = _Chain(est, np.where(mask, np.nan, Y), ~mask, rng)
    ch.Z[rng.uniform(size=ch.Z.shape) < 0.3] = False
    chol_inv = np.linalg.inv(np.linalg.cholesky(ch.Sigmas))[ch.labels]
    gx, gw = ch._grad_xw(ch.X, ch.W, chol_inv, ch._grad_prep())
    f32, p, XZ = np.float32, 20, ch.X * ch.Z
    Phi = rff_from_arg(XZ @ ch.W.T).astype(f32)
    Yf = ch.Yf.astype(f32)
    _, Ainv = chol_inverse((Phi.T @ Phi).astype(float) + np.eye(p) / ch.c)
    C = (Phi.T @ Yf).astype(float)
    mean = Ainv @ C
    q = np.maximum(ch.yy - np.sum(C * mean, axis=0), 0.0)
    ms = mean * (ch.a_n / (ch.est.noise_prior[1] + 0.5 * q))
    d_phi = Yf @ ms.T.astype(f32) - Phi @ (ms @ mean.T + ch.J * Ainv).astype(f32)
    d_g = d_phi[:, 10:] * Phi[:, :10] - d_phi[:, :10] * Phi[:, 10:]
    white = np.einsum("mij,mj->mi", chol_inv, ch.W - ch.mus[ch.labels])
    ref_x = (d_g @ ch.W) * ch.Z - ch.X
    ref_w = d_g.T @ XZ - np.einsum("mji,mj->mi", chol_inv, white)
    # float64 gradient: the same formula without the float32 casts
    Phi64 = rff_from_arg(XZ @ ch.W.T)
    _, Ainv = chol_inverse(Phi64.T @ Phi64 + np.eye(p) / ch.c)
    C = Phi64.T @ ch.Yf
    mean = Ainv @ C
    ms = mean * (ch.a_n / (ch.est.noise_prior[1] + 0.5 * (ch.yy - np.sum(C * mean, axis=0))))
    d_phi = ch.Yf @ ms.T - Phi64 @ (ms @ mean.T + ch.J * Ainv)
    d_g = d_phi[:, 10:] * Phi64[:, :10] - d_phi[:, :10] * Phi64[:, 10:]
    true_x = (d_g @ ch.W) * ch.Z - ch.X
    true_w = d_g.T @ XZ - np.einsum("mji,mj->mi", chol_inv, white)
    for new, old, true in ((gx, ref_x, true_x), (gw, ref_w, true_w)):
        scale = np.abs(true).max()
        err_new, err_old = np.abs(new - true).max() / scale, np.abs(old - true).max() / scale
        assert err_new < 1e-3 and err_new < 3 * err_old + 1e-6  # here 1e-4..5e-4 both
        assert np.abs(new - old).max() < 3e-4 * scale  # here 3e-5 and 1e-4


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli"])
def test_hmc_step_size_found_then_dual_averaged_in_burn_in_and_fixed_after(likelihood, monkeypatch):
    """step_hmc: the first call starts dual averaging from find_step_size's step, each burn-in
    move updates it, the first call after burn-in fixes the averaged step, later calls keep
    it; a chain restored from a state without ``hmc_adapt`` (a checkpoint written before it
    existed) keeps its step."""
    from omicsbayes.models.rflvm import _chain as chain_mod

    found, search = [], chain_mod.find_step_size

    def find(*args):
        found.append(search(*args))
        return found[-1]

    monkeypatch.setattr(chain_mod, "find_step_size", find)
    rng = np.random.default_rng(12)
    Y, mask = _toy_matrix(likelihood, rng, 30, 8, gaussian_noise=0.3)
    est = RFLVM(likelihood=likelihood, n_random_features=5, n_latent=2, n_iter=10, burn_in=4)
    est.hmc_leapfrog = 5
    Ymiss = np.where(mask, np.nan, Y)
    ch = _Chain(est, Ymiss, ~mask, rng)
    old = ch.state()
    ch.step_hmc(0)
    assert ch.hmc_adapt[:2] == (pytest.approx(np.log(10 * found[0])), 1)
    for it in range(1, 4):
        ch.step_hmc(it)
    assert len(found) == 1 and ch.hmc_adapt[1] == 4
    averaged = np.exp(ch.hmc_adapt[3])
    ch.step_hmc(4)
    assert ch.hmc_adapt is False and ch.hmc_step_size == pytest.approx(averaged)
    ch.step_hmc(5)
    assert ch.hmc_step_size == pytest.approx(averaged)
    del old["hmc_adapt"]
    restored = _Chain.restore(est, Ymiss, ~mask, rng, old)
    for it in range(3):
        restored.step_hmc(it)
    assert restored.hmc_step_size == 0.01 and len(found) == 1


@pytest.mark.parametrize("likelihood", ["bernoulli", "negative_binomial"])
def test_w_step_delayed_acceptance_targets_grid_posterior(likelihood, monkeypatch):
    """The prior-proposal MH step for w (eq. 21) with its float32 first stage (delayed
    acceptance), alone (the elliptical slice step switched off), against the grid posterior
    of a single frequency w given X, beta and the mixture component: M = 1, D = 1."""
    rng = np.random.default_rng(9)
    n, J = 30, 3
    x = rng.standard_normal((n, 1))
    beta = rng.standard_normal((2, J)) * (2.0 if likelihood == "bernoulli" else 0.7)
    psi = rff(x, np.array([[1.2]])) @ beta
    if likelihood == "bernoulli":
        Y = (rng.uniform(size=psi.shape) < expit(psi)).astype(float)
    else:
        Y = rng.negative_binomial(4.0, expit(-psi)).astype(float)
    ch = _chain(likelihood, Y, seed=3)
    ch.X, ch.beta = x, beta
    ch.r = np.full(J, 4.0)
    ch._refresh_const()
    ch.mus, ch.Sigmas, ch.labels = np.zeros((1, 1)), np.full((1, 1, 1), 2.0), np.zeros(1, int)
    monkeypatch.setattr(ch, "_w_ess", lambda chol: None)
    grid = np.linspace(-6, 6, 1201)
    lp = np.array([ch.row_loglik(rff(x, np.array([[w]])) @ beta).sum() for w in grid])
    lp += stats.norm.logpdf(grid, 0.0, np.sqrt(2.0))
    p = np.exp(lp - lp.max())
    p /= p.sum()
    draws = []
    for it in range(6000):
        ch.step_w(it)
        draws.append(ch.W[0, 0])
    draws = np.asarray(draws[500:])
    # the posterior of w is symmetric-bimodal only if beta allows; compare the CDF on the grid
    cdf = np.cumsum(p)
    emp = np.searchsorted(np.sort(draws), grid, side="right") / draws.size
    ess = float(np.squeeze(az.ess(draws[None, :])))
    assert np.max(np.abs(emp - cdf)) < 1.6 / np.sqrt(ess) + 0.01
    assert 0.03 < ch.accept[0] / ch.accept[1] < 0.9


def test_logistic_rows_in_float32_approximates_float64():
    """The float32 logistic-link likelihood (the first stage of the delayed-acceptance W and z
    steps) within float32 accuracy of the float64 one (tested against scipy above), also its
    changes, with missing entries (zero weight and y)."""
    from omicsbayes.models.rflvm._updates import logistic_rows

    rng = np.random.default_rng(2)
    psi = 3.0 * rng.standard_normal((40, 60))
    Y = rng.poisson(3.0, psi.shape).astype(float)
    w = (Y + 2.5) * (rng.uniform(size=psi.shape) < 0.9)
    Y *= w > 0
    exact = logistic_rows(Y, w, psi, block=7)
    np.testing.assert_allclose(exact, np.sum(Y * psi - w * np.logaddexp(0, psi), 1), rtol=1e-12)
    f32 = np.float32
    Y32, w32 = Y.astype(f32), w.astype(f32)
    approx = logistic_rows(Y32, w32, psi.astype(f32))
    assert approx.dtype == np.float64
    tol = 1e-6 * np.abs(w * np.logaddexp(0, psi)).sum(1)
    assert np.all(np.abs(approx - exact) < tol)
    psi2 = psi + 0.01 * rng.standard_normal(psi.shape)
    d_exact = logistic_rows(Y, w, psi2).sum() - exact.sum()
    d_approx = logistic_rows(Y32, w32, psi2.astype(f32)).sum() - approx.sum()
    assert abs(d_approx - d_exact) < 1e-3


def test_chol_draw_matches_dense_solves():
    """x = L^-T (L^-1 r + eps) for stacked factors, against numpy's dense solves."""
    from omicsbayes.models.rflvm._kernels import _chol_draw

    rng = np.random.default_rng(8)
    B = rng.standard_normal((5, 20, 7))
    P = np.swapaxes(B, 1, 2) @ B + np.eye(7)
    L = np.linalg.cholesky(P)
    r, eps = rng.standard_normal((5, 7)), rng.standard_normal((5, 7))
    u = np.linalg.solve(L, r[:, :, None]) + eps[:, :, None]
    ref = np.linalg.solve(np.swapaxes(L, 1, 2), u)[:, :, 0]
    assert np.allclose(_chol_draw(L, r, eps), ref, rtol=1e-10, atol=1e-12)
