"""Tests of paper 001: BPROBIT and BAM (pairwise, listwise) variational Bayes."""

import numpy as np
import pytest
from scipy import optimize, special, stats
from sklearn.metrics import roc_auc_score

from omicsbayes.models import BAMClassifier, BayesianProbitClassifier
from omicsbayes.models.bam import (
    _GaussianWeights,
    _optimal_log_var,
    _optimal_mean,
    f_derivatives,
    f_objective,
    optimal_log_zeta,
    softmax_bound,
    softmax_coefficients,
    weights_bound,
)

RANKINGS = ["pairwise", "listwise"]


# ---------------------------------------------------------------------------------------------
# L_q(f) written from its definition, with explicit loops over the ranking variables
# ---------------------------------------------------------------------------------------------
def brute_bound(ranking, mu, var, zeta, m, v, pos, neg):
    """sum_n E[log N(f_n; m_n, 1)] + H[q(f_n)] + sum of softmax bounds (sections 3.2, 3.3)."""
    total = 0.0
    for n in range(len(mu)):
        e_f2 = mu[n] ** 2 + var[n]
        total += -0.5 * np.log(2 * np.pi) - 0.5 * (e_f2 - 2 * mu[n] * m[n] + m[n] ** 2 + v[n])
        total += 0.5 * np.log(2 * np.pi * np.e * var[n])
    ee = np.exp(mu + var / 2)
    if ranking == "pairwise":
        for i, n in enumerate(pos):
            for j, o in enumerate(neg):
                z = zeta[i, j]
                total += mu[n] - ((ee[n] + ee[o]) / z - 1 + np.log(z))
    else:
        for i, n in enumerate(pos):
            members = [n, *neg]
            total += mu[n] - (sum(ee[o] for o in members) / zeta[i] - 1 + np.log(zeta[i]))
    return total


def random_problem(rng, n_pos=3, n_neg=4):
    n = n_pos + n_neg
    perm = rng.permutation(n)
    pos, neg = np.sort(perm[:n_pos]), np.sort(perm[n_pos:])
    mu = rng.normal(size=n)
    var = rng.uniform(0.2, 1.5, size=n)
    m = rng.normal(size=n)
    v = rng.uniform(0.0, 0.5, size=n)
    return pos, neg, mu, var, m, v


@pytest.mark.parametrize("ranking", RANKINGS)
def test_objective_and_softmax_bound_match_definition(ranking):
    rng = np.random.default_rng(1)
    pos, neg, mu, var, m, v = random_problem(rng)
    log_zeta = optimal_log_zeta(ranking, mu, var, pos, neg) + rng.normal(
        scale=0.3, size=(len(pos), len(neg)) if ranking == "pairwise" else len(pos)
    )
    zeta = np.exp(log_zeta)
    c, log_r = softmax_coefficients(ranking, log_zeta, pos, neg, len(mu))
    const = np.sum(1.0 - log_zeta)
    brute = brute_bound(ranking, mu, var, zeta, m, v, pos, neg)
    assert f_objective(mu, var, m, v, c, log_r) + const == pytest.approx(brute, rel=1e-12)
    gauss = brute_bound(ranking, mu, var, zeta, m, v, pos[:0], neg[:0])
    assert softmax_bound(ranking, mu, var, log_zeta, pos, neg) == pytest.approx(
        brute - gauss, rel=1e-12
    )


@pytest.mark.parametrize("ranking", RANKINGS)
@pytest.mark.parametrize("seed", [2, 3])
def test_derivatives_match_finite_differences(ranking, seed):
    """First and second derivatives in mu, Sigma and log Sigma, and a diagonal Hessian."""
    rng = np.random.default_rng(seed)
    pos, neg, mu, var, m, v = random_problem(rng, n_pos=2 + seed % 2, n_neg=4)
    log_zeta = optimal_log_zeta(ranking, mu, var, pos, neg)
    zeta = np.exp(log_zeta + 0.2)
    c, log_r = softmax_coefficients(ranking, np.log(zeta), pos, neg, len(mu))
    d = f_derivatives(mu, var, m, c, log_r)
    h = 1e-5

    def value(mu_, var_):
        return brute_bound(ranking, mu_, var_, zeta, m, v, pos, neg)

    def grad_mu(mu_):
        return f_derivatives(mu_, var, m, c, log_r)["mu"]

    for k in range(len(mu)):
        e = np.zeros(len(mu))
        e[k] = h
        fd_mu = (value(mu + e, var) - value(mu - e, var)) / (2 * h)
        fd_mu2 = (value(mu + e, var) - 2 * value(mu, var) + value(mu - e, var)) / h**2
        fd_var = (value(mu, var + e) - value(mu, var - e)) / (2 * h)
        fd_var2 = (value(mu, var + e) - 2 * value(mu, var) + value(mu, var - e)) / h**2
        log_up, log_dn = var * np.exp(e), var * np.exp(-e)
        fd_log = (value(mu, log_up) - value(mu, log_dn)) / (2 * h)
        fd_log2 = (value(mu, log_up) - 2 * value(mu, var) + value(mu, log_dn)) / h**2
        assert d["mu"][k] == pytest.approx(fd_mu, rel=1e-6, abs=1e-7)
        assert d["mu2"][k] == pytest.approx(fd_mu2, rel=1e-3, abs=1e-4)
        assert d["var"][k] == pytest.approx(fd_var, rel=1e-6, abs=1e-7)
        assert d["var2"][k] == pytest.approx(fd_var2, rel=1e-3, abs=1e-4)
        assert d["log_var"][k] == pytest.approx(fd_log, rel=1e-6, abs=1e-7)
        assert d["log_var2"][k] == pytest.approx(fd_log2, rel=1e-3, abs=1e-4)
        # the Hessian in mu is diagonal: the gradient elsewhere does not move
        column = (grad_mu(mu + e) - grad_mu(mu - e)) / (2 * h)
        assert np.allclose(np.delete(column, k), 0.0, atol=1e-8)


@pytest.mark.parametrize("ranking", RANKINGS)
def test_zeta_star_maximises_the_bound(ranking):
    rng = np.random.default_rng(4)
    pos, neg, mu, var, m, v = random_problem(rng)
    log_zeta = optimal_log_zeta(ranking, mu, var, pos, neg)
    best = softmax_bound(ranking, mu, var, log_zeta, pos, neg)
    h = 1e-6
    for k in range(log_zeta.size):
        e = np.zeros(log_zeta.size)
        e[k] = h
        e = e.reshape(log_zeta.shape)
        # d/dzeta = 0 at zeta*, written through zeta = exp(log zeta)
        up = softmax_bound(ranking, mu, var, np.log(np.exp(log_zeta) + e), pos, neg)
        down = softmax_bound(ranking, mu, var, np.log(np.exp(log_zeta) - e), pos, neg)
        assert (up - down) / (2 * h) == pytest.approx(0.0, abs=1e-6)
    for _ in range(20):
        perturbed = log_zeta + rng.normal(scale=0.1, size=log_zeta.shape)
        assert softmax_bound(ranking, mu, var, perturbed, pos, neg) < best


@pytest.mark.parametrize("ranking", RANKINGS)
def test_mean_and_log_variance_steps_are_stationary(ranking):
    rng = np.random.default_rng(5)
    pos, neg, mu, var, m, v = random_problem(rng, n_pos=5, n_neg=9)
    m = m * 5  # include large predictive means
    log_zeta = optimal_log_zeta(ranking, mu, var, pos, neg)
    c, log_r = softmax_coefficients(ranking, log_zeta, pos, neg, len(mu))
    new_mu = _optimal_mean(var, m, c, log_r)
    assert np.allclose(f_derivatives(new_mu, var, m, c, log_r)["mu"], 0.0, atol=1e-9)
    best = f_objective(new_mu, var, m, v, c, log_r)
    for step in (-1e-3, 1e-3):
        assert f_objective(new_mu + step, var, m, v, c, log_r) < best
    new_var = np.exp(_optimal_log_var(new_mu, log_r))
    assert np.allclose(f_derivatives(new_mu, new_var, m, c, log_r)["log_var"], 0.0, atol=1e-10)
    best = f_objective(new_mu, new_var, m, v, c, log_r)
    for step in (-1e-3, 1e-3):
        assert f_objective(new_mu, new_var * np.exp(step), m, v, c, log_r) < best


def test_truncated_normal_q_f_matches_scipy():
    rng = np.random.default_rng(6)
    model = BayesianProbitClassifier(nu=1.0)
    m = rng.normal(scale=3.0, size=40)
    t = np.where(rng.random(40) < 0.5, 1.0, -1.0)
    state = model._update_f({}, m, t, 1)
    lower = np.where(t > 0, 1.0, -np.inf)
    upper = np.where(t > 0, np.inf, -1.0)
    ref = stats.truncnorm(lower - m, upper - m, loc=m, scale=1.0)
    assert np.allclose(state["e_f"], ref.mean(), rtol=1e-8, atol=1e-10)
    assert np.allclose(state["var_f"], ref.var(), rtol=1e-6, atol=1e-10)
    log_mass = np.where(t > 0, stats.norm.logsf(1.0 - m), stats.norm.logcdf(-1.0 - m))
    assert np.allclose(state["log_z"], log_mass, rtol=1e-10)


@pytest.mark.parametrize("dual", [False, True])
def test_weights_update_matches_equations_6_7(dual):
    """q(b, w) against the printed block matrix of eq. (6) with X as D x N, and eq. (7)."""
    rng = np.random.default_rng(7)
    N, D = 9, 5 if not dual else 14
    X = rng.normal(size=(D, N))  # the paper's layout
    e_gamma, e_eta = 0.7, rng.uniform(0.5, 2.0, size=D)
    e_f = rng.normal(size=N)
    ones = np.ones(N)
    precision = np.block(
        [
            [np.array([[e_gamma + N]]), (ones @ X.T)[None, :]],
            [(X @ ones)[:, None], np.diag(e_eta) + X @ X.T],
        ]
    )
    cov = np.linalg.inv(precision)
    mean = cov @ np.concatenate([[ones @ e_f], X @ e_f])
    Z = np.hstack([ones[:, None], X.T])
    weights = _GaussianWeights(Z, dual=dual)
    got_mean, e_bw2, logdet, m, v = weights.update(np.concatenate([[e_gamma], e_eta]), e_f)
    assert np.allclose(got_mean, mean)
    assert np.allclose(e_bw2, mean**2 + np.diag(cov))
    assert logdet == pytest.approx(np.linalg.slogdet(cov)[1])
    assert np.allclose(m, Z @ mean)
    assert np.allclose(v, np.einsum("ij,jk,ik->i", Z, cov, Z))
    Z_new = np.hstack([np.ones((3, 1)), rng.normal(size=(3, D))])
    assert np.allclose(
        weights.predictive_variance(Z_new), np.einsum("ij,jk,ik->i", Z_new, cov, Z_new)
    )


def test_gamma_and_eta_updates_maximise_the_bound():
    """Equations (4)-(5) (shape-scale) are the maximisers of the bound in q(gamma), q(eta)."""
    rng = np.random.default_rng(8)
    prior = (1.5, 0.8, 1.0, 2.0)
    e_bw2 = rng.uniform(0.1, 3.0, size=4)
    a_gamma, s_gamma = prior[0] + 0.5, 1 / (1 / prior[1] + 0.5 * e_bw2[0])
    a_eta, s_eta = prior[2] + 0.5, 1 / (1 / prior[3] + 0.5 * e_bw2[1:])
    best = weights_bound(prior, (a_gamma, s_gamma, a_eta, s_eta), e_bw2, 0.0)
    for da, ds in [(0.05, 0), (-0.05, 0), (0, 0.05), (0, -0.05), (0.05, 0.05)]:
        post = (a_gamma + da, s_gamma * np.exp(ds), a_eta, s_eta)
        assert weights_bound(prior, post, e_bw2, 0.0) < best
        post = (a_gamma, s_gamma, a_eta + da, s_eta * np.exp(ds))
        assert weights_bound(prior, post, e_bw2, 0.0) < best


def _elbo_monte_carlo(model, X, n_draws, rng, q_f_logpdf_and_draw):
    """E_q[log p(gamma, eta, b, w, f) - log q(...)] by sampling from q (labels excluded)."""
    D = X.shape[1]
    g = stats.gamma(model.gamma_shape_, scale=model.gamma_scale_)
    e = stats.gamma(model.eta_shape_, scale=model.eta_scale_)
    mean = np.concatenate([[model.intercept_], model.coef_])
    qbw = stats.multivariate_normal(mean, model._weights.cov)
    gamma, eta = g.rvs(size=n_draws, random_state=rng), e.rvs(size=(n_draws, D), random_state=rng)
    bw = qbw.rvs(size=n_draws, random_state=rng)
    f, log_qf = q_f_logpdf_and_draw(n_draws)
    log_p = (
        stats.gamma.logpdf(gamma, model.alpha_gamma, scale=model.beta_gamma)
        + stats.norm.logpdf(bw[:, 0], scale=1 / np.sqrt(gamma))
        + stats.gamma.logpdf(eta, model.alpha_eta, scale=model.beta_eta).sum(1)
        + stats.norm.logpdf(bw[:, 1:], scale=1 / np.sqrt(eta)).sum(1)
        + stats.norm.logpdf(f, loc=bw[:, :1] + bw[:, 1:] @ X.T).sum(1)
    )
    log_q = g.logpdf(gamma) + e.logpdf(eta).sum(1) + qbw.logpdf(bw) + log_qf
    diff = log_p - log_q
    return diff.mean(), diff.std() / np.sqrt(n_draws), f


def _small_problem(seed, n=24, d=3, frac=0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > np.quantile(X[:, 0], 1 - frac)).astype(int)
    return X, y


def test_bprobit_lower_bound_matches_monte_carlo():
    X, y = _small_problem(9)
    model = BayesianProbitClassifier(max_iter=30, random_state=0).fit(X, y)
    rng = np.random.default_rng(10)
    t = np.where(y == 1, 1.0, -1.0)
    loc = model.decision_function(X)  # q(f) was last updated with these predictive means
    lower = np.where(t > 0, 1.0, -np.inf) - loc
    upper = np.where(t > 0, np.inf, -1.0) - loc
    qf = stats.truncnorm(lower, upper, loc=loc)

    def draw(n_draws):
        f = qf.rvs(size=(n_draws, len(y)), random_state=rng)
        return f, qf.logpdf(f).sum(1)

    mc, se, _ = _elbo_monte_carlo(model, X, 40000, rng, draw)
    assert model.lower_bound_[-1] == pytest.approx(mc, abs=5 * se + 1e-3)


@pytest.mark.parametrize("ranking", RANKINGS)
def test_bam_lower_bound_matches_monte_carlo(ranking):
    X, y = _small_problem(11)
    model = BAMClassifier(ranking=ranking, max_iter=30, random_state=0).fit(X, y)
    rng = np.random.default_rng(12)
    qf = stats.norm(model.f_mean_, np.sqrt(model.f_var_))

    def draw(n_draws):
        f = qf.rvs(size=(n_draws, len(y)), random_state=rng)
        return f, qf.logpdf(f).sum(1)

    mc, se, f = _elbo_monte_carlo(model, X, 40000, rng, draw)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    mu, var = model.f_mean_, model.f_var_
    soft = softmax_bound(ranking, mu, var, optimal_log_zeta(ranking, mu, var, pos, neg), pos, neg)
    assert model.lower_bound_[-1] == pytest.approx(mc + soft, abs=5 * se + 1e-3)
    # the local bound lies below the exact E_q[log softmax] (Monte Carlo)
    fp, fn = f[:, pos], f[:, neg]
    if ranking == "pairwise":
        exact = -np.logaddexp(0.0, fn[:, None, :] - fp[:, :, None]).sum((1, 2)).mean()
    else:
        lse_neg = np.logaddexp.reduce(fn, axis=1)
        exact = (fp - np.logaddexp(fp, lse_neg[:, None])).sum(1).mean()
    assert soft <= exact


def _concave_objective(ranking, Z, y, var, precision):
    """Minus the lower bound in the means of q(f) and q(b, w), the variances of q(f) and
    q(b, w) and the precisions held fixed (zeta at its optimum), and its gradient, written from
    sections 3.2-3.3 with scipy's logsumexp:

    -|mu - Z beta|^2 / 2 - beta^T diag(precision) beta / 2 + sum over the ranking variables of
    mu_n - log sum_{o in the variable's set} exp(mu_o + var_o / 2).

    A quadratic plus minus log-sum-exp terms of affine functions: strictly concave."""
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    n = len(y)

    def fun(x):
        mu, beta = x[:n], x[n:]
        resid = mu - Z @ beta
        log_e = mu + 0.5 * var
        grad_mu = -resid
        if ranking == "pairwise":
            log_zeta = np.logaddexp(log_e[pos][:, None], log_e[neg][None, :])
            soft = len(neg) * mu[pos].sum() - log_zeta.sum()
            grad_mu[pos] += len(neg) - np.exp(log_e[pos][:, None] - log_zeta).sum(axis=1)
            grad_mu[neg] -= np.exp(log_e[neg][None, :] - log_zeta).sum(axis=0)
        else:
            log_zeta = np.logaddexp(log_e[pos], special.logsumexp(log_e[neg]))
            soft = mu[pos].sum() - log_zeta.sum()
            grad_mu[pos] += 1.0 - np.exp(log_e[pos] - log_zeta)
            grad_mu[neg] -= np.exp(log_e[neg] + special.logsumexp(-log_zeta))
        value = -0.5 * resid @ resid - 0.5 * precision @ beta**2 + soft
        return -value, -np.concatenate([grad_mu, Z.T @ resid - precision * beta])

    return fun


@pytest.mark.parametrize("ranking", RANKINGS)
def test_converged_fit_is_the_optimum_of_the_concave_objective(ranking):
    """The whole fit loop (zeta, the mean and variance steps, q(b, w), the class orientation)
    against an independent optimiser: at convergence E[f] and E[(b, w)] maximise the lower
    bound for the fit's own variances and precisions, a strictly concave problem that L-BFGS
    solves from zero."""
    rng = np.random.default_rng(5)
    n, d = 30, 4
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + rng.normal(size=n) > 1.0).astype(int)  # 11 of 30 positive
    model = BAMClassifier(ranking=ranking, tol=1e-14, max_iter=20000, random_state=0)
    model.set_params(verbose=False).fit(X, y)
    Z = np.hstack([np.ones((n, 1)), X])
    precision = np.r_[model.gamma_shape_ * model.gamma_scale_, model.eta_shape_ * model.eta_scale_]
    fun = _concave_objective(ranking, Z, y, model.f_var_, precision)
    point = rng.normal(size=n + d + 1)
    grad_error = optimize.check_grad(lambda x: fun(x)[0], lambda x: fun(x)[1], point)
    assert grad_error < 1e-4 * np.linalg.norm(fun(point)[1])
    best = optimize.minimize(
        fun, np.zeros(n + d + 1), jac=True, method="L-BFGS-B",
        options={"maxiter": 10000, "gtol": 1e-12, "ftol": 1e-15},
    )  # fmt: skip
    assert np.allclose(best.x[:n], model.f_mean_, atol=1e-4)
    assert np.allclose(best.x[n:], np.r_[model.intercept_, model.coef_], atol=1e-4)
    assert np.abs(model.coef_).max() > 0.3  # not the trivial optimum


@pytest.mark.parametrize(
    "model",
    [
        BayesianProbitClassifier(random_state=0),
        BAMClassifier(ranking="pairwise", random_state=0),
        BAMClassifier(ranking="listwise", random_state=0),
    ],
    ids=["bprobit", "bam_p", "bam_l"],
)
@pytest.mark.parametrize("frac", [0.25, 0.75])
def test_lower_bound_never_decreases_and_seed_reproduces(model, frac):
    X, y = _small_problem(13, n=50, d=60, frac=frac)  # d > n: the dual q(b, w)
    model.set_params(max_iter=60)
    first = model.fit(X, y)
    lb = first.lower_bound_
    assert len(lb) == first.n_iter_ and np.all(np.isfinite(lb))
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
    score = first.decision_function(X)
    again = type(model)(**model.get_params()).fit(X, y)
    assert np.array_equal(again.lower_bound_, lb)
    assert np.array_equal(again.decision_function(X), score)
    assert roc_auc_score(y, score) > 0.8


def test_listwise_symmetry_swapping_classes_negates_scores():
    X, y = _small_problem(14, n=40, d=5, frac=0.3)
    a = BAMClassifier(random_state=3).fit(X, y)
    b = BAMClassifier(random_state=3).fit(X, 1 - y)
    assert np.allclose(a.decision_function(X), -b.decision_function(X))
    assert np.allclose(a.lower_bound_, b.lower_bound_)


def test_labels_probabilities_and_errors():
    X, y = _small_problem(15, n=40, d=4)
    labels = np.where(y == 1, "MSI-H", "MSS")
    model = BayesianProbitClassifier(random_state=0).fit(X, labels)
    assert list(model.classes_) == ["MSI-H", "MSS"]
    proba = model.predict_proba(X)
    assert proba.shape == (40, 2) and np.allclose(proba.sum(1), 1.0)
    assert np.all((proba >= 0) & (proba <= 1))
    # positive = classes_[1] = "MSS" = y == 0: scores and probabilities agree in direction
    assert roc_auc_score(labels == "MSS", model.decision_function(X)) > 0.8
    assert roc_auc_score(labels == "MSS", proba[:, 1]) > 0.8
    assert set(model.predict(X)) <= {"MSI-H", "MSS"}
    bam = BAMClassifier().fit(X, labels)
    assert set(bam.predict(X)) <= {"MSI-H", "MSS"}
    with pytest.raises(ValueError, match="ranking"):
        BAMClassifier(ranking="triplet").fit(X, y)
    with pytest.raises(ValueError, match="alpha_eta"):
        BAMClassifier(alpha_eta=0).fit(X, y)
    with pytest.raises(ValueError, match="nu"):
        BayesianProbitClassifier(nu=-1).fit(X, y)
    with pytest.raises(ValueError, match="max_iter"):
        BayesianProbitClassifier(max_iter=0).fit(X, y)
    with pytest.raises(ValueError, match="Only binary"):
        BAMClassifier().fit(X, np.arange(40) % 3)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BAMClassifier().fit(bad, y)
    with pytest.raises(ValueError, match="features"):
        model.decision_function(X[:, :3])


@pytest.mark.slow
def test_bam_listwise_auroc_at_least_bprobit_on_imbalanced_problem():
    """10 % positives, a weak shift in 5 of 60 features: the all-negative rule already has the
    best attainable error rate, so error minimisation has little to say about the ranking
    that AUROC measures. Mean held-out AUROC over repeated stratified 75/25 splits."""
    rng = np.random.default_rng(0)
    n, n_pos, d = 120, 12, 60
    X = rng.normal(size=(n, d))
    y = np.r_[np.ones(n_pos), np.zeros(n - n_pos)].astype(int)
    X[:n_pos, :5] += 0.8
    auroc = {"bprobit": [], "bam_l": []}
    for split in range(6):
        test = np.r_[
            rng.choice(n_pos, 3, replace=False), n_pos + rng.choice(n - n_pos, 27, replace=False)
        ]
        train = np.setdiff1d(np.arange(n), test)
        for name, model in [
            ("bprobit", BayesianProbitClassifier(random_state=split)),
            ("bam_l", BAMClassifier(ranking="listwise", random_state=split)),
        ]:
            model.fit(X[train], y[train])
            auroc[name].append(roc_auc_score(y[test], model.decision_function(X[test])))
    assert np.mean(auroc["bam_l"]) >= np.mean(auroc["bprobit"])
    assert np.mean(auroc["bam_l"]) > 0.6


def test_figure_has_one_panel_per_cohort_kernel_metric_and_prints_means():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from omicsbayes.pl.bam import bam_boxplots

    rng = np.random.default_rng(16)
    rows = [
        {
            "cohort": c,
            "transform": k,
            "model": m,
            "split": s,
            "auroc": rng.uniform(0.6, 0.9),
            "aupr": rng.uniform(0.3, 0.8),
        }
        for c in ("UCEC", "COADREAD")
        for k in ("linear", "gaussian")
        for m in ("BAM_L", "BPROBIT", "BAM_P")
        for s in range(5)
    ]
    table = pd.DataFrame(rows)
    fig = bam_boxplots(table)
    assert len(fig.axes) == 2 * 2 * 2
    ax = next(a for a in fig.axes if a.get_title() == "UCEC linear AUROC")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["BPROBIT", "BAM_P", "BAM_L"]
    sub = table[(table["cohort"] == "UCEC") & (table["transform"] == "linear")]
    means = [
        f"{sub.loc[sub['model'] == m, 'auroc'].mean():.3f}" for m in ("BPROBIT", "BAM_P", "BAM_L")
    ]
    assert [t.get_text() for t in ax.texts] == means
    plt.close(fig)
    with pytest.raises(ValueError, match="split"):
        bam_boxplots(table.drop(columns="split"))
