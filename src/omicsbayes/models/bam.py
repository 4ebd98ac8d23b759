"""Bayesian AUC maximisation (paper 001): BPROBIT and BAM with pairwise or listwise ranking.

All three classifiers share the Bayesian linear model of equation (3),

    gamma ~ G(alpha_gamma, beta_gamma),   b | gamma ~ N(0, 1 / gamma),
    eta_d ~ G(alpha_eta, beta_eta),       w_d | eta_d ~ N(0, 1 / eta_d),
    f_n | b, w ~ N(w^T x_n + b, 1),

with gamma distributions in the shape-scale form (ERRATA 001), and differ in how the labels
enter: BPROBIT truncates f_n to y_n f_n > nu (eq. 3); BAM replaces that with observed
categorical ranking variables, one per positive-negative pair (pairwise, eq. 1) or one per
member of the smaller class against the whole other class (listwise, eq. 2).

Inference is the mean-field variational Bayes of section 3: closed-form q(gamma), q(eta) and
q(b, w) (eqs. 4-7), a truncated normal q(f) for BPROBIT (eqs. 8-9) and, for BAM, a Gaussian
q(f) fitted against the local variational bounds of the softmax terms with parameters zeta
(eqs. 10-11) in four steps per iteration: zeta, mean of f, zeta, variance of f.

With fixed zeta the BAM objective L_q(f) separates over samples, and each coordinate problem is
strictly concave in mu(f_n) and in log Sigma(f_n). The mean step is therefore solved exactly
(the stationarity condition is mu = a - k exp(mu), whose root is a - W(k exp(a)), written with
the Wright omega function for numerical range); the variance step uses safeguarded Newton steps
with the analytic first and second derivatives in the log domain. Both reach the optimum that
the paper's L-BFGS iterations approach, so every step raises the bound.

Where the paper's text and its model disagree (each derived again from the model):

- eq. (1) prints the event probability as [exp(f_n) - exp(f_o)] / (exp(f_n) + exp(f_o)); the
  softmax, used in the rest of section 3.2, is exp(f_n) / (exp(f_n) + exp(f_o)).
- eq. (6): diag(E_q[lambda]) is diag(E_q[eta]) (ERRATA 001).
- section 3.2.3 announces the derivatives "with respect to {mu(f_o)}" for the negatives; they
  are those with respect to Sigma(f_o).
- step (iv) runs in s = log Sigma(f_n): the derivatives printed in 3.2.3 and 3.3.3 are in
  Sigma, and the log-domain ones need the chain rule, dL/ds = Sigma dL/dSigma and
  d2L/ds2 = Sigma dL/dSigma + Sigma^2 d2L/dSigma2 (:func:`f_derivatives`).
- the stopping rule needs the full lower bound (ERRATA 001); it is computed every iteration
  with zeta at its optimum (10)-(11) for the current q(f), which keeps it non-decreasing.
"""

from numbers import Real

import numpy as np
from scipy import linalg, special
from scipy.linalg import blas, lapack
from sklearn.base import ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions

from ..inference.convergence import check_finite
from ..inference.gamma import gamma_entropy, gamma_expected_log_pdf, gamma_moments
from ..inference.truncnorm import truncnorm_moments
from ._base import VBEstimator
from ._validation import POSITIVE, VB_CONSTRAINTS, binary_labels, check_rng

__all__ = [
    "BayesianProbitClassifier",
    "BAMClassifier",
    "optimal_log_zeta",
    "softmax_bound",
    "softmax_coefficients",
    "f_objective",
    "f_derivatives",
    "weights_bound",
]


_LOG2PI = np.log(2.0 * np.pi)
RANKINGS = ("pairwise", "listwise")


def _logsumexp(a, axis=None):
    """log sum exp over ``axis`` (scipy's version costs more in overhead than in arithmetic)."""
    top = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - top), axis=axis, keepdims=True)) + top
    return out.item() if axis is None else np.squeeze(out, axis=axis)


# ----------------------------------------------------------------------------------------------
# The softmax bounds of sections 3.2 and 3.3
# ----------------------------------------------------------------------------------------------
def optimal_log_zeta(ranking, mu, var, pos, neg):
    """log of the optimal variational parameters zeta* given q(f).

    Parameters
    ----------
    ranking : {"pairwise", "listwise"}
    mu, var : ndarray of shape (n_samples,)
        Mean and variance of the Gaussian q(f_n).
    pos, neg : ndarray of int
        Indices of the ranked (P) and the other (N) class.

    Returns
    -------
    ndarray
        Pairwise, shape (``|P|``, ``|N|``): log(E[exp f_n] + E[exp f_o]) (eq. 10). Listwise, shape
        (``|P|``,): log(E[exp f_n] + sum_{o in N} E[exp f_o]) (eq. 11).
    """
    log_e = mu + 0.5 * var
    if ranking == "pairwise":
        return np.logaddexp(log_e[pos][:, None], log_e[neg][None, :])
    return np.logaddexp(log_e[pos], _logsumexp(log_e[neg]))


def softmax_bound(ranking, mu, var, log_zeta, pos, neg):
    """Sum over the ranking variables of the local lower bound on E_q[log p(z | f)].

    Pairwise (section 3.2): sum_{n in P, o in N} mu_n - (E[e^f_n] + E[e^f_o]) / zeta_no + 1
    - log zeta_no. Listwise (section 3.3): sum_{n in P} mu_n - sum_{o in W_n} E[e^f_o] / zeta_n
    + 1 - log zeta_n, with W_n = {n} and N. E[e^f] = exp(mu + var / 2).
    """
    log_e = mu + 0.5 * var
    n_pos, n_neg = len(pos), len(neg)
    if ranking == "pairwise":
        ratio = np.exp(log_e[pos][:, None] - log_zeta).sum() + np.exp(log_e[neg] - log_zeta).sum()
        return n_neg * mu[pos].sum() - ratio + n_pos * n_neg - log_zeta.sum()
    log_sum = np.logaddexp(log_e[pos], _logsumexp(log_e[neg]))
    return mu[pos].sum() - np.exp(log_sum - log_zeta).sum() + n_pos - log_zeta.sum()


def softmax_coefficients(ranking, log_zeta, pos, neg, n_samples):
    """Write the softmax bound, for fixed zeta, as sum_n c_n mu_n - r_n E[exp f_n] + const.

    Returns
    -------
    c : ndarray of shape (n_samples,)
        ``|N|`` for members of P (pairwise) or 1 (listwise); 0 for members of N.
    log_r : ndarray of shape (n_samples,)
        log sum_{o in B_n} 1 / zeta (the sets of sections 3.2.2 and 3.3.2): pairwise, row sums
        of 1 / zeta for P and column sums for N; listwise, 1 / zeta_n for P and sum_{p in P}
        1 / zeta_p for every member of N.
    """
    c = np.zeros(n_samples)
    log_r = np.empty(n_samples)
    if ranking == "pairwise":
        c[pos] = len(neg)
        log_r[pos] = _logsumexp(-log_zeta, axis=1)
        log_r[neg] = _logsumexp(-log_zeta, axis=0)
    else:
        c[pos] = 1.0
        log_r[pos] = -log_zeta
        log_r[neg] = _logsumexp(-log_zeta)
    return c, log_r


def f_objective(mu, var, m, v, c, log_r):
    """The part of the lower bound that depends on q(f), for fixed zeta (sections 3.2-3.3).

    sum_n E[log N(f_n; w^T x_n + b, 1)] + H[q(f_n)] + c_n mu_n - r_n exp(mu_n + var_n / 2),
    where m_n = E[w^T x_n + b] and v_n = Var[w^T x_n + b] under q(b, w). The constant
    sum (1 - log zeta) of the softmax bound is left out.
    """
    quad = mu**2 + var - 2.0 * mu * m + m**2 + v
    entropy = 0.5 * (np.log(var) + _LOG2PI + 1.0)
    soft = c * mu - np.exp(log_r + mu + 0.5 * var)
    return float(np.sum(-0.5 * _LOG2PI - 0.5 * quad + entropy + soft))


def f_derivatives(mu, var, m, c, log_r):
    """First and second derivatives of :func:`f_objective` (the Hessian is diagonal).

    Returns a dict with ``mu``, ``mu2`` (sections 3.2.2, 3.3.2), ``var``, ``var2`` (sections
    3.2.3, 3.3.3) and ``log_var``, ``log_var2`` for s = log Sigma(f_n), the variable of step
    (iv): dL/ds = Sigma dL/dSigma and d2L/ds2 = Sigma dL/dSigma + Sigma^2 d2L/dSigma2 (the chain
    rule gives the extra first-derivative term in the second derivative).
    """
    e = np.exp(log_r + mu + 0.5 * var)
    d_var = -0.5 + 0.5 / var - 0.5 * e
    d_var2 = -0.5 / var**2 - 0.25 * e
    return {
        "mu": -mu + m + c - e,
        "mu2": -1.0 - e,
        "var": d_var,
        "var2": d_var2,
        "log_var": var * d_var,
        "log_var2": var * d_var + var**2 * d_var2,
    }


def _optimal_mean(var, m, c, log_r):
    """Step (ii): the exact maximiser of L_q(f) in mu(f_n) for fixed zeta and Sigma(f).

    dL/dmu = a - mu - k exp(mu) with a = m + c and k = r exp(var / 2); its root is
    mu = a - u with u + log u = log k + a, i.e. u = omega(log k + a) (Wright omega).
    """
    a = m + c
    return a - special.wrightomega(log_r + 0.5 * var + a)


def _optimal_log_var(mu, log_r, max_steps=100, xtol=1e-12):
    """Step (iv): maximise L_q(f) over s = log Sigma(f_n) by safeguarded Newton steps.

    dL/ds = (1 - S - S k e^{S/2}) / 2 with S = e^s and k = r e^mu. Its root satisfies
    S (1 + k e^{S/2}) = 1 with S <= 1, so S lies between 1 / (1 + k e^{1/2}) and 1 / (1 + k):
    a bracket of width at most 1/2 in s. dL/ds is decreasing and concave in s, so Newton steps
    with the analytic second derivative (:func:`f_derivatives`) started at the upper end
    approach the root monotonically; a step that leaves the bracket is replaced by bisection.
    """
    log_k = log_r + mu
    lo = -np.logaddexp(0.0, log_k + 0.5)
    hi = -np.logaddexp(0.0, log_k)
    s = hi.copy()
    for _ in range(max_steps):
        var = np.exp(s)
        ke = np.exp(log_k + 0.5 * var)
        grad = 0.5 * (1.0 - var - var * ke)
        hess = -0.5 * var - ke * var * (0.5 + 0.25 * var)
        lo = np.where(grad > 0, s, lo)
        hi = np.where(grad < 0, s, hi)
        newton = s - grad / hess
        outside = (newton < lo) | (newton > hi)
        s_new = np.where(outside, 0.5 * (lo + hi), newton)
        done = np.max(np.abs(s_new - s)) < xtol
        s = s_new
        if done:
            break
    return s


# ----------------------------------------------------------------------------------------------
# q(b, w), equations (6)-(7)
# ----------------------------------------------------------------------------------------------
class _GaussianWeights:
    """q(b, w) = N(mean, Sigma) with Sigma = (diag(a) + Z^T Z)^-1 and mean = Sigma Z^T E[f].

    Z = [1, X] is samples x (1 + features), so Z^T Z is the matrix of eq. (6) with the paper's
    D x N X transposed, and a = (E[gamma], E[eta]) (diag E[lambda] of eq. 6 is diag E[eta],
    ERRATA 001). With more columns than rows (the empirical kernel map) the same moments come
    from the N x N dual, M = I + Z A^-1 Z^T (Woodbury): mean = A^-1 Z^T M^-1 E[f],
    diag Sigma = a^-1 - a^-2 colsum((L^-1 Z)^2), Var[z_n^T (b, w)] = 1 - (M^-1)_nn.
    """

    def __init__(self, Z, dual=None):
        self.Z = Z
        self.dual = Z.shape[1] > Z.shape[0] if dual is None else dual
        if not self.dual:
            self.gram = Z.T @ Z

    def update(self, prior_precision, e_f):
        """Return mean, E[(b, w)^2] (elementwise), log det Sigma, E[z_n^T (b,w)], Var[...]."""
        Z = self.Z
        if self.dual:
            a_inv = 1.0 / prior_precision
            Zs = Z * np.sqrt(a_inv)
            M = Zs @ Zs.T
            M[np.diag_indices_from(M)] += 1.0
            chol = linalg.cholesky(M, lower=True, check_finite=False)
            # scipy's cholesky zeroes the upper triangle, which dtrtri and dtrmm leave alone
            chol_inv, _ = lapack.dtrtri(chol, lower=1)
            alpha = chol_inv.T @ (chol_inv @ e_f)
            mean = a_inv * (Z.T @ alpha)
            W = blas.dtrmm(1.0, chol_inv, Z, lower=1)
            diag = a_inv - a_inv**2 * np.einsum("ij,ij->j", W, W)
            logdet = -np.sum(np.log(prior_precision)) - 2.0 * np.sum(np.log(np.diag(chol)))
            m = Z @ mean
            v = 1.0 - np.einsum("ij,ij->j", chol_inv, chol_inv)
            self.a_inv, self.chol_inv = a_inv, chol_inv
        else:
            P = self.gram.copy()
            P[np.diag_indices_from(P)] += prior_precision
            chol = linalg.cholesky(P, lower=True, check_finite=False)
            inv, _ = lapack.dpotri(chol, lower=1)
            cov = np.tril(inv) + np.tril(inv, -1).T
            mean = cov @ (Z.T @ e_f)
            diag = np.diag(cov).copy()
            logdet = -2.0 * np.sum(np.log(np.diag(chol)))
            m = Z @ mean
            v = np.einsum("ij,ij->i", Z @ cov, Z)
            self.cov = cov
        return mean, mean**2 + np.maximum(diag, 0.0), logdet, m, np.maximum(v, 0.0)

    def predictive_variance(self, Z_new):
        """Var[z^T (b, w)] under q(b, w) for rows z of ``Z_new``."""
        if self.dual:
            C = self.chol_inv @ (self.Z @ (self.a_inv[:, None] * Z_new.T))
            prior = (Z_new**2) @ self.a_inv
            return np.maximum(prior - np.einsum("ij,ij->j", C, C), 0.0)
        return np.maximum(np.einsum("ij,ij->i", Z_new @ self.cov, Z_new), 0.0)


def weights_bound(prior, posterior, e_bw2, logdet):
    """The terms of the lower bound that do not involve f.

    E[log p(gamma)] + E[log p(b | gamma)] + sum_d E[log p(eta_d)] + E[log p(w_d | eta_d)]
    + H[q(gamma)] + H[q(eta)] + H[q(b, w)].

    Parameters
    ----------
    prior : tuple
        (alpha_gamma, beta_gamma, alpha_eta, beta_eta), shape-scale.
    posterior : tuple
        (shape, scale) of q(gamma) and (shape, scale array) of q(eta).
    e_bw2 : ndarray of shape (1 + n_features,)
        E[b^2], E[w_d^2] under q(b, w).
    logdet : float
        log det Sigma(b, w).
    """
    alpha_gamma, beta_gamma, alpha_eta, beta_eta = prior
    a_gamma, s_gamma, a_eta, s_eta = posterior
    # the shared gamma helpers are shape-rate: rate = 1 / scale
    e_gamma, log_gamma = gamma_moments(a_gamma, 1.0 / s_gamma)
    e_eta, log_eta = gamma_moments(a_eta, 1.0 / s_eta)
    hyper = (
        gamma_expected_log_pdf(alpha_gamma, 1.0 / beta_gamma, e_gamma, log_gamma)
        + gamma_entropy(a_gamma, 1.0 / s_gamma)
        + np.sum(gamma_expected_log_pdf(alpha_eta, 1.0 / beta_eta, e_eta, log_eta))
        + np.sum(gamma_entropy(a_eta, 1.0 / s_eta))
    )
    # E[log N(b; 0, 1/gamma)] + sum_d E[log N(w_d; 0, 1/eta_d)] + H[q(b, w)]: the log(2 pi)
    # terms of the priors and of the Gaussian entropy cancel.
    gauss = 0.5 * (log_gamma - e_gamma * e_bw2[0]) + 0.5 * np.sum(log_eta - e_eta * e_bw2[1:])
    return hyper + gauss + 0.5 * logdet + 0.5 * e_bw2.size


# ----------------------------------------------------------------------------------------------
# Estimators
# ----------------------------------------------------------------------------------------------


class _BayesianLinearVB(ClassifierMixin, VBEstimator):
    """Shared fit loop: q(gamma), q(eta), q(b, w) (eqs. 4-7), then the model's q(f)."""

    capabilities = frozenset({"classifier", "vb"})
    _blas_sequential = True  # a Cholesky of the N x N kernel each iteration (thread policy)
    _trace_label = "lower bound"  # lower_bound_ is the full evidence lower bound (trace_label)
    _parameter_constraints = {
        **{name: [POSITIVE] for name in ("alpha_gamma", "beta_gamma", "alpha_eta", "beta_eta")},
        **VB_CONSTRAINTS,
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y):
        """Run variational inference until the lower bound improves by less than ``tol``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Inputs (for the paper's experiments, the empirical kernel map of the training
            samples, :class:`omicsbayes.preprocess.EmpiricalKernelMap`).
        y : array-like of shape (n_samples,)
            Two class labels; ``classes_[1]`` is the positive class.

        Returns
        -------
        self
        """
        X = self._check_X(X, reset=True)
        self.classes_, t = binary_labels(y, type(self).__name__, X.shape[0])
        sign = self._orientation(t)
        t = sign * t
        rng = check_rng(self.random_state)
        Z = np.hstack([np.ones((X.shape[0], 1)), X])
        weights = _GaussianWeights(Z)
        e_bw2 = rng.normal(size=Z.shape[1]) ** 2 + 1.0
        f_state = self._init_f(t, rng)

        a_gamma = self.alpha_gamma + 0.5
        a_eta = self.alpha_eta + 0.5
        state = {"e_bw2": e_bw2, "f": f_state}

        def step(it):
            iteration = it + 1
            # (4), (5): q(gamma), q(eta), shape-scale
            s_gamma = 1.0 / (1.0 / self.beta_gamma + 0.5 * state["e_bw2"][0])
            s_eta = 1.0 / (1.0 / self.beta_eta + 0.5 * state["e_bw2"][1:])
            e_gamma, e_eta = a_gamma * s_gamma, a_eta * s_eta
            # (6), (7): q(b, w)
            mean, e_bw2, logdet, m, v = weights.update(
                np.concatenate([[e_gamma], e_eta]), state["f"]["e_f"]
            )
            check_finite(mean, "q(b, w) update (eqs. 6-7)", iteration)
            f_state = self._update_f(state["f"], m, t, iteration)
            check_finite(f_state["e_f"], "q(f) update", iteration)
            state.update(e_bw2=e_bw2, f=f_state, mean=mean, s_gamma=s_gamma, s_eta=s_eta)
            return weights_bound(
                (self.alpha_gamma, self.beta_gamma, self.alpha_eta, self.beta_eta),
                (a_gamma, s_gamma, a_eta, s_eta),
                e_bw2,
                logdet,
            ) + self._f_bound(f_state, m, v, t)

        self._run_vb(step)
        mean, s_gamma, s_eta, f_state = state["mean"], state["s_gamma"], state["s_eta"], state["f"]
        self.intercept_ = float(sign * mean[0])
        self.coef_ = sign * mean[1:]
        self.gamma_shape_, self.gamma_scale_ = a_gamma, float(s_gamma)
        self.eta_shape_, self.eta_scale_ = a_eta, s_eta
        self._weights = weights
        self._fit_shape = Z.shape  # predictive variances use the fit's matrices (thread policy)
        self._store_f(f_state, sign)
        return self

    def _orientation(self, t):
        return 1.0

    def _predictive(self, X):
        X = self._check_X(X, reset=False)
        return X @ self.coef_ + self.intercept_, X

    def decision_function(self, X):
        """Predictive mean E[w^T x + b] under q(b, w); larger means ``classes_[1]``.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._predictive(X)[0]


class BayesianProbitClassifier(_BayesianLinearVB):
    """BPROBIT: Bayesian probit regression with margin, by variational Bayes (paper 001, 3.1).

    Parameters
    ----------
    nu : float, default 1.0
        Margin: y_n f_n > nu (eq. 3).
    alpha_gamma, beta_gamma : float, default 1.0
        Shape and scale of the gamma prior on the bias precision.
    alpha_eta, beta_eta : float, default 1.0
        Shape and scale of the gamma priors on the weight precisions.
    max_iter : int, default 1000
        A converged fit stops earlier, at ``tol``.
    tol : float, default 1e-5
        Stop when the lower bound improves by less than this fraction (0.001 %).
    random_state : int, optional
        Seeds the initial q(b, w) second moments and q(f) means.
    verbose : bool, default True
        Show a progress bar.

    Attributes
    ----------
    classes_, coef_, intercept_ : the labels and the posterior mean of (w, b)
    lower_bound_ : ndarray, the full variational lower bound after each iteration
    n_iter_, converged_ : iterations run, whether ``tol`` was reached
    gamma_shape_, gamma_scale_, eta_shape_, eta_scale_ : q(gamma), q(eta) (shape-scale)
    f_mean_ : ndarray, E_q[f_n] of the training samples

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import BayesianProbitClassifier
    >>> X, y = np.random.default_rng(0).normal(size=(60, 8)), np.repeat(["case", "control"], 30)
    >>> X[:30, 0] += 3.0  # gene 0 separates the classes
    >>> clf = BayesianProbitClassifier(random_state=0).fit(X, y)
    >>> int(np.abs(clf.coef_).argmax())  # the largest posterior mean weight is gene 0's
    0
    >>> clf.predict_proba(X[:2]).sum(axis=1)  # probit probabilities of the two classes
    array([1., 1.])
    >>> bool(np.all(np.diff(clf.lower_bound_) > -1e-8))  # VB: the bound never goes down
    True
    """

    def __init__(
        self,
        nu=1.0,
        alpha_gamma=1.0,
        beta_gamma=1.0,
        alpha_eta=1.0,
        beta_eta=1.0,
        max_iter=1000,  # real kernel maps need up to 404 (benchmarks.fidelity --review-defaults)
        tol=1e-5,
        random_state=None,
        verbose=True,
    ):
        self.nu = nu
        self.alpha_gamma = alpha_gamma
        self.beta_gamma = beta_gamma
        self.alpha_eta = alpha_eta
        self.beta_eta = beta_eta
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints = {
        **_BayesianLinearVB._parameter_constraints,
        "nu": [Interval(Real, 0, np.inf, closed="left")],
    }

    def _init_f(self, t, rng):
        return {"e_f": t * (np.abs(rng.normal(size=t.size)) + self.nu)}

    def _update_f(self, state, m, t, iteration):
        """(8)-(9): q(f_n) = N(E[w^T x_n + b], 1) truncated to y_n f_n > nu."""
        lower = np.where(t > 0, self.nu, -np.inf)
        upper = np.where(t > 0, np.inf, -self.nu)
        e_f, var_f = truncnorm_moments(m, 1.0, lower, upper)
        return {"e_f": e_f, "var_f": var_f, "loc": m, "log_z": special.log_ndtr(t * m - self.nu)}

    def _f_bound(self, state, m, v, t):
        """E[log p(f | b, w)] + H[q(f)]; E[log p(y | f)] = 0 on the support of q(f)."""
        e_f, var_f = state["e_f"], state["var_f"]
        expected = -0.5 * _LOG2PI - 0.5 * (var_f + (e_f - m) ** 2 + v)
        entropy = 0.5 * _LOG2PI + 0.5 * (var_f + (e_f - state["loc"]) ** 2) + state["log_z"]
        return np.sum(expected + entropy)

    def _store_f(self, state, sign):
        self.f_mean_ = sign * state["e_f"]

    def predict_proba(self, X):
        """Class probabilities from the predictive distribution.

        f* ~ N(E[w^T x + b], 1 + Var[w^T x + b]); P(classes_[1]) = P(f* > nu) /
        (P(f* > nu) + P(f* < -nu)), the model giving no mass to |f*| < nu.

        Returns
        -------
        ndarray of shape (n_samples, 2)
        """
        mean, X = self._predictive(X)
        Z = np.hstack([np.ones((X.shape[0], 1)), X])
        sd = np.sqrt(1.0 + self._weights.predictive_variance(Z))
        log_pos = special.log_ndtr((mean - self.nu) / sd)
        log_neg = special.log_ndtr((-self.nu - mean) / sd)
        p = special.expit(log_pos - log_neg)
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        """The class with predictive probability above one half."""
        positive = self.predict_proba(X)[:, 1] > 0.5
        return self.classes_[positive.astype(int)]


class BAMClassifier(_BayesianLinearVB):
    """BAM: Bayesian AUC maximisation with pairwise or listwise ranking (paper 001, 3.2-3.3).

    Parameters
    ----------
    ranking : {"listwise", "pairwise"}, default "listwise"
        BAM_L (eq. 2, one softmax per member of the smaller class) or BAM_P (eq. 1, one per
        positive-negative pair, held as a ``|P| x |N|`` matrix of zeta).
    alpha_gamma, beta_gamma, alpha_eta, beta_eta, tol, random_state, verbose
        As for :class:`BayesianProbitClassifier`.
    max_iter : int, default 5000

    Attributes
    ----------
    classes_, coef_, intercept_, lower_bound_, n_iter_, converged_, gamma_shape_,
    gamma_scale_, eta_shape_, eta_scale_ : as for :class:`BayesianProbitClassifier`
    f_mean_, f_var_ : ndarray, the Gaussian q(f_n) of the training samples

    Notes
    -----
    The paper assumes ``|P| < |N|`` for the listwise form. When the positive class is larger, the
    negatives are ranked instead: each negative must score below every positive, which is the
    listwise model for -f with the classes swapped; the prior being symmetric, the fit is run
    on swapped labels and (b, w, f) negated. The pairwise form is already symmetric.

    ``predict`` thresholds the decision function at zero; use :meth:`decision_function` for
    AUROC and AUPR, which is what BAM optimises.

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import BAMClassifier
    >>> X, y = np.random.default_rng(0).normal(size=(60, 8)), np.repeat(["case", "control"], 30)
    >>> X[:30, 0] += 3.0  # gene 0 separates the classes
    >>> from sklearn.metrics import roc_auc_score
    >>> clf = BAMClassifier(ranking="pairwise", random_state=0).fit(X, y)
    >>> auroc = roc_auc_score(y == clf.classes_[1], clf.decision_function(X))
    >>> bool(auroc > 0.9)  # BAM maximises the AUC: rank by decision_function
    True
    >>> clf.f_mean_.shape, clf.f_var_.shape  # q(f_n) of the training samples
    ((60,), (60,))
    """

    def __init__(
        self,
        ranking="listwise",
        alpha_gamma=1.0,
        beta_gamma=1.0,
        alpha_eta=1.0,
        beta_eta=1.0,
        max_iter=5000,  # BAM_P needs up to 3157 from some starts (benchmarks.fidelity)
        tol=1e-5,
        random_state=None,
        verbose=True,
    ):
        self.ranking = ranking
        self.alpha_gamma = alpha_gamma
        self.beta_gamma = beta_gamma
        self.alpha_eta = alpha_eta
        self.beta_eta = beta_eta
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints = {
        **_BayesianLinearVB._parameter_constraints,
        "ranking": [StrOptions(set(RANKINGS))],
    }

    def _orientation(self, t):
        if self.ranking == "listwise" and np.sum(t > 0) > np.sum(t < 0):
            return -1.0
        return 1.0

    def _init_f(self, t, rng):
        pos, neg = np.flatnonzero(t > 0), np.flatnonzero(t < 0)
        e_f = t * (np.abs(rng.normal(size=t.size)) + 1.0)
        return {"e_f": e_f, "var": np.ones(t.size), "pos": pos, "neg": neg}

    def _update_f(self, state, m, t, iteration):
        """Steps (i)-(iv) of section 3.2: zeta, mean, zeta, log-variance."""
        pos, neg = state["pos"], state["neg"]
        mu, var = state["e_f"], state["var"]
        log_zeta = optimal_log_zeta(self.ranking, mu, var, pos, neg)
        c, log_r = softmax_coefficients(self.ranking, log_zeta, pos, neg, t.size)
        mu = _optimal_mean(var, m, c, log_r)
        log_zeta = optimal_log_zeta(self.ranking, mu, var, pos, neg)
        c, log_r = softmax_coefficients(self.ranking, log_zeta, pos, neg, t.size)
        var = np.exp(_optimal_log_var(mu, log_r))
        check_finite(var, "q(f) variance step (iv)", iteration)
        return {"e_f": mu, "var": var, "pos": pos, "neg": neg}

    def _f_bound(self, state, m, v, t):
        """E[log p(f | b, w)] + H[q(f)] + the softmax bound at zeta* (eqs. 10-11)."""
        mu, var, pos, neg = state["e_f"], state["var"], state["pos"], state["neg"]
        quad = mu**2 + var - 2.0 * mu * m + m**2 + v
        gauss = np.sum(-0.5 * _LOG2PI - 0.5 * quad + 0.5 * (np.log(var) + _LOG2PI + 1.0))
        log_zeta = optimal_log_zeta(self.ranking, mu, var, pos, neg)
        return gauss + softmax_bound(self.ranking, mu, var, log_zeta, pos, neg)

    def _store_f(self, state, sign):
        self.f_mean_ = sign * state["e_f"]
        self.f_var_ = state["var"]

    def predict(self, X):
        """``classes_[1]`` where the decision function is positive, else ``classes_[0]``."""
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]
