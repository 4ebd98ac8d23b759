"""BM2PCA (paper 003): every VB factor update against an independent check on a tiny problem,
the closed-form bound against Monte Carlo, the paper's Figure-1 illustration, the Bayesian-PCA
special case, one-vs-rest, C by cross-validation, semi-supervised labels and input checks."""

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.linalg import subspace_angles
from sklearn.decomposition import PCA
from sklearn.svm import LinearSVC

from omicsbayes.inference import gig_moments, sample_invgauss
from omicsbayes.models import BM2PCAClassifier
from omicsbayes.models.bm2pca import _BinaryVB, _pca_start, _project

HYPER = dict(a_r=1e-3, b_r=1e-3, a_tau=1e-2, b_tau=1e-5, a_nu=1e-1, b_nu=1e-5, delta=1e-5)


def _spd(rng, k, scale=0.3):
    A = rng.normal(size=(k, k)) * scale
    return A @ A.T + scale * np.eye(k)


EPS = 0.3


def _random_vb(seed=0, n=6, d=4, k=2, C=2.0, regression=False):
    """A tiny VB state whose factors are set to arbitrary (non-optimal) moments; the last sample
    is unlabelled.  ``regression`` uses the epsilon-insensitive loss (eps = EPS)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) + 1.0
    if regression:
        y = 2 * rng.normal(size=n)
        y[-1] = np.nan
    else:
        y = np.array([1.0, -1.0, 1.0, -1.0, 1.0, 0.0][:n])
    eps = EPS if regression else None
    vb = _BinaryVB(X, y, k, C, HYPER, _pca_start(X, k, rng), epsilon=eps)
    vb.target, vb.eps = y, eps
    vb.Zm = rng.normal(size=(n, k))
    vb.V = rng.normal(size=(k, k)) * 0.5 + np.eye(k) * 0.5
    vb.Dz = rng.uniform(0.3, 1.5, size=(n, k))
    vb.t_mean, vb.t_var = rng.normal(size=d), 0.2
    vb.W_mean, vb.W_cov = rng.normal(size=(d, k)), _spd(rng, k)
    vb.r_shape, vb.r_rate = 2.5, rng.uniform(0.5, 2.0, size=k)
    vb.tau_shape, vb.tau_rate = 3.0, 2.0
    vb.eta_mean, vb.eta_cov = rng.normal(size=k + 1), _spd(rng, k + 1)
    vb.nu_shape, vb.nu_rate = 2.0, 1.5
    vb.lam_chi = np.where(vb.lab[:, None], rng.uniform(0.5, 3.0, size=vb.a.shape), 0.0)
    vb.lam_inv = np.zeros_like(vb.lam_chi)
    vb.lam_inv[vb.lab] = vb.lam_chi[vb.lab] ** -0.5
    vb.XtZ = X.T @ vb.Zm
    return vb


def _zcov(vb, i):
    return (vb.V * vb.Dz[i]) @ vb.V.T


def _quadratic_fit(f, dim):
    """Precision and maximiser of an exactly quadratic f by central differences (step 1)."""
    e = np.eye(dim)
    grad = np.array([(f(e[i]) - f(-e[i])) / 2 for i in range(dim)])
    hess = np.empty((dim, dim))
    for i in range(dim):
        for j in range(dim):
            hess[i, j] = (f(e[i] + e[j]) - f(e[i] - e[j]) - f(-e[i] + e[j]) + f(-e[i] - e[j])) / 4
    prec = -hess
    return prec, np.linalg.solve(prec, grad)


# ---- expected log joint of one block, written directly from the model (eq. 4 + priors) ----
def _residuals(vb, n):
    """``(a, b)`` per margin residual ``u = a - b f`` of sample n, from the loss: the hinge
    ``1 - y f``, or the epsilon-insensitive pair ``y - f - eps`` and ``f - y - eps``."""
    y = vb.target[n]
    return [(1.0, y)] if vb.eps is None else [(y - vb.eps, 1.0), (-y - vb.eps, -1.0)]


def _f_moments(eta_moments, zt_moments):
    """Mean and variance of f = eta^T z~ for independent Gaussian eta and z~."""
    m_eta, S_eta = eta_moments
    m_z, S_z = zt_moments
    var_f = m_eta @ S_z @ m_eta + m_z @ S_eta @ m_z + np.trace(S_eta @ S_z)
    return m_eta @ m_z, var_f


def _label_term(vb, n, eta_moments, zt_moments):
    """E over eta, z_n, lambda_n of log phi(y_n, lambda_n | z_n, eta), its lambda-free part being
    sum_j -C E[u_j] - C^2 E[1/lambda_j] E[u_j^2] / 2 (variance decomposition)."""
    mean_f, var_f = _f_moments(eta_moments, zt_moments)
    total = 0.0
    for j, (a, b) in enumerate(_residuals(vb, n)):
        mean_u, s = a - b * mean_f, vb.lam_inv[n, j]
        total += -vb.C * mean_u - vb.C**2 * s / 2 * (mean_u**2 + b**2 * var_f)
    return total


def _zt(vb, n, z=None):
    """Mean and covariance of z~_n = [z_n; 1] (point mass at z when given)."""
    k = vb.k
    S = np.zeros((k + 1, k + 1))
    if z is None:
        S[:k, :k] = _zcov(vb, n)
        z = vb.Zm[n]
    return np.append(z, 1.0), S


@pytest.mark.parametrize("regression", [False, True])
def test_q_z_matches_expected_log_joint(regression):
    vb = _random_vb(1, regression=regression)
    tau = vb.tau_shape / vb.tau_rate
    old_eta = (vb.eta_mean.copy(), vb.eta_cov.copy())
    vb.update_z()
    for n in (0, 1, 5):  # two labelled, one unlabelled

        def f(z, n=n):
            x = vb.X[n]
            sq = np.sum((x - vb.W_mean @ z - vb.t_mean) ** 2) + vb.d * z @ vb.W_cov @ z
            val = -z @ z / 2 - tau / 2 * sq
            if vb.lab[n]:
                val += _label_term(vb, n, old_eta, _zt(vb, n, z))
            return val

        prec, mean = _quadratic_fit(f, vb.k)
        np.testing.assert_allclose(vb.Zm[n], mean, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(_zcov(vb, n), np.linalg.inv(prec), rtol=1e-6, atol=1e-9)


def test_projection_of_new_samples_is_the_unlabelled_q_z():
    """transform = the single-step projection = q(z_new) with no label term."""
    vb = _random_vb(9)
    fit = vb.summary()
    tau = fit["tau"]
    x_new = np.random.default_rng(90).normal(size=(2, vb.d))
    mu = _project(fit, x_new)
    for i, x in enumerate(x_new):

        def f(z, x=x):
            sq = np.sum((x - vb.W_mean @ z - vb.t_mean) ** 2) + vb.d * z @ vb.W_cov @ z
            return -z @ z / 2 - tau / 2 * sq

        _, mean = _quadratic_fit(f, vb.k)
        np.testing.assert_allclose(mu[i], mean, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("regression", [False, True])
def test_q_eta_matches_expected_log_joint(regression):
    vb = _random_vb(2, regression=regression)
    nu = vb.nu_shape / vb.nu_rate
    labelled = np.flatnonzero(vb.lab)

    def f(eta):
        val = -nu / 2 * eta @ eta
        for n in labelled:
            val += _label_term(vb, n, (eta, np.zeros((vb.k + 1, vb.k + 1))), _zt(vb, n))
        return val

    prec, mean = _quadratic_fit(f, vb.k + 1)
    vb.update_eta()
    np.testing.assert_allclose(vb.eta_mean, mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(vb.eta_cov, np.linalg.inv(prec), rtol=1e-6, atol=1e-10)


def test_q_w_matches_expected_log_joint():
    vb = _random_vb(3)
    tau = vb.tau_shape / vb.tau_rate
    er = vb.r_shape / vb.r_rate
    d, k = vb.d, vb.k

    def f(w):
        W = w.reshape(d, k)
        val = -0.5 * np.sum(er * np.sum(W**2, axis=0))
        for n in range(vb.n):
            resid = vb.X[n] - W @ vb.Zm[n] - vb.t_mean
            val -= tau / 2 * (resid @ resid + np.trace(W.T @ W @ _zcov(vb, n)))
        return val

    prec, mean = _quadratic_fit(f, d * k)
    vb.update_w()
    np.testing.assert_allclose(vb.W_mean.ravel(), mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(np.kron(np.eye(d), vb.W_cov), np.linalg.inv(prec), atol=1e-9)


def test_q_w_is_exact_conditional_when_other_factors_are_point_masses():
    """Conjugate special case: with Z, t, tau, r fixed, q(W) is the exact Gaussian posterior of a
    ridge regression of each feature on Z, computed here by the normal equations."""
    vb = _random_vb(4)
    vb.Dz[:] = 1e-300  # q(Z) a point mass
    tau, er = vb.tau_shape / vb.tau_rate, vb.r_shape / vb.r_rate
    vb.update_w()
    Z = vb.Zm
    for j in range(vb.d):
        prec = np.diag(er) + tau * Z.T @ Z
        mean = np.linalg.solve(prec, tau * Z.T @ (vb.X[:, j] - vb.t_mean[j]))
        np.testing.assert_allclose(vb.W_mean[j], mean, rtol=1e-8)
        np.testing.assert_allclose(vb.W_cov, np.linalg.inv(prec), rtol=1e-8)


def test_q_t_matches_expected_log_joint():
    vb = _random_vb(5)
    tau = vb.tau_shape / vb.tau_rate

    def f(t):
        resid = vb.X - vb.Zm @ vb.W_mean.T - t
        return -HYPER["delta"] / 2 * t @ t - tau / 2 * np.sum(resid**2)

    prec, mean = _quadratic_fit(f, vb.d)
    vb.update_t()
    np.testing.assert_allclose(vb.t_mean, mean, rtol=1e-6)
    np.testing.assert_allclose(vb.t_var * np.eye(vb.d), np.linalg.inv(prec), rtol=1e-6, atol=1e-12)


def _draws(vb, rng, S):
    """Joint draws from the factorised q: W (S,d,k), Z (S,n,k), t (S,d), eta (S,k+1)."""
    d, k, n = vb.d, vb.k, vb.n
    LW = np.linalg.cholesky(vb.W_cov)
    W = vb.W_mean + rng.normal(size=(S, d, k)) @ LW.T
    LZ = vb.V[None] * np.sqrt(vb.Dz)[:, None, :]  # Sigma_n = LZ_n LZ_n^T
    Z = vb.Zm + np.einsum("nij,snj->sni", LZ, rng.normal(size=(S, n, k)))
    t = vb.t_mean + np.sqrt(vb.t_var) * rng.normal(size=(S, d))
    eta = vb.eta_mean + rng.normal(size=(S, k + 1)) @ np.linalg.cholesky(vb.eta_cov).T
    return W, Z, t, eta


def _mc_close(samples, value, n_se=5):
    se = samples.std() / np.sqrt(samples.size)
    assert abs(samples.mean() - value) < n_se * se + 1e-9 * abs(value), (samples.mean(), value, se)


def test_gamma_updates_match_monte_carlo_expectations():
    """q(tau), q(r), q(nu) rates against Monte Carlo averages of their sufficient statistics."""
    vb = _random_vb(6)
    rng = np.random.default_rng(60)
    W, Z, t, eta = _draws(vb, rng, 40000)
    resid = vb.X - np.einsum("sdk,snk->snd", W, Z) - t[:, None, :]
    vb.update_tau()
    assert vb.tau_shape == pytest.approx(HYPER["a_tau"] + vb.n * vb.d / 2)
    _mc_close(np.sum(resid**2, axis=(1, 2)), 2 * (vb.tau_rate - HYPER["b_tau"]))
    vb.update_r()
    assert vb.r_shape == pytest.approx(HYPER["a_r"] + vb.d / 2)
    for i in range(vb.k):
        _mc_close(np.sum(W[:, :, i] ** 2, axis=1), 2 * (vb.r_rate[i] - HYPER["b_r"]))
    vb.update_nu()
    assert vb.nu_shape == pytest.approx(HYPER["a_nu"] + (vb.k + 1) / 2)  # ERRATA: L = k + 1
    _mc_close(np.sum(eta**2, axis=1), 2 * (vb.nu_rate - HYPER["b_nu"]))


def test_gig_moments_match_scipy_geninvgauss():
    for chi in (1e-4, 0.3, 4.0, 250.0):
        mean, mean_inv, _ = gig_moments(1.0, chi, 0.5)
        dist = stats.geninvgauss(0.5, np.sqrt(chi), scale=np.sqrt(chi))
        assert mean == pytest.approx(dist.mean(), rel=1e-6)
        assert mean_inv == pytest.approx(dist.expect(lambda x: 1 / x), rel=1e-5)
        assert mean_inv == pytest.approx(chi**-0.5, rel=1e-10)  # ERRATA 003


def test_augmentation_integrates_to_hinge_pseudo_likelihood():
    """ERRATA 003: int (2 pi lam)^-1/2 exp(-(lam + C u)^2 / (2 lam)) dlam = exp(-2 C max(0, u))."""
    C = 1.5
    for u in (-0.7, 0.2, 1.3):

        def dens(lam, u=u):
            return np.exp(-((lam + C * u) ** 2) / (2 * lam)) / np.sqrt(2 * np.pi * lam)

        val = integrate.quad(dens, 0, np.inf, limit=200)[0]
        assert val == pytest.approx(np.exp(-2 * C * max(0.0, u)), rel=1e-6)


@pytest.mark.parametrize("regression", [False, True])
def test_q_lambda_matches_numerical_integration(regression):
    """q(lambda_n) proportional to exp(E[log phi]) normalised by quadrature; E[u^2] by the
    variance decomposition (independent of the code's second-moment contraction)."""
    vb = _random_vb(7, regression=regression)
    vb.update_lambda()
    for n in np.flatnonzero(vb.lab):
        mean_f, var_f = _f_moments((vb.eta_mean, vb.eta_cov), _zt(vb, n))
        for j, (a, b) in enumerate(_residuals(vb, n)):
            eu2 = (a - b * mean_f) ** 2 + var_f
            assert vb.lam_chi[n, j] == pytest.approx(vb.C**2 * eu2, rel=1e-10)

            def log_q(lam, eu2=eu2):
                return -0.5 * np.log(lam) - lam / 2 - vb.C**2 * eu2 / (2 * lam)

            norm = integrate.quad(lambda lam: np.exp(log_q(lam)), 0, np.inf, limit=200)[0]
            inv = integrate.quad(lambda lam: np.exp(log_q(lam)) / lam, 0, np.inf, limit=200)[0]
            assert vb.lam_inv[n, j] == pytest.approx(inv / norm, rel=1e-6)


@pytest.mark.parametrize("regression", [False, True])
def test_lower_bound_matches_monte_carlo(regression):
    """Closed-form bound vs E_q[log p~(X, y, lambda, all) - log q] by Monte Carlo (log densities
    from scipy.stats)."""
    vb = _random_vb(8, n=5, d=3, k=2, regression=regression)
    vb.update_lambda()  # q(lambda) from its chi; everything else arbitrary
    rng = np.random.default_rng(80)
    S = 40000
    W, Z, t, eta = _draws(vb, rng, S)
    tau = rng.gamma(vb.tau_shape, 1 / vb.tau_rate, size=S)
    r = rng.gamma(vb.r_shape, 1 / vb.r_rate, size=(S, vb.k))
    nu = rng.gamma(vb.nu_shape, 1 / vb.nu_rate, size=S)
    lab = np.flatnonzero(vb.lab)
    # 1/lambda ~ IG(chi^-1/2, 1) when lambda ~ GIG(1, chi, 1/2)
    chi = vb.lam_chi[lab]  # (L, J)
    lam = 1 / sample_invgauss(np.broadcast_to(chi**-0.5, (S, *chi.shape)), 1.0, rng)
    norm = stats.norm
    h, k = HYPER, vb.k
    logp = norm.logpdf(t, 0, h["delta"] ** -0.5).sum(1)
    logp += norm.logpdf(W, 0, r[:, None, :] ** -0.5).sum((1, 2))
    logp += stats.gamma.logpdf(r, h["a_r"], scale=1 / h["b_r"]).sum(1)
    logp += stats.gamma.logpdf(tau, h["a_tau"], scale=1 / h["b_tau"])
    logp += norm.logpdf(Z).sum((1, 2))
    mean_x = np.einsum("sdk,snk->snd", W, Z) + t[:, None, :]
    logp += norm.logpdf(vb.X, mean_x, tau[:, None, None] ** -0.5).sum((1, 2))
    logp += norm.logpdf(eta, 0, nu[:, None] ** -0.5).sum(1)
    logp += stats.gamma.logpdf(nu, h["a_nu"], scale=1 / h["b_nu"])
    f = np.einsum("snk,sk->sn", Z[:, lab], eta[:, :k]) + eta[:, k : k + 1]
    ab = np.array([_residuals(vb, n) for n in lab])  # (L, J, 2)
    u = ab[None, :, :, 0] - ab[None, :, :, 1] * f[:, :, None]
    log_phi = -0.5 * np.log(2 * np.pi * lam) - (lam + vb.C * u) ** 2 / (2 * lam)
    logp += log_phi.sum((1, 2))
    logq = stats.multivariate_normal(np.zeros(k), vb.W_cov).logpdf(W - vb.W_mean).sum(1)
    for n in range(vb.n):
        logq += stats.multivariate_normal(vb.Zm[n], _zcov(vb, n)).logpdf(Z[:, n])
    logq += norm.logpdf(t, vb.t_mean, np.sqrt(vb.t_var)).sum(1)
    logq += stats.multivariate_normal(vb.eta_mean, vb.eta_cov).logpdf(eta)
    logq += stats.gamma.logpdf(tau, vb.tau_shape, scale=1 / vb.tau_rate)
    logq += stats.gamma.logpdf(r, vb.r_shape, scale=1 / vb.r_rate).sum(1)
    logq += stats.gamma.logpdf(nu, vb.nu_shape, scale=1 / vb.nu_rate)
    root = np.sqrt(chi)
    logq += stats.geninvgauss.logpdf(lam, 0.5, root, scale=root).sum((1, 2))
    vb.XtZ = vb.X.T @ vb.Zm
    _mc_close(logp - logq, vb.lower_bound())


# ---- fitted model -----------------------------------------------------------------------------
def _figure1(n, rng, noise_sd=3.0):
    """Two Gaussian clusters in 2-D plus 3 noise dimensions with larger variance (Figure 1)."""
    y = np.repeat([0, 1], n // 2)
    centre = np.where(y[:, None] == 1, 1.5, -1.5)
    X2 = centre + 0.5 * rng.normal(size=(n, 2))
    return np.hstack([X2, noise_sd * rng.normal(size=(n, 3))]), y


@pytest.mark.slow
def test_figure1_supervised_subspace_beats_pca():
    gaps = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X, y = _figure1(100, rng)
        X_test, y_test = _figure1(400, rng)
        model = BM2PCAClassifier(n_components=2, random_state=0).fit(X[::2], y[::2])
        assert np.all(np.diff(model.lower_bound_) > -1e-8 * np.abs(model.lower_bound_[1:]))
        acc_bm = np.mean(model.predict(X_test) == y_test)
        pca = PCA(2).fit(X)  # PCA learns its projection from all 100 points, as in the paper
        svm = LinearSVC().fit(pca.transform(X[::2]), y[::2])
        acc_pca = np.mean(svm.predict(pca.transform(X_test)) == y_test)
        gaps.append(acc_bm - acc_pca)
        assert acc_bm > 0.75
    assert np.mean(gaps) > 0.2


def test_without_labels_is_bayesian_pca():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 10)) * np.array([[3.0], [2.0], [1.5]])
    X = rng.normal(size=(100, 3)) @ A + 0.05 * rng.normal(size=(100, 10)) + 5
    model = BM2PCAClassifier(n_components=5).fit(X, np.full(100, np.nan))
    assert np.all(np.diff(model.lower_bound_) > -1e-8 * np.abs(model.lower_bound_[1:]))
    norms = np.sort(np.linalg.norm(model.loadings_, axis=0))[::-1]
    assert norms[3] < 0.05 * norms[2]  # ARD switches the two surplus components off
    top = model.loadings_[:, np.argsort(np.linalg.norm(model.loadings_, axis=0))[-3:]]
    angles = subspace_angles(top, PCA(3).fit(X).components_.T)
    assert np.max(angles) < 1e-3
    assert model.transform(X).shape == (100, 5)
    with pytest.raises(ValueError, match="without labels"):
        model.predict(X)


def _blobs(rng, n_per, n_classes, d=30, sep=3.0):
    centres = rng.normal(size=(n_classes, d)) * sep / np.sqrt(d)
    y = np.repeat(np.arange(n_classes), n_per)
    return centres[y] + 0.3 * rng.normal(size=(len(y), d)), y


def test_fixed_seed_identical_and_few_shot_padding():
    rng = np.random.default_rng(3)
    X, y = _blobs(rng, 3, 2)  # 6 samples: rank 5 < k, so the random start matters
    fits = [BM2PCAClassifier(n_components=8, random_state=7).fit(X, y) for _ in range(2)]
    np.testing.assert_array_equal(fits[0].lower_bound_, fits[1].lower_bound_)
    np.testing.assert_array_equal(fits[0].decision_function(X), fits[1].decision_function(X))


@pytest.mark.slow
def test_multiclass_one_vs_rest_with_string_labels_and_cv():
    rng = np.random.default_rng(4)
    X, y = _blobs(rng, 12, 3)
    names = np.array(["a", "b", "c"])[y]
    test = np.arange(len(y)) % 3 == 0
    model = BM2PCAClassifier(n_components=3, C="cv", max_iter=60, random_state=0)
    model.fit(X[~test], names[~test])
    assert model.C_ in (10.0, 20.0, 30.0, 40.0)
    assert set(model.cv_results_) == {10, 20, 30, 40}
    dec = model.decision_function(X[test])
    assert dec.shape == (test.sum(), 3)
    np.testing.assert_array_equal(model.predict(X[test]), model.classes_[np.argmax(dec, 1)])
    assert np.mean(model.predict(X[test]) == names[test]) > 0.8
    assert model.transform(X[test]).shape == (test.sum(), 9)
    assert model.loadings_.shape == (X.shape[1], 9)
    assert model.n_iter_.shape == (3,)
    for bound in model.lower_bound_:  # one history per one-vs-rest problem
        assert np.all(np.diff(bound) > -1e-8 * np.abs(bound[1:]))


def test_binary_decision_sign_and_semi_supervised_rows():
    rng = np.random.default_rng(5)
    X, y = _blobs(rng, 15, 2)
    labels = np.array(["neg", "pos"], dtype=object)[y]
    partial = labels.copy()
    partial[::3] = None  # a third unlabelled: PCA part only
    model = BM2PCAClassifier(n_components=2, random_state=0).fit(X, partial)
    np.testing.assert_array_equal(model.classes_, ["neg", "pos"])
    bound = model.lower_bound_
    assert np.all(np.diff(bound) > -1e-8 * np.abs(bound[1:]))
    dec = model.decision_function(X)
    assert dec.shape == (len(X),)
    np.testing.assert_array_equal(model.predict(X), np.where(dec > 0, "pos", "neg"))
    assert np.mean(model.predict(X[::3]) == labels[::3]) > 0.9  # the unlabelled rows
    only_labelled = BM2PCAClassifier(n_components=2, random_state=0)
    only_labelled.fit(X[partial != None], partial[partial != None])  # noqa: E711
    assert not np.allclose(only_labelled.loadings_, model.loadings_)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_components": 0}, "n_components"),
        ({"C": -1.0}, "'C' parameter"),
        ({"C": "grid"}, "'C' parameter"),
        ({"a_tau": 0.0}, "a_tau"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1.0}, "tol"),
    ],
)
def test_bad_hyperparameters(params, match):
    X, y = _blobs(np.random.default_rng(0), 5, 2)
    with pytest.raises(ValueError, match=match):
        BM2PCAClassifier(**params).fit(X, y)


def test_bad_input():
    X, y = _blobs(np.random.default_rng(0), 5, 2)
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="1 NaN"):
        BM2PCAClassifier(n_components=2).fit(X_nan, y)
    with pytest.raises(ValueError, match="one class"):
        BM2PCAClassifier(n_components=2).fit(X, np.zeros(len(y)))
    model = BM2PCAClassifier(n_components=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :5])


def test_figures_from_saved_tables(tmp_path):
    """Figure 1 from saved 2-D scores and Figures 2-3 from a per-split accuracy table."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from omicsbayes.pl.bm2pca import accuracy_curves, projection_figure

    rng = np.random.default_rng(11)
    X, y = _figure1(40, rng)
    model = BM2PCAClassifier(n_components=2, max_iter=30, random_state=0).fit(X[::2], y[::2])
    split = np.where(np.arange(40) % 2 == 0, "train", "test")
    tables = [
        pd.DataFrame({"method": m, "z1": Z[:, 0], "z2": Z[:, 1], "label": y, "split": split})
        for m, Z in (("BM2PCA", model.transform(X)), ("PCA", PCA(2).fit_transform(X)))
    ]
    fig = projection_figure(pd.concat(tables), eta=model.fits_[0]["eta_mean"])
    assert len(fig.axes) == 2
    fig.savefig(tmp_path / "figure1.png")
    results = pd.DataFrame(
        {
            "model": np.repeat(["BM2PCA", "FullSVM"], 12),
            "n_per_class": np.tile(np.repeat([2, 3, 5], 4), 2),
            "n_components": 10,
            "C": 10,
            "cohort": "demo",
            "accuracy": rng.uniform(0.5, 1.0, 24),
        }
    )
    fig = accuracy_curves(results, "n_per_class", hue=["model", "n_components"], panel="cohort")
    assert len(fig.axes[0].lines) >= 2
    fig.savefig(tmp_path / "figure2.png")


def test_regressor_recovers_a_planted_latent_predictor():
    """Epsilon-insensitive BM2PCA: y = beta^T z + noise with X = Z A + noise."""
    from omicsbayes.models.bm2pca import BM2PCARegressor

    rng = np.random.default_rng(12)
    n, d = 120, 30
    Z = rng.normal(size=(n, 3))
    X = Z @ rng.normal(size=(3, d)) + 0.3 * rng.normal(size=(n, d))
    y = Z @ np.array([1.5, -1.0, 0.5]) + 0.1 * rng.normal(size=n)
    train = np.arange(n) < 80
    y_semi = np.where(np.arange(n) < 60, y, np.nan)[train]  # a quarter unlabelled
    model = BM2PCARegressor(n_components=3, epsilon=0.05, random_state=0)
    model.fit(X[train], y_semi)
    assert np.all(np.diff(model.lower_bound_) > -1e-8 * np.abs(model.lower_bound_[1:]))
    resid = y[~train] - model.predict(X[~train])
    assert 1 - resid.var() / y[~train].var() > 0.9
    assert model.transform(X[~train]).shape == (40, 3)
    with pytest.raises(ValueError, match="epsilon"):
        BM2PCARegressor(epsilon=-1.0).fit(X, y)


def test_loadings_and_scores_follow_the_shared_vocabulary():
    """loadings_ is features x factors (E[W]), scores_ the training samples' E[z_n]; without
    labels q(z_n) is the variational projection, so scores_ equals transform of the training
    data at convergence. Several classes: one block of k columns per one-vs-rest problem."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 8))
    model = BM2PCAClassifier(n_components=2, tol=1e-12, max_iter=2000).fit(X)
    assert model.loadings_.shape == (8, 2) and model.scores_.shape == (40, 2)
    np.testing.assert_allclose(model.scores_, model.transform(X), atol=1e-8)
    model = BM2PCAClassifier(n_components=2, max_iter=20).fit(X, np.arange(40) % 3)
    assert model.loadings_.shape == (8, 6) and model.scores_.shape == (40, 6)
    np.testing.assert_array_equal(model.loadings_[:, 2:4], model.fits_[1]["W_mean"])


def test_default_components_are_an_upper_bound_that_ard_prunes_on_real_digits():
    """The default n_components=20 (benchmarks.fidelity --review-defaults) on scikit-learn's digits,
    3 training images per class: ARD switches off part of the 20 components in every
    one-vs-rest problem (11-12 of 20 stay on in the measured splits) instead of using them all."""
    from omicsbayes.io import load_demo

    digits = load_demo("digits")
    labels = digits.obs["digit"].astype(str).to_numpy()
    rng = np.random.default_rng(0)
    train = np.concatenate([rng.choice(np.flatnonzero(labels == c), 3, replace=False)
                            for c in np.unique(labels)])  # fmt: skip
    X = np.asarray(digits.X, dtype=float)[train]
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # paper 003's unit-length samples
    model = BM2PCAClassifier(random_state=0).fit(X, labels[train])
    assert model.n_components_ == 20 and len(model.fits_) == 10
    for fit in model.fits_:
        norms = np.sum(fit["W_mean"] ** 2, axis=0)
        assert 5 <= np.sum(norms >= 0.01 * norms.max()) < 20
    narrow = BM2PCAClassifier(max_iter=20, random_state=0).fit(X[:, :5], labels[train])
    assert narrow.n_components_ == 5 and narrow.fits_[0]["W_mean"].shape == (5, 5)
