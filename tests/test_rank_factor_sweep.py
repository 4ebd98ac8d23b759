"""The compiled sweep of the latent max-margin w (paper 000, eq. 7 augmentation) against a
plain-numpy reference built from brute-force neighbours and the same counter-based numbers."""

import numpy as np

from omicsbayes.models.rank_factor._kernels import (
    _add_outer,
    _entry_randoms,
    _gaussian_block,
    _margin_sweep,
)
from omicsbayes.models.rank_factor._ranks import _RankIndex


def _reference_sweep(X, ew, wbar, h, index, eps, keys, rho):
    """Both half-sweeps entry by entry: neighbours by brute force over strictly smaller /
    larger x, entries of a parity numbered feature by feature in sorted order, the two-stage
    draw (1/lam ~ IG(1/|u|, 1) by Michael-Schucany-Haas, then w ~ N(m, 1/p)) in numpy."""
    n, d = X.shape
    ew, h = ew.copy(), h.copy()
    ll = 0.0
    for parity, key in zip((0, 1), keys):
        for i in range(d):
            x, w = X[:, i], ew[i].copy()
            rank = np.unique(x, return_inverse=True)[1]
            members = [j for j in index.order_t[i] if rank[j] % 2 == parity]
            r = np.empty((5, len(members)))
            _entry_randoms(
                np.uint64(key), index.parity_offset[parity, i], len(members), r, np.empty(n, bool)
            )
            for s, j in enumerate(members):
                smaller, larger = w[x < x[j]], w[x > x[j]]
                lo = smaller.max() if smaller.size else -np.inf
                up = larger.min() if larger.size else np.inf
                prec, lin = 1.0, wbar[i, j]
                for side, u, bound, sign in (
                    (0, lo + eps - w[j], lo + eps, 1),
                    (1, w[j] + eps - up, up - eps, -1),
                ):
                    if not np.isfinite(bound):
                        continue
                    mu = 1.0 / max(abs(u), 1e-6)
                    a = 0.5 * mu * r[side, s]
                    y = mu / (1.0 + a + np.sqrt(a * (2.0 + a)))
                    il = y if r[2 + side, s] * (mu + y) <= mu else mu * mu / y
                    prec += il
                    lin += il * bound + sign
                    ll -= 2.0 * max(u, 0.0)
                ew[i, j] = lin / prec + r[4, s] / np.sqrt(prec)
    h = (1 - rho) * h + rho * ew
    return ll, np.sum(ew**2), np.sum(h * wbar), np.sum((ew - wbar) ** 2), ew, h


def test_sweep_matches_brute_force_reference_with_ties():
    """Both half-sweeps, the running average and the four sums, with ties, an odd n and
    features split over blocks."""
    rng = np.random.default_rng(1)
    n, d = 15, 70  # more than one block of 64 features
    X = np.round(rng.normal(size=(n, d)), 0)  # many ties
    index = _RankIndex(X)
    ew0, wbar, h0 = rng.normal(size=(3, d, n))
    eps, rho, keys = 0.3, 0.25, np.array([11, 2**63 + 5], dtype=np.uint64)
    ref = _reference_sweep(X, ew0, wbar, h0, index, eps, keys, rho)

    def sweep(ew, h, rho):
        ranks = (index.order_t, index.new_group_t, index.parity_offset, np.array([0, 1]))
        return _margin_sweep(ew, wbar, h, *ranks, eps, keys, rho)

    ew, h = ew0.copy(), h0.copy()
    sums = sweep(ew, h, rho)
    np.testing.assert_allclose(sums, ref[:4], rtol=1e-12)
    np.testing.assert_allclose(ew, ref[4], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h, ref[5], rtol=1e-12, atol=1e-14)
    ew = ew0.copy()  # without a running average (Gibbs): h untouched, the cross sum 0
    sums = sweep(ew, np.empty((0, 0)), 0.0)
    np.testing.assert_allclose(ew, ref[4], rtol=1e-12, atol=1e-14)
    assert sums[2] == 0.0 and np.isclose(sums[3], ref[3], rtol=1e-12)


def test_add_outer_and_gibbs_draw_without_second_matrix():
    """_add_outer adds a_i a_i^T to each row in place; a Gaussian draw without ``second`` is the
    same draw as with it (same random numbers), with no second matrix and no log determinant."""
    rng = np.random.default_rng(4)
    a = rng.normal(size=(37, 5))
    acc = rng.normal(size=(37, 5, 5))
    ref = acc + np.einsum("ik,il->ikl", a, a)
    _add_outer(acc, a)
    np.testing.assert_allclose(acc, ref, rtol=1e-14)
    G = np.cov(rng.normal(size=(5, 40))) + np.eye(5)
    scale, diag = rng.uniform(0.5, 2, size=37), rng.uniform(0.1, 3, size=(37, 5))
    rhs = rng.normal(size=(37, 5))
    x1, outer, logdet1 = _gaussian_block((G, scale, diag), rhs, np.random.default_rng(0), True)
    x2, none, logdet2 = _gaussian_block((G, scale, diag), rhs, np.random.default_rng(0))
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_allclose(outer, x1[:, :, None] * x1[:, None, :], rtol=1e-14)
    assert none is None and logdet1 is None and logdet2 is None
