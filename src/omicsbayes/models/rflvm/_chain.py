"""State and sampler steps of one RFLVM chain (the iteration of the package docstring).

The chain holds the state and the steps shared by every likelihood; what depends on the
likelihood (its log likelihood, gradient, auxiliary-variable step and, for the conjugate
Gaussian, the collapsed z, x and w steps) is the likelihood object chosen once at construction
(:mod:`._likelihoods`), ``self.family``.
"""

import time

import numpy as np

from ...inference.chain import burn_in_of
from ...inference.dp import NIWPrior, escobar_west, sample_dp_assignments, sample_dp_components
from ...inference.ess import elliptical_slice, elliptical_slice_rows
from ...inference.hmc import (
    dual_averaging,
    dual_averaging_final,
    dual_averaging_start,
    find_step_size,
    hmc_step,
)
from ...inference.ibp import ensemble_log_mean, ensemble_pick, ibp_slice_sweep, sample_ibp_alpha
from .._threads import map_blocks
from ._kernels import _grad_latent
from ._likelihoods import likelihood_of
from ._updates import rff, rff_from_arg, rff_from_arg32

STEPS = ("z", "x", "hmc", "dp", "w", "beta")
W_INIT_SCALE = 0.1
W_ROW_BLOCK = 128  # rows per block of the W step's float32 first stage (map_blocks)


class _Chain:
    """State and sampler steps of one RFLVM chain (all arrays whole-matrix numpy)."""

    _NOT_STATE = ("est", "family", "rng", "Y", "obs")

    def __init__(self, est, Y, obs, rng):
        self.est = est
        self.family = likelihood_of(est.likelihood)
        self.sparse = est.sparse
        self.rng = rng
        self.Y = np.where(obs, Y, 0.0)
        self.obs = obs
        self.any_missing = not obs.all()
        self.N, self.J = Y.shape
        self.M = est.n_random_features
        self.n_evals = {
            "ess_rows": 0,
            "ess_whole": 0,
            "ess_w": 0,
            "collapsed_rows": 0,
            "collapsed_z": 0,
            "z_rows64": 0,
            "z_rejected": 0,
        }
        self.accept = [0, 0]
        self.accept_beta = [0, 0]
        self.hmc_step_size = 0.01
        self.hmc_adapt = None  # step_hmc: search pending (None), adapting (tuple), fixed (False)
        self.hmc_accept = [0.0, 0]
        self.burn = burn_in_of(est.burn_in, est.n_iter)
        N, J, M, D = self.N, self.J, self.M, est.n_latent
        self.X = self._init_latent(D)
        self.Z = np.ones((N, D), bool)
        self.alpha = 1.0
        self.pi = rng.beta(N, 1.0, size=D) if self.sparse else np.ones(D)
        # near-linear start: with |w' x| ~ 0.1, phi(x) beta ~ a linear map of the PCA scores
        # (sin u ~ u), so the chain starts where a linear factor model would; from frequencies
        # of scale 1 the PCA scores sit in a random non-linear map and the chain stays far below
        # the linear fit (Wisconsin, Cambridge bars; docs/models.md)
        self.W = W_INIT_SCALE * rng.standard_normal((M, D))
        self.labels = np.zeros(M, int)
        self.eta = 1.0
        self._dp_update()
        self.family.start(self)
        self._refresh_const()
        self.Phi = rff(self.XZ, self.W)
        self.beta = np.zeros((2 * M, J))
        self.step_beta(0)

    def state(self):
        """Every attribute the next iteration reads, less the estimator, its likelihood object,
        the Generator and the data (for a checkpoint)."""
        return {k: v for k, v in self.__dict__.items() if k not in self._NOT_STATE}

    @classmethod
    def restore(cls, est, Y, obs, rng, state):
        """The chain of :meth:`state` on the data ``Y`` (NaN where ``obs`` is False)."""
        chain = cls.__new__(cls)
        chain.__dict__.update(state)
        chain.est, chain.rng, chain.obs = est, rng, obs
        chain.family = likelihood_of(est.likelihood)
        chain.Y = np.where(obs, Y, 0.0)
        return chain

    # ------------------------------------------------------------------ helpers
    def _init_latent(self, D):
        """PCA scores of the (column-mean imputed, variance-stabilised) data, unit variance."""
        Y = self.family.stabilise(self.Y.copy())
        mean = np.sum(np.where(self.obs, Y, 0), 0) / np.maximum(self.obs.sum(0), 1)
        Yc = np.where(self.obs, Y, mean) - mean
        U, S, _ = np.linalg.svd(Yc, full_matrices=False)
        X = np.zeros((self.N, D))
        k = min(D, U.shape[1])
        X[:, :k] = U[:, :k] * S[:k]
        sd = X.std(axis=0)
        X[:, sd > 0] /= sd[sd > 0]
        X[:, sd == 0] = self.rng.standard_normal((self.N, int(np.sum(sd == 0))))
        return X

    @property
    def XZ(self):
        return self.X * self.Z

    @property
    def D(self):
        return self.X.shape[1]

    def _refresh_const(self):
        """The likelihood's constants at the current parameters (:meth:`Likelihood.constants`)."""
        self._obsf = self.obs.astype(float)
        self._logit_weight, self.const_rows = self.family.constants(self)

    def psi_of(self, Phi):
        return Phi @ self.beta

    def row_loglik(self, psi, rows=None):
        """Per-row log p(y_i | psi_i, theta) over the observed entries of rows ``rows``."""
        return self.family.row_loglik(self, psi, rows)

    # ------------------------------------------------------------------ steps
    def step_z(self, it):
        """IBP slice sweep (eq. 16-19), the active weights (eq. 18) and alpha (eq. 20): the
        likelihood's z step (:meth:`Likelihood.step_z`; given beta: :meth:`_z_given_beta`,
        Gaussian: collapsed), then the surviving columns of every variable and alpha."""
        if not self.sparse:
            return
        keep = self.family.step_z(self)
        self.X = self.X[:, keep]
        self.W = self.W[:, keep]
        self.mus = self.mus[:, keep]
        self.Sigmas = self.Sigmas[:, keep][:, :, keep]
        self.Phi = rff(self.XZ, self.W)
        a0, b0 = self.est.ibp_alpha_prior
        self.alpha = sample_ibp_alpha(self.D, self.N, a0, b0, self.rng)

    def _z_given_beta(self):
        """The slice sweep of :func:`ibp_slice_sweep` with the likelihood given beta; sets Z and
        pi (surviving columns) and returns which columns of the extended matrix survive.

        With a first stage (:meth:`Likelihood.first_stage`: Bernoulli and negative binomial;
        delayed acceptance, as in :meth:`step_w`): column k's state s = (z_ik, ensemble index
        c_i)_i is proposed from its conditional q under the float32 likelihood of the first
        stage (``n_x_proposals`` + 1 per row) and accepted
        with probability min(1, [p(s') / q(s')] / [p(s) / q(s)]), p the float64 conditional:
        Metropolis-Hastings with an independence proposal, exact. p / q is a product over the
        rows of exp(ll - ll~) at each row's own state (prior and slice factors cancel), so only
        the rows whose state changes enter, and only their float64 likelihoods are computed.
        Other likelihoods draw from the float64 conditional directly.
        """
        rng = self.rng
        n_prop = self.est.n_x_proposals
        first_stage = self.family.first_stage(self)
        screen = first_stage is not None
        if screen:
            beta32 = self.beta.astype(np.float32)
            ll_cur = self.row_loglik(self.psi_of(rff(self.XZ, self.W)))  # float64, per row

            def rows_ll(G):
                return first_stage(rff_from_arg32(G) @ beta32)

        else:

            def rows_ll(G):
                return self.row_loglik(self.psi_of(rff_from_arg(G)))

        def on_new(n_new):
            self.X = np.hstack([self.X, rng.standard_normal((self.N, n_new))])
            self._extend_w(n_new)

        cand = {}

        def column_loglik(k, Z):
            """Rows' log likelihoods with z_ik = 0 and, for z_ik = 1, the mean likelihood over
            the ensemble {current x_ik, n_x_proposals - 1 draws from N(0, 1)}."""
            G = (self.X * Z) @ self.W.T
            base = G - np.outer(self.X[:, k] * Z[:, k], self.W[:, k])
            xs = np.vstack([self.X[:, k], rng.standard_normal((n_prop - 1, self.N))])
            # the n_prop + 1 likelihoods are independent: on the worker threads (map_blocks)
            *ll_on, ll_off = map_blocks(
                rows_ll, [base + np.outer(x, self.W[:, k]) for x in xs] + [base]
            )
            ll_on = np.stack(ll_on)
            cand.update(x=xs, ll=ll_on, off=ll_off, Z=Z, z=Z[:, k].copy())
            return ll_off, ensemble_log_mean(ll_on)

        def on_column(k, z):
            pick = ensemble_pick(cand["ll"], z, rng)
            if screen:
                z0 = cand["z"]
                rows = np.flatnonzero((z != z0) | (z & (pick > 0)))  # rows whose state moves
                if rows.size:
                    XZ = self.X[rows] * cand["Z"][rows]
                    XZ[:, k] = cand["x"][pick[rows], rows] * z[rows]
                    ll_new = self.row_loglik(self.psi_of(rff_from_arg(XZ @ self.W.T)), rows)
                    ll = cand["ll"]
                    q_new = np.where(z[rows], ll[pick[rows], rows], cand["off"][rows])
                    q_old = np.where(z0[rows], ll[0, rows], cand["off"][rows])
                    log_r = np.sum(ll_new - q_new - ll_cur[rows] + q_old)
                    ev = self.n_evals  # .get: older checkpoints lack these keys
                    ev["z_rows64"] = ev.get("z_rows64", 0) + rows.size
                    if np.log(rng.uniform()) < log_r:
                        ll_cur[rows] = ll_new
                    else:  # keep the column: z is the sweep's own column (a view)
                        z[:] = z0
                        pick[:] = 0
                        ev["z_rejected"] = ev.get("z_rejected", 0) + 1
            self.X[:, k] = cand["x"][pick, np.arange(self.N)]

        Z, pi, keep = ibp_slice_sweep(
            self.Z,
            self.pi,
            self.alpha,
            self.rng,
            column_loglik=column_loglik,
            on_new=on_new,
            on_column=on_column,
        )
        self.Z, self.pi = Z, pi
        return keep

    def _extend_w(self, n_new):
        """New latent dimensions: each component gets a new mean coordinate and variance from the
        one-dimensional margins of its NIW prior (Sigma block-diagonal in the new coordinate;
        nu0 = d + 2 gives an IG(3/2, 1/2) diagonal), and each w_m a new coordinate from its
        component."""
        K = self.mus.shape[0]
        for _ in range(n_new):
            var = 1.0 / self.rng.gamma(1.5, 2.0, size=K)
            mu = self.rng.standard_normal(K) * np.sqrt(var)
            col = mu[self.labels] + np.sqrt(var[self.labels]) * self.rng.standard_normal(self.M)
            self.W = np.hstack([self.W, col[:, None]])
            self.mus = np.hstack([self.mus, mu[:, None]])
            d = self.Sigmas.shape[1]
            S = np.zeros((K, d + 1, d + 1))
            S[:, :d, :d] = self.Sigmas
            S[:, d, d] = var
            self.Sigmas = S

    def step_x(self, it):
        """X: the likelihood's x step (:meth:`Likelihood.step_x`): given beta, row-wise ESS of
        all rows in parallel (:meth:`_ess_rows`); Gaussian: collapsed sweeps around it."""
        self.family.step_x(self)

    def _ess_rows(self):
        """One elliptical slice step of every row of X given beta, all rows in parallel."""
        Z, W = self.Z, self.W

        def rows_ll(Xr, idx):
            return self.row_loglik(rff(Xr * Z[idx], W) @ self.beta, idx)

        self.X, _, n = elliptical_slice_rows(
            self.X,
            self.rng.standard_normal(self.X.shape),
            rows_ll,
            self.rng,
            max_shrink=self.est.max_shrink,
        )
        self.n_evals["ess_rows"] += n
        self.Phi = rff(self.XZ, W)

    def _log_target_xw(self, X, W, chol_inv):
        """log p(X, W | rest) up to a constant (float64: the Metropolis target of the HMC step).

        The likelihood's target (:meth:`Likelihood.target`: log p(y | Phi beta) given beta; the
        Gaussian's collapsed likelihood of the completed data), plus the priors N(0, I) on x_i
        and N(mu_k, Sigma_k) on w_m given its mixture component (``chol_inv`` the inverse
        Cholesky factors).
        """
        value = self.family.target(self, rff(X * self.Z, W))
        white = np.einsum("mij,mj->mi", chol_inv, W - self.mus[self.labels])
        return float(value - 0.5 * np.sum(X * X) - 0.5 * np.sum(white * white))

    def _grad_prep(self):
        """The data and parameters the HMC gradient reads (:meth:`Likelihood.grad_prep`)."""
        return self.family.grad_prep(self)

    def _grad_xw(self, X, W, chol_inv, prep):
        """Gradient of :meth:`_log_target_xw` with respect to X and W (``prep`` from
        :meth:`_grad_prep`). The likelihood gives d/dPhi (:meth:`Likelihood.grad_phi`; the
        Gaussian and logistic links in float32: the HMC kicks need only a deterministic
        function of the position, :func:`hmc_step`, the Metropolis step uses the float64
        target). Then Phi = [cos G, sin G] / sqrt(M), G = (X * Z) W^T, so d/dX = (dG W) * Z and
        d/dW = dG^T (X * Z); the priors add -x and -Sigma_k^-1 (w_m - mu_k)
        (:func:`_grad_latent`).
        """
        Z = self.Z
        Phi, d_phi = self.family.grad_phi(self, (X * Z) @ W.T, prep)
        return _grad_latent(d_phi, Phi, X, Z, W, self.mus[self.labels], chol_inv)

    def step_hmc(self, it):
        """``hmc_moves`` Hamiltonian Monte Carlo transitions on (X, W) jointly (Neal 2011),
        ``hmc_leapfrog`` leapfrog steps each, under :meth:`_log_target_xw` with Z, the mixture
        assignments and parameters, c and the completed data held fixed. The gradient moves
        every latent coordinate and every frequency at once along the likelihood, where the
        elliptical slice steps shrink toward the current state once the posterior is much
        narrower than the prior. The step size is found at the chain's first call
        (:func:`find_step_size`: one leapfrog step accepting with probability about 1/2), adapts
        by dual averaging toward an acceptance probability of 0.7 during burn-in only, is fixed
        to the averaged step afterwards (a checkpoint that holds no adaptation state keeps the
        step it stored) and is jittered by U(0.8, 1.2) per move."""
        if self.D == 0 or self.est.hmc_moves == 0:
            return
        chol_inv = np.linalg.inv(np.linalg.cholesky(self.Sigmas))[self.labels]
        prep = self._grad_prep()

        def log_target(X, W):
            return self._log_target_xw(X, W, chol_inv)

        def grad(X, W):
            return self._grad_xw(X, W, chol_inv, prep)

        adapt = getattr(self, "hmc_adapt", False)
        if adapt is None:  # a new chain's first call
            xw, eps = (self.X, self.W), self.hmc_step_size
            self.hmc_step_size = find_step_size(xw, log_target, grad, eps, self.rng)
            adapt = dual_averaging_start(self.hmc_step_size)
        if it >= self.burn and adapt:
            self.hmc_step_size, adapt = dual_averaging_final(adapt), False
        for _ in range(self.est.hmc_moves):
            eps = self.hmc_step_size * self.rng.uniform(0.8, 1.2)
            (self.X, self.W), prob = hmc_step(
                (self.X, self.W), log_target, grad, eps, self.est.hmc_leapfrog, self.rng
            )
            self.hmc_accept[0] += prob
            self.hmc_accept[1] += 1
            if adapt:
                adapt, self.hmc_step_size = dual_averaging(adapt, prob)
        self.hmc_adapt = adapt
        self.Phi = rff(self.XZ, self.W)

    def _dp_update(self):
        prior = NIWPrior(self.D)
        if self.D:
            self.labels = sample_dp_assignments(self.W, self.labels, self.eta, prior, self.rng)
            self.mus, self.Sigmas = sample_dp_components(self.W, self.labels, prior, self.rng)
        else:
            self.labels = np.zeros(self.M, int)
            self.mus, self.Sigmas = np.zeros((1, 0)), np.zeros((1, 0, 0))
        a, b = self.est.dp_eta_prior
        self.eta = float(escobar_west(self.eta, self.labels.max() + 1, self.M, a, b, self.rng))

    def step_dp(self, it):
        """DP mixture over the frequencies (eq. 22-24) and its concentration (eq. 25)."""
        self._dp_update()

    def step_w(self, it):
        """Metropolis-Hastings for each frequency with the prior as proposal (eq. 21), by the
        likelihood's step (:meth:`Likelihood.step_w`: given beta, :meth:`_w_given_beta`;
        Gaussian: collapsed), then one elliptical slice step on all frequencies
        (:meth:`_w_ess`)."""
        if self.D == 0:
            return
        M, rng = self.M, self.rng
        chol = np.linalg.cholesky(self.Sigmas)
        eps = rng.standard_normal((M, self.D))
        prop = self.mus[self.labels] + np.einsum("mij,mj->mi", chol[self.labels], eps)
        log_u = np.log(rng.uniform(size=M))
        self.family.step_w(self, prop, log_u)
        self.Phi = rff(self.XZ, self.W)
        self._w_ess(chol)

    def _w_given_beta(self, prop, log_u):
        """The frequency step of :meth:`step_w` given beta, each w_m moved to ``prop[m]`` when
        ``log_u[m]`` is below its log likelihood ratio.

        With a first stage (:meth:`Likelihood.first_stage`: Bernoulli and negative binomial):
        delayed acceptance (Christen & Fox 2005) with the float32 log likelihood as the first
        stage, exact: a proposal passes the first stage with probability min(1, exp(d~)) (d~ its
        change of the approximate log likelihood) and is then accepted with probability
        min(1, exp(d - d~)) (d the change of the exact one), so the exact likelihood is
        evaluated only for the few proposals the approximation would accept.
        """
        M, rng = self.M, self.rng
        XZ = self.XZ
        Phi = self.Phi
        psi = self.psi_of(Phi)
        cur = self.row_loglik(psi).sum()
        first_stage = self.family.first_stage(self)
        screen = first_stage is not None
        if screen:

            def approx(psi):
                return float(first_stage(psi.astype(np.float32)).sum())

            psi2 = np.empty_like(psi)

            def propose_rows(rows):
                """psi2 = psi + delta beta_m on ``rows``, and their float32 likelihood."""
                np.add(psi[rows], delta[rows] @ beta_m, out=psi2[rows])
                return first_stage(psi2[rows].astype(np.float32), rows).sum()

            row_blocks = [slice(i, i + W_ROW_BLOCK) for i in range(0, self.N, W_ROW_BLOCK)]
            cur_s = approx(psi)
            log_u2 = np.log(rng.uniform(size=M))
        for m in range(M):
            idx = [m, M + m]
            g = XZ @ prop[m]
            new_cols = np.column_stack([np.cos(g), np.sin(g)]) / np.sqrt(M)
            old_cols = Phi[:, idx].copy()
            delta, beta_m = new_cols - old_cols, self.beta[idx]
            if screen:  # row blocks on the worker threads (map_blocks)
                ll_s = float(np.sum(map_blocks(propose_rows, row_blocks)))
                take = log_u[m] < ll_s - cur_s
                if take:
                    ll = self.row_loglik(psi2).sum()
                    take = log_u2[m] < (ll - cur) - (ll_s - cur_s)
            else:
                psi2 = psi + delta @ beta_m
                ll = self.row_loglik(psi2).sum()
                take = log_u[m] < ll - cur
            if take:
                psi, psi2, cur = psi2, psi, ll
                if screen:
                    cur_s = ll_s
                Phi[:, idx] = new_cols
                self.W[m] = prop[m]
                self.accept[0] += 1
            self.accept[1] += 1

    def _w_ess(self, chol):
        """An extra elliptical slice step on all frequencies at once under their mixture
        components' Gaussians, on the likelihood's target (:meth:`Likelihood.target`: given
        beta; Gaussian: collapsed). Leaves the same conditional invariant as (21); the
        prior-proposal MH step alone accepts a few per cent of proposals, this step always
        moves."""
        XZ = self.XZ

        def ll(Wc):
            return self.family.target(self, rff(XZ, Wc))

        nu = np.einsum("mij,mj->mi", chol[self.labels], self.rng.standard_normal(self.W.shape))
        self.W, _, n = elliptical_slice(
            self.W, nu, ll, self.rng, mean=self.mus[self.labels], max_shrink=self.est.max_shrink
        )
        self.n_evals["ess_w"] += n
        self.Phi = rff(XZ, self.W)

    def step_beta(self, it):
        """Regression weights and likelihood parameters given X, Z, W: the likelihood's
        auxiliary-variable step (:meth:`Likelihood.step_beta`)."""
        self.family.step_beta(self)

    def log_lik(self):
        """Log likelihood of the observed entries at the current state (beta and theta given)."""
        return float(self.row_loglik(self.psi_of(self.Phi)).sum())

    def snapshot(self):
        theta = self.family.theta(self)
        return {
            "XZ": self.XZ.copy(),
            "W": self.W.copy(),
            "beta": self.beta.copy(),
            "theta": theta,
        }

    # ------------------------------------------------- the sampler of inference.chain.run_chain
    @classmethod
    def start(cls, est, Y, obs, rng, state):
        """A new chain (``state`` None; its set-up time in ``secs["init"]``) or a restored one."""
        if state is not None:
            return cls.restore(est, Y, obs, rng, state)
        t0 = time.perf_counter()
        chain = cls(est, Y, obs, rng)
        chain.secs = dict.fromkeys(STEPS, 0.0)
        chain.secs["init"] = time.perf_counter() - t0
        return chain

    def sweep(self, it):
        """One iteration: the steps of the module docstring in order, each timed."""
        for name in STEPS:
            ts = time.perf_counter()
            getattr(self, f"step_{name}")(it)
            self.secs[name] += time.perf_counter() - ts
        self.ll = self.log_lik()
        return {"log_likelihood": self.ll, "n_active": self.D}

    def draw(self):
        # each sample's linear predictor averaged over features: identified (unlike X, W, beta)
        mean = rff(self.XZ, self.W) @ self.beta.mean(axis=1)
        stats = (self.alpha, self.eta, self.D, self.labels.max() + 1, self.ll)
        return self.snapshot(), stats, mean

    def final(self):
        return {
            "acceptance_rate": self.accept[0] / max(self.accept[1], 1),
            "hmc_acceptance": self.hmc_accept[0] / max(self.hmc_accept[1], 1),
            "hmc_step_size": self.hmc_step_size,
            "step_seconds": self.secs,
            "ess_evals": dict(self.n_evals),
            "row_totals": self.family.row_totals(self),
        }
