"""Discriminative factor models with the max-margin rank likelihood (paper 000, Yuan et al. 2015).

Data ``X`` are (n_samples, n_features) here (the paper's ``X`` is its transpose).  Every data
likelihood and every label likelihood reduces, given its augmentation variables, to a Gaussian
quadratic form in ``w_{n,i} = a_i^T z_n`` (and ``f_n = beta^T z_n + b``)::

    log L = -1/2 P_{n,i} w_{n,i}^2 + H_{n,i} w_{n,i} + const,

so A, Z and beta share one conjugate update:

================  =================================  ========================================
likelihood        P                                  H
================  =================================  ========================================
gaussian          tau_i (noise precision, Gamma)     tau_i x_{n,i}
rank (Hoff)       1                                  E[w], w ~ TN(a^T z, 1, w^l, w^u)
maxmargin exact   1/lam^l + 1/lam^u                  (w^l + eps)/lam^l + (w^u - eps)/lam^u
bsvm labels       1/lam^c                            y (1 + 1/lam^c)  (eq. 8)
probit labels     1                                  E[s], s ~ TN(f, 1, sign y)
================  =================================  ========================================

(maxmargin row: expanding eq. 7; it is the paper's Delta^{(k)}_{i,n} of section 7 summed over the
coordinate updates, plus +-1 at the ends of a row, see below.)  A, Z and beta are
updated in blocks (rows of A, columns of Z, one coefficient vector per task) rather than
coordinate-wise over k as printed; the coordinate-wise updates of sections 7-8 are the
fully-factorised special case.

Two forms of the max-margin rank likelihood (``maxmargin_form``):

* ``"exact"`` -- as printed: ``w = a^T z`` exactly (sections 2-3, 7), the pseudo-likelihood of
  eq. 6 with neighbours fixed, P and H as in the table.  On noisy data this form has its optimum
  at a vanishing scale of w (every margin violated by eps costs only 2 eps per term, while a
  misordered spread costs in proportion to the scale), and VB and Gibbs both contract the
  loadings to zero (observed on simulated cohorts; held-out AUROC well below the Gaussian model).
* ``"latent"`` (default) -- eq. 1 kept: ``w = a^T z + v``, ``v ~ N(0, 1)``, with the max-margin
  pseudo-likelihood (eqs. 5-7) on the latent w, which is drawn from its augmented conditional
  (Gaussian given lambda); A and Z then see P = 1, H = w.  In VB, E[w] under the optimal q(W)
  (no closed form) is a Robbins-Monro average of draws (see ``_Engine._maxmargin_latent``).

``inference="vb_deterministic"`` is the paper's VB as printed (supplement section 8): the
``"exact"`` form, ``<w> = <a>^T <z>`` with neighbours from ``<w>``, and each scale variable from
the means of its hinge residual, ``<1/lam^l> = |<w^l> + eps - <w>|^-1``, ``<1/lam^u> = |<w> + eps
- <w^u>|^-1``, ``<1/lam^c> = |1 - y <beta>^T <z>|^-1`` (section 8, item 3; floored at 1e-6), with
no random numbers.  It inherits the exact form's collapse: the scale of ``<a>^T <z>`` shrinks
towards zero on noisy data (tests/test_rank_factor_vb_deterministic.py).

Errata applied (ERRATA.md, 000) and found here:

* Section 7/8, sigma_{a_{i,k}}^{-2}: the printed sum uses ``lambda_{i,n}^{-1}``, but with
  ``lambda_{i,n} = 1/lam^l + 1/lam^u`` as defined there, the quadratic term of eq. 7 has weight
  ``lambda_{i,n}`` itself (consistent with the ``a_{i,k} z_{k,n} lambda_{i,n}`` term of Delta).
  Likewise in sigma_{z_{k,n}}^{-2}.
* Delta_{i,n}^{(k)} (section 7) omits the terms linear in w of the augmented density (the
  ``-u`` of ``-(u + lam)^2 / (2 lam)``): they cancel when both neighbours exist, but for the
  smallest (largest) value of a row they add +1 (-1) to H.
* Neighbours: ``w^l`` is the running maximum of ``w`` over strictly smaller values of the row,
  ``w^u`` the running minimum over strictly larger ones; ties are neither; at the ends the
  missing side is absent (``1/lam = 0``).  Neighbours are fixed when updating A, Z and w
  (pseudo-likelihood, as published).
* Lambda updates (sections 7-8): VB uses second moments, ``E[1/lam] = E[u^2]^(-1/2)``, with
  ``E[u^2] = (<w^l> + eps - <w>)^2 + Var(w)`` (neighbour fixed); Gibbs draws ``IG(1/|u|, 1)``.
* <Gamma_{k,n}> and <beta_k> (section 8): the block form above is the corrected one.
* Shrinkage conditionals: see :mod:`omicsbayes.inference.tpbn`.
* DP mixture: psi_t ~ Ga(psi_s + K n_t / 2, psi_r + sum ||z_n - mu_t||^2 / 2); prior precision of
  z_n is psi_{t(n)}, with mean mu_{t(n)}; p(t(n) = t) includes the label pseudo-likelihood in
  training and not at prediction.

Layers: :mod:`._kernels` (compiled kernels), :mod:`._ranks` (sorted order, tie groups,
neighbours), :mod:`._engine` (the VB / Gibbs updates and the scores of new samples),
:mod:`._estimator` (:class:`RankFactorClassifier`).
"""

from ._estimator import VARIANTS, RankFactorClassifier
from ._ranks import margin_conditional_moments

__all__ = ["VARIANTS", "RankFactorClassifier", "margin_conditional_moments"]
