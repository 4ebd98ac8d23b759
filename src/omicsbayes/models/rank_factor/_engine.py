"""The VB / Gibbs engine of the rank factor model (paper 000): state and conjugate block updates
of one fit (:class:`_Engine`), one Gibbs chain for :func:`~omicsbayes.inference.chain.run_chain`
(:class:`_GibbsSampler`) and the scores of new samples with the loadings fixed
(:func:`_newton_scores`).  The shared P / H form of the likelihoods is described in
:mod:`omicsbayes.models.rank_factor`."""

import numpy as np
from scipy import linalg, special
from threadpoolctl import threadpool_limits

from ...inference.bsvm import (
    expected_hinge,
    expected_inv_lambda,
    sample_inv_lambda,
)
from ...inference.stick_breaking import (
    alpha_posterior,
    expected_log_1m_nu,
    expected_log_weights,
    sample_categorical,
    stick_posterior,
    stick_weights,
)
from ...inference.tpbn import TPBNShrinkage
from ...inference.truncnorm import sample_truncnorm, truncnorm_moments
from .._threads import map_blocks
from ._kernels import _add_outer, _gaussian_block, _margin_sweep
from ._ranks import _RankIndex

_LOG2PI = np.log(2 * np.pi)
_BLOCK = 1 << 23  # entries of a^T z held at once by the latent max-margin step
_SWEEP_TASK = 512  # features per call of the margin sweep on the worker threads (map_blocks)
_PARITIES = np.array([0, 1])  # both half-sweeps of the latent max-margin w, in this order
_SHRINKS = 6  # quarterings of a Newton step for new samples' scores before the EM step
_START_SAMPLES = 128  # new samples solved first to map the others' starts (_newton_scores)


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
        # The paper's deterministic VB (supplement section 8, item 3) sets each scale variable
        # from the means of its hinge residual, <1/lam> = |<u>|^-1 (floored, RESIDUAL_FLOOR),
        # for the rank neighbours (lam^l, lam^u) and the Bayesian SVM (lam^c) alike; inference
        # "vb" uses the mean-field second moment E[u^2]^(-1/2) (ERRATA 000, sections 7-8).
        self.plugin = est.inference == "vb_deterministic"
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
            if self.like == "maxmargin_rank" and est._form == "latent":
                # w and (VB) its running average in (features, samples) layout, as the sweep
                # walks them (w starts as the scores: the sweep changes it only after the set-up
                # below); Gibbs uses the draw itself
                self.Ew_t = init_t
                if not gibbs:
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
        if self.est._form == "latent":
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
        if self.plugin:
            var = 0.0
        elif var is None:
            var = self.sym.inner(self.sym.flat(self.EZZ), self.sym.flat(self.EAA)) - w**2
            var = np.maximum(var, 0.0)
        il = np.where(has_l, expected_inv_lambda(u_l**2 + var), 0.0)
        iu = np.where(has_u, expected_inv_lambda(u_u**2 + var), 0.0)
        if self.plugin:  # the hinge at the means, as the scale variables
            hinge = np.where(has_l, np.maximum(u_l, 0), 0) + np.where(has_u, np.maximum(u_u, 0), 0)
            return il, iu, float(-2.0 * hinge.sum())
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
        # Blocks of features keep a^T z (computed once per block) to a few million entries at
        # once; features are independent given A and Z, so each block does both half-sweeps and
        # its part of the average, and the blocks run on the worker threads (map_blocks; at most
        # _SWEEP_TASK features each, fixed by the shape).  The random numbers come from a
        # counter-based stream inside the compiled sweep, one uint64 key per half-sweep drawn
        # from the estimator's Generator, so neither blocks nor threads change them.
        ix = self.index
        rows = max(1, min(_BLOCK // self.n, _SWEEP_TASK))
        keys = self.rng.integers(0, 2**64, size=2, dtype=np.uint64, endpoint=False)
        if self.gibbs:
            rho, average = 0.0, np.empty((0, 0))  # no running average
        else:
            self.n_draws += 1
            rho, average = 10.0 / (self.n_draws + 9), self.H_t

        def sweep(block):
            return _margin_sweep(
                self.Ew_t[block],
                self.Ea[block] @ self.Ez.T,
                average[block],
                ix.order_t[block],
                ix.new_group_t[block],
                ix.parity_offset[:, block],
                _PARITIES,
                eps,
                keys,
                rho,
            )

        blocks = [slice(i, i + rows) for i in range(0, self.d, rows)]
        ll = resid2 = sum_w2 = cross = 0.0
        for b_ll, b_w2, b_cross, b_resid2 in map_blocks(sweep, blocks):
            ll += b_ll
            sum_w2 += b_w2
            cross += b_cross
            resid2 += b_resid2
        self.P = np.ones((1, self.d))
        if self.gibbs:
            self.H = self.Ew_t.T
            self.data_ll = ll - 0.5 * resid2 - 0.5 * _LOG2PI * self.Ew_t.size
            return
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
        if self.P.shape[0] == 1:  # S_i = P_i sum_n E[z_n z_n^T] + diag(prec_i), never formed
            S = (self.EZZ.sum(axis=0), self.P[0], prec)
        else:
            S = self.sym.unflat(self.P.T @ self.sym.flat(self.EZZ))
            S[:, np.arange(self.k), np.arange(self.k)] += prec
        rhs = (self.Ez.T @ self.H).T  # (K x n)(n x d): 1.4x faster than H^T Z at 334 x 4,732
        # a Gibbs draw keeps no d x K x K second moments: update_z forms what it needs from A
        self.Ea, self.EAA, self.logdet_a = _gaussian_block(
            S, rhs, self.rng if self.gibbs else None, second=not self.gibbs
        )

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
                self.Pc = expected_inv_lambda(u**2 + (0.0 if self.plugin else var))
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
        eb, ebb, self.logdet_b = _gaussian_block(
            S, rhs, self.rng if self.gibbs else None, second=True
        )
        self.Eb = eb.reshape(t, c, k + 1)
        self.EBB = ebb.reshape(t, c, k + 1, k + 1)
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
            if self.gibbs:  # sum_i P_i a_i a_i^T
                G = (self.Ea * self.P[0][:, None]).T @ self.Ea
            else:
                G = np.einsum("i,ikl->kl", self.P[0], self.EAA)
            S = np.broadcast_to(G, (n, k, k)).copy()
        else:
            eaa = self.Ea[:, :, None] * self.Ea[:, None, :] if self.gibbs else self.EAA
            S = self.sym.unflat(self.P @ self.sym.flat(eaa))
        mask = self.R[:, None, :] * self.O[:, :, None]
        W = (mask * self.Pc).reshape(n, t * c)
        ebb = self.EBB.reshape(t * c, k + 1, k + 1)
        S += self.sym.unflat(W @ self.sym.flat(ebb[:, :k, :k]))
        S[:, np.arange(k), np.arange(k)] += psibar[:, None]
        eb = self.Eb.reshape(t * c, k + 1)
        # A^T H^T, transposed: the sum over the (long) feature axis as the inner dimension of
        # (K x d)(d x n) runs twice as fast as H (n x d) A with H the transpose of the sweep's w
        rhs = rhs + (self.Ea.T @ self.H.T).T
        rhs += (mask * self.Hc).reshape(n, t * c) @ eb[:, :k] - W @ ebb[:, :k, k]
        self.Ez, self.EZZ, self.logdet_z = _gaussian_block(
            S, rhs, self.rng if self.gibbs else None, second=True
        )
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


def _newton_scores(moments, Ea, EAA, typical, max_iter, prior_precision=1.0, prior_mean=None):
    """Scores z_* of new samples with the loadings fixed (section 3, "Predictions"), for a rank
    likelihood: each z_* maximises

        L(z) = sum_i log Z_i(a_i^T z) - z^T C z / 2 - psi ||z - mu||^2 / 2,   C = sum_i Cov(a_i),

    with ``Z_i(mu)`` the normaliser of N(w; mu, 1) times the pseudo-likelihood of w given its
    training neighbours (``moments(mu, rows)`` -> E[w], Var(w) and row sums of log Z for the
    new samples ``rows``, all (samples, features)) and the prior N(mu, psi^-1 I) of z_*
    (``prior_mean`` mu, default 0, and ``prior_precision`` psi, default 1: the linear model's
    N(0, I); a component of the DP mixture otherwise).  Its stationary point is the fixed point
    of the VB update ``z = S^-1 (A^T E[w] + psi mu)``, ``S = sum_i E[a_i a_i^T] + psi I``; L is
    concave (log Z_i is, the pseudo-likelihood being log-concave), with Hessian ``-(S - A^T
    diag(Var w) A)``.
    The start is the VB update with E[w] replaced by ``typical`` (samples, features), the mean
    training w at each new value's place: from z = 0 the first Newton steps on single-cell
    counts overshot over 64-fold and took 26 evaluations a sample instead of 4.  With at
    least 4 x c samples, c = max(``_START_SAMPLES``, 4 (K + 1)), c evenly spaced ones are
    solved first, and the least-squares affine map from their starts to their scores moves the
    others' starts (only the start changes, not the maximiser): on single-cell counts it brings
    the start from about 280 to 30 tolerances of the scores and the evaluations from 3 to 2.
    Newton steps, each checked against L, quartered up to six times where L would not increase
    (with many ties, as in single-cell counts, the curvature at the start is far below that
    along the step, which overshoots) and then replaced by the VB (EM) step; a sample stops
    when its z_* moves by less than the tolerance, 1e-3 of the mean magnitude of all z_* (a
    Newton step that small is taken unchecked), or when, after a full Newton step, a step of
    up to 20 tolerances leaves less than a quarter of the tolerance to go by the quadratic
    convergence of Newton's method (next step about size^3 / previous^2): it is taken
    unchecked and ends the sample.  The steps were about 240, 2.6 and 0.001 tolerances at 334
    x 4,732 and 230, 66, 8 and 0.13 on single-cell counts: this saves the last of 3 or 4
    evaluations and moves z_* by at most a quarter of the tolerance.  Returns ``(E[z], Cov(z)
    = S^-1)`` per sample.
    """
    d, k = Ea.shape
    S = EAA.sum(axis=0) + prior_precision * np.eye(k)
    _, cov, _ = _gaussian_block(S[None], np.zeros((1, k)))
    CI = S - Ea.T @ Ea
    shift = np.zeros(k) if prior_mean is None else prior_precision * np.asarray(prior_mean)
    sym = _Sym(k)
    aa_flat = sym.flat(Ea[:, :, None] * Ea[:, None, :]).astype(np.float32)
    z = (typical @ Ea + shift) @ cov[0]  # the VB step as if E[w] were the typical training w

    def objective(log_z, z):  # L up to a constant
        return log_z - 0.5 * np.einsum("nk,kl,nl->n", z, CI, z) + z @ shift

    def solve(active):  # Newton steps for the samples ``active``, updating z in place
        mean, var, log_z = moments(z[active] @ Ea.T, active)
        value = objective(log_z, z[active])
        previous = np.full(len(active), np.nan)  # each one's last full Newton step (NaN: none)
        for _ in range(max_iter):
            grad = mean @ Ea - z[active] @ S + shift
            # -Hessian S - A^T diag(Var w) A = CI + A^T diag(1 - Var w) A: the second term, positive
            # semi-definite, in float32 (it only shapes the step; the fixed point is the gradient's)
            hess = CI + sym.unflat(np.subtract(1.0, var, dtype=np.float32) @ aa_flat)
            step, _, _ = _gaussian_block(hess, grad)
            # A Newton step below the tolerance is taken and ends that sample, without the check
            # against L (at the maximum of a concave L the step only shrinks); so is one of up to
            # 20 tolerances when, after a full Newton step, the quadratic convergence of Newton's
            # method puts the next step (size^3 / previous^2, never with NaN) below a quarter of it.
            tol = 1e-3 * max(1.0, float(np.abs(z).mean()))
            size = np.max(np.abs(step), axis=1)
            done = (size < tol) | ((size < 20 * tol) & (size * (size / previous) ** 2 < 0.25 * tol))
            z[active[done]] += step[done]
            if done.any():
                keep = ~done
                active, mean, var, value, step, size = (
                    a[keep] for a in (active, mean, var, value, step, size)
                )
            if not active.size:
                return
            new = z[active] + step
            new_mean, new_var, log_z = moments(new @ Ea.T, active)
            new_value = objective(log_z, new)
            worse = new_value < value
            previous = np.where(worse, np.nan, size)  # shortened or replaced steps are not Newton's
            for _ in range(_SHRINKS):  # shorten the Newton step where L would decrease
                if not worse.any():
                    break
                step[worse] *= 0.25
                new[worse] = z[active[worse]] + step[worse]
                new_mean[worse], new_var[worse], log_z = moments(new[worse] @ Ea.T, active[worse])
                new_value[worse] = objective(log_z, new[worse])
                worse = new_value < value
            if worse.any():  # the VB step never decreases L (it is an EM step in w)
                new[worse] = (mean[worse] @ Ea + shift) @ cov[0]
                new_mean[worse], new_var[worse], log_z = moments(new[worse] @ Ea.T, active[worse])
                new_value[worse] = objective(log_z, new[worse])
            change = np.max(np.abs(new - z[active]), axis=1)
            z[active] = new
            moving = change >= 1e-3 * max(1.0, float(np.abs(z).mean()))
            mean, var, value = new_mean, new_var, new_value
            if not moving.all():
                active, mean, var, value, previous = (
                    a[moving] for a in (active, mean, var, value, previous)
                )
            if not active.size:
                return

    n = len(z)
    count = max(_START_SAMPLES, 4 * (k + 1))  # at least 4 per coefficient of the map
    if n < 4 * count:
        solve(np.arange(n))
    else:
        first = np.linspace(0, n - 1, count).astype(int)
        rest = np.setdiff1d(np.arange(n), first)
        start = np.column_stack([z, np.ones(n)])
        solve(first)
        z[rest] = start[rest] @ np.linalg.lstsq(start[first], z[first], rcond=None)[0]
        solve(rest)
    return z, np.broadcast_to(cov, (len(z), k, k))


class _GibbsSampler:
    """One Gibbs chain of :class:`RankFactorClassifier` for
    :func:`~omicsbayes.inference.chain.run_chain`: the sweep is ``_iterate``; each kept draw
    adds to running sums of the moments prediction reads (``a_i a_i^T`` added in place, never
    formed) and returns the draws of ``idata_``."""

    def __init__(self, est, eng):
        self.est, self.eng = est, eng
        self.sums, self.count = {}, 0
        self.keep_loadings = est.n_features_in_ * est.n_factors * est.n_samples <= 5_000_000

    @staticmethod
    def current(est, eng):
        """The moments prediction reads, at the engine's current state."""
        out = {"Ea": eng.Ea, "Ez": eng.Ez, "Eb": eng.Eb, "EBB": eng.EBB}
        if not eng.gibbs:
            out["EAA"] = eng.EAA
        out["W"] = est._train_w(eng)
        if est.mixture:
            out.update(
                Emu=eng.Emu,
                Enorm_mu=eng.Enorm_mu,
                Epsi=eng.Epsi,
                Elogpsi=eng.Elogpsi,
                Elogq=eng.Elogq,
                R=eng.R,
            )
        return out

    def sweep(self, it):
        return {"log_likelihood": self.est._iterate(self.eng, it)}

    def draw(self):
        eng, k = self.eng, self.est.n_factors
        current = self.current(self.est, eng)
        if self.est.mixture:
            current["q"] = np.exp(current.pop("Elogq"))
        for key, val in current.items():  # running sums in place (W is n x d)
            if key in self.sums:
                self.sums[key] += val
            else:
                self.sums[key] = np.array(val, dtype=float)
        if "EAA" not in self.sums:
            self.sums["EAA"] = np.zeros(eng.Ea.shape + (k,))
        _add_outer(self.sums["EAA"], eng.Ea)
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
