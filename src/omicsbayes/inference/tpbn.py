"""Three-parameter-beta-normal (TPBN) global-local shrinkage block (Armagan et al. 2011).

Hierarchy (paper 000, section 6, with the conditionals corrected as in ERRATA.md, section 7)::

    theta[b, g, m] ~ N(0, xi[b, g, m])
    xi[b, g, m]    ~ Ga(r, eta[b, g, m])            (shape, rate)
    eta[b, g, m]   ~ Ga(s, Phi[b, g])
    Phi[b, g]      ~ Ga(1/2, Phi_tilde[b])
    Phi_tilde[b]   ~ Ga(1/2, 1)

``b`` indexes independent blocks, ``g`` the groups that own a global scale and ``m`` the members
of a group.  Loadings A (d x K) with a global scale per column are one block of K groups of d
members (``theta = A.T[None]``); the coefficients of T classifier tasks are T blocks of one group
of K members.  ``r = s = 1/2`` is the horseshoe.

Conditionals (derived from the joint density)::

    xi        | .  ~ GIG(2 eta, theta^2, r - 1/2)
    eta       | .  ~ Ga(r + s, xi + Phi)
    Phi       | .  ~ Ga(1/2 + s M, Phi_tilde + sum_m eta)       (ERRATA: no 1/2 before the sum)
    Phi_tilde | .  ~ Ga(1/2 + G/2, 1 + sum_g Phi)                (ERRATA: printed Ga(1, ...))

The mean-field VB updates replace each conditioning variable by its expectation and
``theta^2`` by ``E[theta^2]`` (paper 000, section 8, with the Bessel ratios of ERRATA.md).
"""

import numpy as np

from .gig import gig_mean_and_inverse_mean, sample_gig_vectorised

_FLOOR = 1e-12


class TPBNShrinkage:
    """State of a TPBN block; ``prior_precision`` is what the coefficient update needs.

    Parameters
    ----------
    shape : tuple of int
        ``(n_blocks, n_groups, n_members)``.
    r, s : float
        TPBN shape parameters (``r = s = 1/2``: horseshoe).

    Attributes
    ----------
    prior_precision : ndarray of shape ``shape``
        ``E[1/xi]`` after a VB update, ``1/xi`` after a Gibbs update.
    """

    def __init__(self, shape, r=0.5, s=0.5):
        if r <= 0 or s <= 0:
            raise ValueError(f"TPBN shape parameters r and s must be > 0, got r={r}, s={s}")
        self.shape = tuple(shape)
        self.r = float(r)
        self.s = float(s)
        n_blocks, n_groups, _ = self.shape
        self.xi = np.ones(self.shape)
        self.prior_precision = np.ones(self.shape)
        self.eta = np.ones(self.shape)
        self.phi = np.ones((n_blocks, n_groups))
        self.phi_tilde = np.ones(n_blocks)

    def update_vb(self, second_moment):
        """One mean-field sweep given ``E[theta^2]`` (array of ``shape``); returns E[1/xi]."""
        b = np.maximum(np.asarray(second_moment, float), _FLOOR)
        n_members = self.shape[2]
        n_groups = self.shape[1]
        mean_xi, mean_inv_xi = gig_mean_and_inverse_mean(2.0 * self.eta, b, self.r - 0.5)
        self.xi = mean_xi
        self.prior_precision = mean_inv_xi
        self.eta = (self.r + self.s) / (mean_xi + self.phi[:, :, None])
        self.phi = (0.5 + self.s * n_members) / (self.phi_tilde[:, None] + self.eta.sum(axis=2))
        self.phi_tilde = (0.5 + 0.5 * n_groups) / (1.0 + self.phi.sum(axis=1))
        return self.prior_precision

    def update_gibbs(self, theta, rng):
        """One Gibbs sweep given the current coefficients ``theta``; returns 1/xi."""
        b = np.maximum(np.asarray(theta, float) ** 2, _FLOOR)
        n_members = self.shape[2]
        n_groups = self.shape[1]
        self.xi = np.maximum(sample_gig_vectorised(2.0 * self.eta, b, self.r - 0.5, rng), _FLOOR)
        self.prior_precision = 1.0 / self.xi
        scale = 1.0 / (self.xi + self.phi[:, :, None])
        if self.r + self.s == 1.0:  # numpy's Ga(1) is this exponential: same numbers, 2.5x faster
            self.eta = rng.standard_exponential(scale.shape) * scale
        else:
            self.eta = rng.gamma(self.r + self.s, scale)
        self.phi = rng.gamma(
            0.5 + self.s * n_members, 1.0 / (self.phi_tilde[:, None] + self.eta.sum(axis=2))
        )
        self.phi_tilde = rng.gamma(0.5 + 0.5 * n_groups, 1.0 / (1.0 + self.phi.sum(axis=1)))
        return self.prior_precision
