"""The scikit-learn estimator of the rank factor model (paper 000): parameters, validation,
targets, the VB and Gibbs fits and prediction for new samples."""

from numbers import Integral, Real

import numpy as np
from scipy import special
from sklearn.base import ClassifierMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if

from ...inference.bsvm import expected_hinge, expected_inv_lambda
from ...inference.chain import run_chain, sample_chains
from ...inference.convergence import check_finite
from ...inference.truncnorm import _log_diff_cdf, truncnorm_moments
from .._base import MCMCEstimator, VBEstimator
from .._threads import map_blocks
from .._validation import MCMC_CONSTRAINTS, POSITIVE, check_rng, split_labels
from ._engine import _BLOCK, _Engine, _GibbsSampler, _newton_scores, _second, _Sym, _with_one
from ._kernels import _gaussian_block, _margin_moments

_MOMENT_TASK = 1 << 16  # entries of prediction's margin moments per call on the worker threads

VARIANTS = {
    "G-L-Probit": ("gaussian", "probit", False),
    "G-L-BSVM": ("gaussian", "bsvm", False),
    "OR-L-Probit": ("rank", "probit", False),
    "OR-L-BSVM": ("rank", "bsvm", False),
    "R-L-BSVM": ("maxmargin_rank", "bsvm", False),
    "G-NL-BSVM": ("gaussian", "bsvm", True),
    "R-NL-BSVM": ("maxmargin_rank", "bsvm", True),
}


# --------------------------------------------------------------------------- targets
def _encode_targets(y, n):
    """``(mode, classes, Y in {-1, +1}, observed mask)``; mode: binary, multiclass, multitask."""
    if y is None:
        raise ValueError("RankFactorClassifier requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {y.shape[0]}")
    if y.ndim == 1:
        y, labelled = split_labels(y, "RankFactorClassifier", n)
        if not labelled.all():
            raise ValueError(
                f"y has {int((~labelled).sum())} NaN labels; a 1-D y needs every label (a 2-D y "
                "marks a missing label with NaN)"
            )
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(
                f"y has {len(classes)} class; RankFactorClassifier needs at least 2 classes"
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


# --------------------------------------------------------------------------- estimator
class RankFactorClassifier(ClassifierMixin, TransformerMixin, VBEstimator, MCMCEstimator):
    """Discriminative factor model of paper 000 (Yuan, Henao et al., ICML 2015).

    ``X`` (n_samples, n_features) is modelled through ``w_{n,i} = a_i^T z_n`` with a Gaussian,
    ordinary rank (Hoff) or max-margin rank likelihood (eqs. 1-7); labels through a probit or a
    Bayesian SVM (eq. 8) on the factor scores, optionally as a Dirichlet-process mixture of local
    linear classifiers (eq. 9).  TPBN shrinkage on loadings (global scale per column) and
    coefficients (sections 3 and 6).  The max-margin rank likelihood's sweeps and prediction run
    in groups of features or samples on as many threads as the caller allows (a
    ``threadpoolctl.threadpool_limits``, a job's ``threads``; otherwise every CPU), with the same
    numbers on any number of threads (``models._threads.map_blocks``).

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
    inference : {"vb", "vb_deterministic", "gibbs"}
        ``"vb_deterministic"``: the paper's VB (supplement section 8, items 1-4, for the
        pseudo-likelihoods of eqs. 6-8) with no random numbers: the max-margin rank likelihood
        takes the printed form (w = a^T z, ``<w> = <a>^T <z>``; ``maxmargin_form`` is not read),
        and every scale variable its printed closed form from means, ``<1/lambda> = |<u>|^-1``
        (item 3; ``_Engine.plugin``).  These are not the mean-field updates of any bound, so
        ``lower_bound_`` (the objective with the hinges at the means) can decrease.  It shrinks
        the scale of w towards zero on noisy data (see :mod:`omicsbayes.models.rank_factor`),
        so ``"vb"`` is the default.
    max_iter, tol : VB iterations and relative-change stopping rule of the monitoring bound.
    n_samples, burn_in, thin : Gibbs settings: draws kept, sweeps discarded first (None: as many
        as are kept, ``n_samples * thin``, i.e. half of the chain) and the thinning interval.
    n_chains : int
        Gibbs: independent chains, each seeded from ``random_state``, in parallel processes where
        cores allow. Prediction uses the first chain's posterior means (factors are identified
        only within a chain); ``idata_`` holds every chain for R-hat / ESS.
    prediction_bounds : {"extreme", "adjacent"}
        Where a new sample's value of a feature is placed among the fitted training w (section 3,
        "Predictions"; rank likelihoods only): ``"extreme"`` (default), between the maximum of w
        over all strictly smaller training values and the minimum over all strictly larger ones,
        the training neighbours' rule of section 2; ``"adjacent"``, between the mean w of the
        nearest tie group below and that of the nearest group above (each tie group standing as
        the paper's one "closest element").  Read at prediction only: ``set_params`` on a fitted
        model changes its predictions without a refit.
    transform_iter : int
        At most this many iterations of the z_* update for new samples (Newton steps for the
        rank likelihoods without the mixture; it stops when z_* changes by less than 1e-3 of its
        mean magnitude).
    random_state : int, Generator or None
    verbose : bool, default True

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

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import RankFactorClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 8))
    >>> y = (X[:, 0] + 0.5 * rng.normal(size=60) > 0).astype(int)
    >>> clf = RankFactorClassifier.from_variant(
    ...     "R-L-BSVM", n_factors=3, max_iter=30, random_state=0
    ... ).fit(X, y)
    >>> clf.decision_function(X[:5]).shape
    (5,)
    >>> clf.transform(X[:5]).shape  # factor scores of new samples
    (5, 3)
    >>> bool((clf.predict(X) == y).mean() > 0.7)
    True
    """

    capabilities = frozenset({"classifier", "multi_task", "model_figures", "vb", "mcmc"})

    def _instance_capabilities(self):
        """``mcmc`` when fitted by Gibbs sampling, ``vb`` otherwise."""
        return self.capabilities - {"vb" if self.inference == "gibbs" else "mcmc"}

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
        prediction_bounds="extreme",
        random_state=None,
        verbose=True,
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
        self.prediction_bounds = prediction_bounds
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
    _worker_blocks = True

    @property
    def _form(self):
        """The max-margin form fitted: the paper's deterministic VB uses the printed one."""
        return "exact" if self.inference == "vb_deterministic" else self.maxmargin_form

    _parameter_constraints = {
        "likelihood": [StrOptions({"gaussian", "rank", "maxmargin_rank"})],
        "classifier": [StrOptions({"probit", "bsvm"})],
        "mixture": ["boolean"],
        "inference": [StrOptions({"vb", "vb_deterministic", "gibbs"})],
        "maxmargin_form": [StrOptions({"latent", "exact"})],
        "prediction_bounds": [StrOptions({"extreme", "adjacent"})],
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

    # ----------------------------------------------------------------- fit
    def fit(self, X, y):
        """Fit on ``X`` (n_samples, n_features) and labels ``y`` (1-D, or 2-D with NaN)."""
        X = self._check_X(X, reset=True)
        if X.shape[0] < 2:
            raise ValueError(f"X has {X.shape[0]} sample(s); at least 2 are needed")
        self._mode, self.classes_, Y, O = _encode_targets(y, X.shape[0])
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
        if self.likelihood == "maxmargin_rank" and self._form == "exact":
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
        lag = 20 if self.likelihood == "maxmargin_rank" and self._form == "latent" else 1
        self._run_vb(
            lambda it: self._iterate(eng, it),
            name="RankFactorClassifier VB",
            lag=lag,
            min_iter=10 + lag,
        )
        self._means = _GibbsSampler.current(self, eng)

    def _train_w(self, eng):
        """Training w in (features, samples) layout, which new samples are placed among (the
        latent form's is the engine's own array, not a copy: a Gibbs draw adds it to a sum)."""
        if self.likelihood == "rank":
            return np.ascontiguousarray(eng.Ew.T)
        if self.likelihood == "maxmargin_rank" and self._form == "latent":
            return eng.H.T
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
        self._means = first.final["means"]
        names = [k for k in first.draws[0] if first.draws[0][k] is not None]
        posterior = {k: [np.stack([d[k] for d in c.draws]) for c in chains] for k in names}
        if not self.mixture:
            for k in ("coef", "intercept"):
                posterior[k] = [v[:, :, 0] for v in posterior[k]]
        keep = slice(burn, None, self.thin)
        self._record_chains(
            chains,
            posterior=posterior,
            sample_stats={
                "log_pseudo_likelihood": [c.traces["log_likelihood"][keep] for c in chains]
            },
            n_iter=total,
        )
        return first.final["engine"]

    def _finish(self, eng):
        means = self._means
        self._fit_shape = (eng.n, eng.d)  # prediction multiplies n x d matrices (thread policy)
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
        "Predictions"): ``(E[z], E[z z^T], responsibilities)``, with the mixture those of z_*
        given each component (:meth:`_mixture_scores`).  All samples are updated together, as
        matrix products and elementwise kernels over (samples, features) arrays."""
        X = self._check_X(X, reset=False)
        means = self._means
        k = self.n_factors
        sym = _Sym(k)
        Ea, EAA = means["Ea"], means["EAA"]
        m = X.shape[0]
        latent = self.likelihood == "maxmargin_rank" and self._form != "exact"
        exact = self.likelihood == "maxmargin_rank" and not latent
        eps = self.epsilon
        if self.likelihood == "gaussian":
            Xs = (X - self.center_) / self.scale_
            P_data = self.noise_precision_[None, :]  # the Gaussian likelihood's P and H
            H_data = self.noise_precision_ * Xs
        else:

            def neighbours(rows):
                lo_t, up_t, typical_t = self._index.new_neighbours(
                    means["W"], X[rows].T, self.prediction_bounds
                )
                return lo_t.T, up_t.T, typical_t.T  # contiguous (samples, features)

            def moments_of(lo, up):
                def moments(mu, rows=slice(None)):
                    if latent:  # the compiled kernel reads the rows of lo and up in place
                        mean, var = np.empty_like(mu), np.empty_like(mu)
                        at = np.arange(len(lo))[rows]
                        step = max(1, _MOMENT_TASK // mu.shape[1])  # samples per worker call

                        def block(b):
                            return _margin_moments(mu[b], lo, up, at[b], eps, mean[b], var[b])

                        blocks = [slice(i, i + step) for i in range(0, len(mu), step)]
                        return mean, var, np.concatenate(map_blocks(block, blocks))
                    mean, var = truncnorm_moments(mu, 1.0, lo[rows], up[rows])
                    return mean, var, _log_diff_cdf(lo[rows] - mu, up[rows] - mu).sum(axis=1)

                return moments

            if not exact:
                # samples in blocks of a few million entries (each sample's z_* is its own problem)
                step = max(1, _BLOCK // self.n_features_in_)
                blocks = [slice(i, min(i + step, m)) for i in range(0, m, step)]
                if self.mixture:
                    parts = []
                    for rows in blocks:
                        lo, up, typical = neighbours(rows)
                        component = self._newton_component(moments_of(lo, up), typical)
                        parts.append(self._mixture_scores(component))
                    return tuple(np.concatenate(part) for part in zip(*parts))
                Ez = np.empty((m, k))
                for rows in blocks:
                    lo, up, typical = neighbours(rows)
                    Ez[rows], cov = _newton_scores(
                        moments_of(lo, up), Ea, EAA, typical, self.transform_iter
                    )
                cov = np.broadcast_to(cov[0], (m, k, k))
                return Ez, _second(Ez, cov), np.ones((m, 1))
            lo, up, _ = neighbours(slice(None))
        if exact:
            eaa_flat = sym.flat(EAA)
            has_l, has_u = np.isfinite(lo), np.isfinite(up)
            lo0, up0 = np.where(has_l, lo, 0.0), np.where(has_u, up, 0.0)

        def margin_terms(Ez, EZZ):
            """The exact form's E[1/lam^l], E[1/lam^u], hinge residuals and Var(a^T z)."""
            wbar = Ez @ Ea.T
            var = np.maximum(sym.inner(sym.flat(EZZ), eaa_flat) - wbar**2, 0.0)
            var = 0.0 if self.inference == "vb_deterministic" else var
            u_l = lo0 + eps - wbar
            u_u = wbar + eps - up0
            il = np.where(has_l, expected_inv_lambda(u_l**2 + var), 0.0)
            iu = np.where(has_u, expected_inv_lambda(u_u**2 + var), 0.0)
            return il, iu, u_l, u_u, var

        def solve(precision, mean):
            """VB updates of q(z_*) = N(E[z], S^-1) under the prior N(mean, I / precision) until
            each sample's E[z] settles: ``(E[z], E[z z^T], log det S^-1)``."""
            if self.likelihood == "gaussian":
                P, H = P_data, H_data
            Ez = np.zeros((m, k))
            EZZ = np.broadcast_to(np.eye(k), (m, k, k)).copy()
            logdet = np.zeros(m)
            active = np.ones(m, dtype=bool)  # each sample stops on its own, as if predicted alone
            for _ in range(self.transform_iter):
                if exact:
                    il, iu, _, _, _ = margin_terms(Ez, EZZ)
                    P = il + iu
                    H = il * (lo0 + eps) + iu * (up0 - eps) + has_l - has_u
                if P.shape[0] == 1:
                    S = np.broadcast_to(np.einsum("i,ikl->kl", P[0], EAA), (m, k, k)).copy()
                else:
                    S = sym.unflat(P @ eaa_flat)
                S[:, np.arange(k), np.arange(k)] += precision
                new, new_ezz, new_logdet = _gaussian_block(
                    S, precision * mean + H @ Ea, second=True
                )
                change = np.max(np.abs(new - Ez), axis=1)
                Ez = np.where(active[:, None], new, Ez)
                EZZ = np.where(active[:, None, None], new_ezz, EZZ)
                logdet = np.where(active, new_logdet, logdet)
                if self.likelihood == "gaussian":  # one update is the exact conditional
                    break
                active &= change >= 1e-3 * np.maximum(1.0, np.abs(Ez).mean(axis=1))
                if not active.any():
                    break
            return Ez, EZZ, logdet

        if not self.mixture:
            Ez, EZZ, _ = solve(1.0, np.zeros(k))
            return Ez, EZZ, np.ones((m, 1))

        def component(precision, mean):
            """:meth:`_mixture_scores`' ``component``: :func:`solve` and ``E[log p(x_* | z_*)]``
            up to terms that do not depend on q(z_*)."""
            Ez, EZZ, logdet = solve(precision, mean)
            if self.likelihood == "gaussian":  # sum_i tau_i (x_i a_i^T z - (a_i^T z)^2 / 2)
                S = np.einsum("i,ikl->kl", P_data[0], EAA)
                loglik = np.sum((H_data @ Ea) * Ez, axis=1) - 0.5 * np.einsum("kl,nkl->n", S, EZZ)
            else:  # the exact form's log pseudo-likelihood (eq. 6), as in training
                _, _, u_l, u_u, var = margin_terms(Ez, EZZ)
                hinge = np.where(has_l, expected_hinge(u_l, var), 0.0) + np.where(
                    has_u, expected_hinge(u_u, var), 0.0
                )
                loglik = -2.0 * hinge.sum(axis=1)
            return Ez, EZZ, logdet, loglik

        return self._mixture_scores(component)

    def _newton_component(self, moments, typical):
        """:meth:`_mixture_scores`' ``component`` for the rank likelihoods (the Newton steps of
        :func:`_newton_scores` under each component's prior).  With q(w) at its optimum given
        q(z) = N(m, S^-1), ``E[log p(x_* | z_*)] = sum_i log Z_i(a_i^T m) - m^T C m / 2 - tr(sum_i
        E[a_i a_i^T] S^-1) / 2`` (``Z_i`` and ``C`` as in :func:`_newton_scores`)."""
        means = self._means
        Ea, EAA = means["Ea"], means["EAA"]
        gram = EAA.sum(axis=0)
        C = gram - Ea.T @ Ea

        def component(precision, mean):
            z, cov = _newton_scores(moments, Ea, EAA, typical, self.transform_iter, precision, mean)
            _, _, log_z = moments(z @ Ea.T)
            loglik = log_z - 0.5 * np.einsum("nk,kl,nl->n", z, C, z) - 0.5 * np.sum(gram * cov[0])
            logdet = np.full(len(z), np.linalg.slogdet(cov[0])[1])
            return z, _second(z, cov), logdet, loglik

        return component

    def _mixture_scores(self, component):
        """Moments of new samples under the DP mixture with q(z_*, t_*) = q(t_*) q(z_* | t_*):
        for each component t, q(z_* | t) = N(E[z], E[z z^T] - E[z] E[z]^T) is fitted under the
        component's prior N(mu_t, psi_t^-1 I) by ``component(E[psi_t], E[mu_t])`` (which returns
        those moments, ``log det Cov`` and ``E[log p(x_* | z_*)]``), and q(t) is proportional to
        the exponentiated bound

            E[log q_t] + E[log p(x_* | z_*)] + K E[log psi_t] / 2
            - E[psi_t] E||z_* - mu_t||^2 / 2 + log det Cov(z_* | t) / 2,

        the approximate evidence of x_* under component t (ERRATA 000, section 7, t(n) without
        the label).  Returns ``(E[z | t], E[z z^T | t], q(t))``, shaped (m, c, k), (m, c, k, k)
        and (m, c)."""
        means = self._means
        k = self.n_factors
        Epsi, Emu = means["Epsi"], means["Emu"]
        # E||mu_t||^2; a fit file written without it: the squared posterior mean
        norm_mu = means.get("Enorm_mu", np.sum(Emu**2, axis=1))
        moments = [component(Epsi[t], Emu[t]) for t in range(len(Epsi))]
        Ez = np.stack([z for z, _, _, _ in moments], axis=1)
        EZZ = np.stack([zz for _, zz, _, _ in moments], axis=1)
        logdet = np.stack([d for _, _, d, _ in moments], axis=1)
        loglik = np.stack([ll for _, _, _, ll in moments], axis=1)
        sq = np.trace(EZZ, axis1=2, axis2=3) - 2 * np.einsum("nck,ck->nc", Ez, Emu) + norm_mu
        bound = (
            means["Elogq"] + loglik + 0.5 * k * means["Elogpsi"] - 0.5 * Epsi * sq + 0.5 * logdet
        )
        R = np.exp(bound - bound.max(axis=1, keepdims=True))
        return Ez, EZZ, R / R.sum(axis=1, keepdims=True)

    def transform(self, X):
        """Posterior mean factor scores z_* (n_samples, n_factors) of new samples (with the
        mixture, averaged over the components with their responsibilities)."""
        Ez, _, R = self._infer_new(X)
        return np.einsum("nc,nck->nk", R, Ez) if self.mixture else Ez

    def _task_scores(self, X):
        """Mean and variance of the decision function per task: (n, tasks) each."""
        Ez, EZZ, R = self._infer_new(X)
        means = self._means
        eb, ebb = means["Eb"], means["EBB"]
        t, c, k1 = eb.shape
        if self.mixture:  # each component's classifier on z_* given that component
            m = len(Ez)
            Ezt, EZZt = _with_one(Ez.reshape(m * c, k1 - 1), EZZ.reshape(m * c, k1 - 1, k1 - 1))
            f = np.einsum("nck,tck->ntc", Ezt.reshape(m, c, k1), eb)
            f2 = np.einsum("ncij,tcij->ntc", EZZt.reshape(m, c, k1, k1), ebb)
        else:
            Ezt, EZZt = _with_one(Ez, EZZ)
            sym1 = _Sym(k1)
            f = np.einsum("nk,tck->ntc", Ezt, eb)
            f2 = sym1.inner(sym1.flat(EZZt), sym1.flat(ebb).reshape(t * c, -1)).reshape(-1, t, c)
        var = np.maximum(f2 - f**2, 0.0)
        return f, var, R

    def decision_function(self, X):
        """Score ``E[beta]^T z_* + b`` per task (mixture: ``sum_t q(t) E[beta^(t)]^T E[z_* | t]``
        with the responsibilities q(t) of :meth:`_mixture_scores`, without labels); positive
        favours the second class.

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
