"""Random feature latent variable models (paper 002): the IBP RFLVM (``sparse=True``) and the dense
RFLVM of Gundersen et al. (``sparse=False``), fitted by MCMC on a matrix with missing entries.

Model (eq. 15): y_ij ~ L(g(phi_W(x_i * z_i) beta_j), theta_j), phi_W(x) = [cos(W x), sin(W x)] /
sqrt(M) (eq. 12, M frequencies), x_i ~ N(0, I), the frequencies w_m ~ DP mixture of Gaussians with
an NIW base measure, Z ~ IBP(alpha) through its stick-breaking construction; beta_j ~ N(0, I)
for the count likelihoods, and for the Gaussian the conjugate normal-inverse-gamma prior of
eq. (13) with B0 = c I scaled by the noise: beta_j | sigma_j^2 ~ N(0, sigma_j^2 c I),
sigma_j^-2 ~ Ga(a0, b0), and c (the prior signal-to-noise ratio, shared by the columns) with a
log-uniform prior on a grid.

One iteration (section 3.1):

1. ``z``: IBP slice sweep (eq. 16-19; new dimensions get x from N(0, 1) and w from the prior of
   their mixture component), then the active weights (eq. 18) and alpha (eq. 20). Sparse model
   only. Each z_ik is updated jointly with x_ik: x_ik is a model variable whatever z_ik is
   (with z_ik = 0 its conditional is its N(0, 1) prior), so eq. (17)'s p(y_i | z_ik = 1) is
   averaged over an ensemble {current x_ik, ``n_x_proposals`` - 1 prior draws} and x_ik is then
   picked from the ensemble (Tjelmeland 2004; exact). Gaussian likelihood: beta and sigma^2 are
   integrated out, and the sweep runs row by row (numba) under row i's leave-one-out
   multivariate-t predictive given the other rows; given beta, which has adapted to every
   dimension, a dimension the data do not need is almost never switched off. Other
   likelihoods: column by column given beta.
2. ``x``: Gaussian: ``x_sweeps`` alternations of (beta, sigma^2 from their NIG posterior;
   elliptical slice sampling of every row in parallel given them), then one whole-matrix ESS
   step on the collapsed likelihood; the dense model first runs the collapsed row sweep of
   step 1 on the active x_ik only. Other likelihoods: row-wise ESS given beta.
3. ``hmc``: ``hmc_moves`` Hamiltonian Monte Carlo transitions on (X, W) jointly, on the
   collapsed likelihood of the completed data (Gaussian) or given beta (other likelihoods),
   with the priors N(0, I) on x_i and the component Gaussians on w_m; step size adapted
   during burn-in only. The leapfrog kicks use a float32 gradient, the Metropolis step the
   float64 target (exact: see :func:`omicsbayes.inference.hmc.hmc_step`). Not in the paper:
   an extra exact move that leaves the same conditional invariant as the ESS and MH steps.
   Those shrink toward the current state when the posterior is much narrower than the prior
   (low noise); on the Cambridge-bars data the chains without it stayed far below the planted
   state's collapsed likelihood.
4. ``dp``: DP mixture over the frequencies (eq. 22-24, NIW integrated out) and its concentration
   by Escobar & West (eq. 25).
5. ``w``: Metropolis-Hastings for each w_m with the prior as proposal (eq. 21), then one
   elliptical slice step on all of W under the component Gaussians (it always moves, where the
   prior proposal is accepted a few per cent of the time); Gaussian: on the collapsed likelihood;
   Bernoulli and negative binomial: the MH step by delayed acceptance with a float32 first stage.
6. ``beta``: Gaussian: c from its exact conditional on the grid (collapsed), then (beta_j,
   sigma_j^2) jointly from the NIG posterior (exact, for the row-wise steps, the imputation and
   the held-out predictive); Bernoulli / negative binomial / multinomial: Polya-gamma Gibbs
   (eq. 27, 33-35); negative binomial dispersion r_j by CRT augmentation (Zhou & Carin 2012);
   Poisson: see below.

Initialisation: X from the PCA scores of the column-mean imputed data (square root for counts),
scaled to unit variance, every z_ik = 1, and W from N(0, 0.1^2 I), so the initial map
phi(x) beta is close to linear in the PCA scores (sin(w' x) ~ w' x); the chain then learns the
frequencies. ``n_latent`` sets the number of dimensions the chain starts with (default 8; the
paper: 2).

Gaussian collapsed likelihood (section 3.1, "beta_j and sigma_j^2 integrated out"):
y_j | Phi, c ~ t_{2 a0}(0, (b0 / a0)(I + c Phi Phi^T)), for all columns from one
eigendecomposition of Phi^T Phi (O(M^2 N + M^3 + M N J)); each grid value of c then costs
O(M J). A fixed c = 1 (B0 = I) ties the signal variance of phi beta_j to the noise variance and
underfits data with a small noise; with c on a grid, small-noise data get a large c.

Poisson (the paper leaves the sampler open): Polya-gamma augmentation does not apply to the log
link, so each column beta_j gets three elliptical slice steps under its N(0, I) prior (robust:
they always move, also far from the mode) and then a Metropolis-Hastings step with the
iteratively-reweighted-least-squares proposal of Gamerman (1997) (efficient near the mode): at
the current beta, N(m(beta), P(beta)^-1) with P = Phi^T diag(mu) Phi + I and
m = P^-1 Phi^T (y - mu + mu psi) (one Newton step, shortened to a trust region); the reverse
proposal is built at the proposed point. All columns move in parallel (batched Cholesky).

Missing entries (NaN) never enter a likelihood. For the Gaussian likelihood the collapsed steps
need a complete matrix: missing entries are imputed from y ~ N(phi beta_j, sigma_j^2) with
(beta_j, sigma_j^2) from the NIG posterior (data augmentation, an exact Gibbs step on the
augmented space), after the beta step and the row-wise steps and before the collapsed X sweep;
the collapsed steps condition on them, the row-wise steps, the slice sweep and every reported
likelihood use the observed entries only.
"""

from ._chain import STEPS
from ._chain import _Chain as _Chain  # the tests drive single steps of a chain
from ._kernels import _collapsed_row_sweep as _collapsed_row_sweep
from ._likelihoods import COUNT_LIKELIHOODS, LIKELIHOODS, likelihood_of
from ._updates import rff, sample_crt, sample_nb_dispersion
from .estimator import RFLVM

__all__ = [
    "COUNT_LIKELIHOODS",
    "LIKELIHOODS",
    "RFLVM",
    "STEPS",
    "likelihood_of",
    "rff",
    "sample_crt",
    "sample_nb_dispersion",
]
