"""Ranks of the training data (paper 000, section 2): the sorted order and tie groups of each
feature, the neighbours w^l, w^u of every entry (ERRATA.md, section 2) and of new values, and the
exact one-entry conditional of the max-margin pseudo-likelihood."""

import functools

import numpy as np
from scipy import special

from ...inference.truncnorm import truncnorm_moments
from .._threads import map_blocks
from ._kernels import _place, _rank_fractions

_PLACE_TASK = 512  # features per call of _place on the worker threads (a multiple of its tile)


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

    def new_neighbours(self, W_t, Xnew_t, bounds="extreme"):
        """Training neighbours ``(w^l, w^u)`` of new values and the typical training w at their
        place (mean over the equal training values, see :func:`._kernels._place`), all
        (n_features, samples): ``W_t`` the fitted training w, ``Xnew_t`` the new values.
        ``bounds``: ``"extreme"``, the running maximum of w over all strictly smaller training
        values and the running minimum over all strictly larger ones (the training neighbours'
        rule, section 2); ``"adjacent"``, the mean w of the nearest tie group below and above.  The
        work is done in the samples' own layout: for ``Xnew_t = X.T`` nothing is copied and
        the outputs' transposes are contiguous.  Groups of features run on the worker threads
        (``_threads.map_blocks``)."""
        if bounds not in ("extreme", "adjacent"):
            raise ValueError(f"prediction_bounds={bounds!r}; expected 'extreme' or 'adjacent'")
        x = np.ascontiguousarray(Xnew_t.T)
        lo, up, typical = (np.empty(x.shape) for _ in range(3))

        def place(f):
            _place(
                self.sorted_t[f],
                self.order_t[f],
                W_t[f],
                x[:, f],
                lo[:, f],
                up[:, f],
                typical[:, f],
                bounds == "adjacent",
            )

        d = x.shape[1]
        map_blocks(place, [slice(i, i + _PLACE_TASK) for i in range(0, d, _PLACE_TASK)])
        return lo.T, up.T, typical.T
