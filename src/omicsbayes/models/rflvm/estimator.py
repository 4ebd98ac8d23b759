"""The RFLVM estimator: parameters, validation, ``fit`` through the shared MCMC driver, and the
held-out predictive (log likelihood and perplexity)."""

from numbers import Integral

import numpy as np
from scipy.special import logsumexp
from sklearn.utils._param_validation import Interval, StrOptions

from ...inference.checkpoint import fingerprint
from .._base import MCMCEstimator
from .._validation import MCMC_CONSTRAINTS, check_rng
from ._chain import _Chain
from ._likelihoods import COUNT_LIKELIHOODS, LIKELIHOODS, likelihood_of
from ._updates import rff

PRIORS = ("ibp_alpha_prior", "dp_eta_prior", "noise_prior", "beta_scale_prior", "dispersion_prior")


class RFLVM(MCMCEstimator):
    """Random feature latent variable model, sparse (IBP RFLVM) or dense, fitted by MCMC.

    BLAS runs on one thread. With the Bernoulli and negative-binomial likelihoods the fit spreads
    its feature and row blocks over as many Python threads as the caller allows (a
    ``threadpoolctl.threadpool_limits``, a job's ``threads``; otherwise every CPU), with the
    same draws on any number of threads (``models._threads.map_blocks``).

    Parameters
    ----------
    likelihood : {"gaussian", "bernoulli", "negative_binomial", "multinomial", "poisson"}
    sparse : bool
        ``True``: IBP RFLVM, latent dimension infinite a priori (``n_latent`` is the initial
        number of instantiated dimensions). ``False``: dense RFLVM with ``n_latent`` dimensions.
    n_random_features : int
        Number M of random frequencies (2M features).
    n_latent : int
        Initial (sparse) or fixed (dense) latent dimension. The default 8, not the paper's 2:
        started from 2 the IBP RFLVM stays at about 2 dimensions, and started from 8 it scored
        better held-out entries under the paper's protocol on Wisconsin z-scored (+0.42 +- 0.03
        per entry) and GSE7390 (+0.039 +- 0.004), in every one of 5 trials (the
        ``c_rflvm_paper`` rows of ``docs/_generated/fidelity_table.md``, protocols ``paper``
        and ``paper, IBP models from 8``: ``python -m benchmarks.fidelity --only c_rflvm_paper``
        without and with ``--ibp-start 8``, the same trials and seeds).
    n_iter : int
        MCMC iterations.
    burn_in : int or None
        Iterations discarded; None means ``n_iter // 2``.
    thin : int
        Keep every ``thin``-th iteration after burn-in. The held-out predictive depends on how
        much of the chain the draws span more than on their number (Wisconsin: 50 draws, every
        5th of 250 iterations, scored as well as all 250; docs/models.md), so a longer chain
        thinned keeps its cost at the same number of draws.
    n_chains : int
        Independent chains, each seeded from ``random_state``, run in parallel processes where
        cores allow; :meth:`log_likelihood` and :meth:`perplexity` average over the draws of all.
    ibp_alpha_prior, dp_eta_prior : (float, float)
        Gamma(shape, rate) priors of the IBP concentration alpha and the DP concentration eta.
    noise_prior : (float, float)
        Gaussian likelihood: sigma_j^-2 ~ Gamma(a0, rate b0) (section 3.1, eq. 13).
    beta_scale_prior : (float, float)
        Gaussian likelihood: range (c_min, c_max) of the log-uniform prior of the shared scale c
        in beta_j | sigma_j^2 ~ N(0, sigma_j^2 c I) (c is the prior signal-to-noise ratio),
        discretised on a grid of 10 points per decade.
    dispersion_prior : (float, float)
        Gamma(shape, rate) prior of the negative-binomial dispersions r_j.
    max_shrink : int
        Largest number of bracket shrinks in one elliptical slice step (at least 20).
    x_sweeps : int
        Gaussian likelihood: alternations of (row-wise ESS of X, beta and sigma^2 Gibbs) per
        iteration before the collapsed whole-matrix step (cheap; X and beta are coupled).
    n_x_proposals : int
        Size of the ensembles {current x_ik, draws from N(0, 1)} over which each z_ik is
        updated jointly with x_ik (sparse model) and, Gaussian likelihood, each active x_ik is
        drawn in the collapsed row sweep. 1: z_ik given x_ik, no collapsed sweep of the dense
        model.
    hmc_moves : int
        Hamiltonian Monte Carlo transitions on (X, W) jointly per iteration (0 turns them off).
    hmc_leapfrog : int
        Leapfrog steps per HMC transition. Long trajectories matter: on the Cambridge bars
        one transition of 150 steps per iteration reaches the planted mode from a PCA start
        where three of 20 do not (docs/models.md).
    random_state : None, int or numpy.random.Generator
    verbose : bool, default True
        Show a tqdm progress bar.
    checkpoint : str, os.PathLike or None
        File to write the chain state to every ``checkpoint_every`` iterations (atomically);
        ``fit`` resumes from it when it was written for the same parameters and data, and gives
        the same draws as an uninterrupted chain. Removed after a successful fit. None: off.
    checkpoint_every : int
        Iterations between checkpoints (one file per chain, ``<checkpoint>.chain<c>``).

    Attributes
    ----------
    latent_ : ndarray (n_samples, max active dims)
        Posterior mean of X * Z over the first chain's retained draws (dimensions padded with
        zeros; latent dimensions are identified only within a chain).
    n_active_ : ndarray (n_iter,)
        Number of instantiated latent dimensions after each iteration (first chain).
    log_likelihood_ : ndarray (n_iter,)
        Log likelihood of the observed entries after each iteration (first chain).
    draws_ : list of dict
        Retained draws of every chain (XZ, W, beta, theta), for the held-out predictive.
    offset_ : ndarray (n_features,)
        Per-column offset of the linear predictor: the chains sample ``Y - offset_`` and the
        predictive adds it back. Gaussian likelihood: the observed column means (eq. 13's
        weights have prior mean zero); the count and binary likelihoods: zeros.
    idata_ : arviz.InferenceData
        Retained draws of every chain: alpha, eta, n_active, n_clusters and X * Z (posterior),
        the log likelihood (``log_likelihood_observed``) and each sample's linear predictor
        (``offset_`` included) averaged over features (``predictive_mean``) in sample_stats,
        both identifiable.
    acceptance_rate_ : float
        Acceptance rate of the frequency Metropolis-Hastings step.
    hmc_acceptance_ : float
        Mean acceptance probability of the HMC transitions on (X, W).
    hmc_step_size_ : float
        HMC leapfrog step size after burn-in adaptation.
    step_seconds_ : dict
        Seconds spent in each sampler step ("z", "x", "hmc", "dp", "w", "beta") over the whole
        fit, and in the initialisation ("init").
    ess_evals_ : dict
        Likelihood evaluations of the elliptical slice steps: rows ("ess_rows"), whole
        matrix ("ess_whole"), frequencies ("ess_w"); Gaussian likelihood: predictives scored
        in the collapsed sweeps of x ("collapsed_rows", dense model) and of (z, x)
        ("collapsed_z", sparse model).
    n_iter_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import RFLVM
    >>> rng = np.random.default_rng(0)
    >>> Y = np.sin(rng.normal(size=(40, 2)) @ rng.normal(size=(2, 6)))
    >>> mask = rng.random(Y.shape) < 0.1  # entries to hold out
    >>> model = RFLVM(n_random_features=10, n_latent=2, n_iter=10, hmc_leapfrog=10,
    ...               random_state=0).fit(np.where(mask, np.nan, Y))
    >>> model.latent_.shape[0]  # latent coordinates of each sample
    40
    >>> bool(np.isfinite(model.log_likelihood(Y, mask)))
    True
    """

    capabilities = frozenset({"heldout_scoring", "counts", "mcmc"})

    def _instance_capabilities(self):
        """``counts`` only with a count likelihood (:data:`COUNT_LIKELIHOODS`)."""
        if self.likelihood in COUNT_LIKELIHOODS:
            return self.capabilities
        return self.capabilities - {"counts"}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN = missing
        return tags

    def __init__(
        self,
        likelihood="gaussian",
        sparse=True,
        n_random_features=50,
        n_latent=8,
        n_iter=100,
        burn_in=None,
        thin=1,
        n_chains=1,
        ibp_alpha_prior=(1.0, 1.0),
        dp_eta_prior=(1.0, 1.0),
        noise_prior=(1.0, 1.0),
        beta_scale_prior=(1e-3, 1e6),
        dispersion_prior=(1.0, 1.0),
        max_shrink=100,
        x_sweeps=3,
        n_x_proposals=10,
        hmc_moves=1,
        hmc_leapfrog=150,
        random_state=None,
        verbose=True,
        checkpoint=None,
        checkpoint_every=10,
    ):
        self.likelihood = likelihood
        self.sparse = sparse
        self.n_random_features = n_random_features
        self.n_latent = n_latent
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.n_chains = n_chains
        self.ibp_alpha_prior = ibp_alpha_prior
        self.dp_eta_prior = dp_eta_prior
        self.noise_prior = noise_prior
        self.beta_scale_prior = beta_scale_prior
        self.dispersion_prior = dispersion_prior
        self.max_shrink = max_shrink
        self.x_sweeps = x_sweeps
        self.n_x_proposals = n_x_proposals
        self.hmc_moves = hmc_moves
        self.hmc_leapfrog = hmc_leapfrog
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every

    # the matrices are small (N x 2M, 2M x 2M) and the sweeps are factorisations: extra BLAS
    # threads only contend (5x slower with two threads on Cambridge bars, docs/models.md)
    _blas_sequential = True
    # count likelihoods: the Polya-gamma beta step and the HMC gradient in column blocks, the z
    # step's ensemble likelihoods and the logistic-link likelihoods in row blocks, on as many
    # Python threads as the caller allows (map_blocks)
    _worker_blocks = True

    # ------------------------------------------------------------------ validation
    _parameter_constraints = {
        **MCMC_CONSTRAINTS,
        "likelihood": [StrOptions(set(LIKELIHOODS))],
        "sparse": ["boolean"],
        **{
            name: [Interval(Integral, 1, None, closed="left")]
            for name in (
                "n_random_features",
                "n_latent",
                "x_sweeps",
                "n_x_proposals",
                "hmc_leapfrog",
            )
        },
        "hmc_moves": [Interval(Integral, 0, None, closed="left")],
        # an elliptical slice step shrinks its bracket geometrically; a few shrinks are not
        # enough for every row of a chain (1 fails on the sweep's tiny problem)
        "max_shrink": [Interval(Integral, 20, None, closed="left")],
        **{name: [tuple, list, np.ndarray] for name in PRIORS},  # arrays: params read from h5ad
    }

    def _validate_params(self):
        """scikit-learn's checks, then each prior two positive numbers (c_min < c_max)."""
        super()._validate_params()
        for name in PRIORS:
            v = getattr(self, name)
            if len(v) != 2 or not all(np.isfinite(x) and x > 0 for x in v):
                raise ValueError(
                    f"The {name!r} parameter of RFLVM must be two positive numbers. "
                    f"Got {v!r} instead."
                )
        lo, hi = self.beta_scale_prior
        if not lo < hi:
            raise ValueError(
                f"The 'beta_scale_prior' parameter of RFLVM must be (c_min, c_max) with "
                f"c_min < c_max. Got {self.beta_scale_prior!r} instead."
            )

    def _scale_grid(self):
        """Grid of the prior scale c: log-spaced over ``beta_scale_prior``, 10 points a decade."""
        lo, hi = np.log10(self.beta_scale_prior)
        return np.logspace(lo, hi, max(2, int(round(10 * (hi - lo))) + 1))

    def _check_Y(self, Y, *, reset):
        """``Y`` through the base's input check (NaN = missing; counts rounded for a count
        likelihood), at least 2 x 2, and 0/1 for the Bernoulli likelihood."""
        Y = self._check_X(Y, reset=reset)
        for n, what in ((Y.shape[0], "sample"), (Y.shape[1], "feature")):
            if n < 2:
                raise ValueError(f"Y has {n} {what}(s) (shape {Y.shape}); RFLVM needs at least 2")
        likelihood_of(self.likelihood).check_values(Y[~np.isnan(Y)], "Y")
        return Y

    # ------------------------------------------------------------------ fit
    def fit(self, Y, y=None):
        """Run the sampler on ``Y`` (samples x features); NaN entries are treated as missing.

        Parameters
        ----------
        Y : array_like (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        burn = self._burn_in()
        Y = self._check_Y(Y, reset=True)
        obs = ~np.isnan(Y)
        key = fingerprint(self, Y)
        offset = likelihood_of(self.likelihood).offset(Y)
        Y = Y - offset
        chains = self._sample_chains(
            lambda rng, state: _Chain.start(self, Y, obs, rng, state),
            check_rng(self.random_state),
            burn_in=burn,
            fingerprint=key,
            name=f"RFLVM ({self.likelihood})",
        )
        first = chains[0]
        self.n_active_ = first.traces["n_active"]
        self.draws_ = [snap for c in chains for snap, _, _ in c.draws]
        self.acceptance_rate_ = first.final["acceptance_rate"]
        self.hmc_acceptance_ = first.final["hmc_acceptance"]
        self.hmc_step_size_ = first.final["hmc_step_size"]
        self.step_seconds_ = first.final["step_seconds"]
        self.ess_evals_ = first.final["ess_evals"]
        self.row_totals_ = first.final["row_totals"]
        self.n_samples_fit_ = Y.shape[0]
        self.offset_ = offset
        d_max = max(max(snap["XZ"].shape[1] for snap, _, _ in c.draws) for c in chains)
        d_max = max(d_max, 1)
        Xs = []
        for c in chains:
            x = np.zeros((len(c.draws), Y.shape[0], d_max))
            for s, (snap, _, _) in enumerate(c.draws):
                x[s, :, : snap["XZ"].shape[1]] = snap["XZ"]
            Xs.append(x)
        self.latent_ = Xs[0].mean(axis=0)  # latent dimensions are identified only within a chain
        stats = [np.asarray([st for _, st, _ in c.draws], float) for c in chains]
        post = {
            "alpha": [st[:, 0] for st in stats],
            "eta": [st[:, 1] for st in stats],
            "n_active": [st[:, 2] for st in stats],
            "n_clusters": [st[:, 3] for st in stats],
            "X": Xs,
        }
        if not self.sparse:
            del post["alpha"]
        self._record_chains(
            chains,
            posterior=post,
            sample_stats={
                "log_likelihood_observed": [st[:, 4] for st in stats],
                "predictive_mean": [
                    np.stack([m for _, _, m in c.draws]) + offset.mean() for c in chains
                ],
            },
            dims={"X": ["sample", "latent_dim"], "predictive_mean": ["sample"]},
        )
        return self

    def fit_transform(self, Y, y=None):
        """Fit and return ``latent_``."""
        return self.fit(Y).latent_

    # ------------------------------------------------------------------ evaluation
    def _check_heldout(self, Y, mask):
        Y = self._check_Y(Y, reset=False)
        mask = np.asarray(mask, bool)
        if Y.shape != (self.n_samples_fit_, self.n_features_in_) or mask.shape != Y.shape:
            raise ValueError(
                f"Y {Y.shape} and mask {mask.shape} must both have the fitted shape "
                f"{(self.n_samples_fit_, self.n_features_in_)}"
            )
        if np.isnan(Y[mask]).any():
            raise ValueError(f"Y has {int(np.isnan(Y[mask]).sum())} NaN values where mask is True")
        if not mask.any():
            raise ValueError("mask selects no entries; mark held-out entries with True")
        return Y, mask

    def _draw_psi(self, d):
        # a fit file of a release without offset_ holds a model fitted on uncentred columns
        return rff(d["XZ"], d["W"]) @ d["beta"] + getattr(self, "offset_", 0.0)

    def log_likelihood(self, Y, mask):
        """Held-out log posterior predictive, sum over entries with ``mask`` True.

        Each entry's predictive density is the average over retained draws of p(y_ij | draw)
        (beta_j and the likelihood parameters of the draw). Multinomial: the word-level
        probability y_ij log theta_ij with theta_i the softmax over all features.

        Parameters
        ----------
        Y : array_like (n_samples, n_features)
            Matrix holding the true values at the held-out entries (other entries ignored).
        mask : array_like of bool
            True where an entry was held out (NaN in the matrix given to ``fit``).

        Returns
        -------
        float
        """
        Y, mask = self._check_heldout(Y, mask)
        rows, cols = np.nonzero(mask)
        y = Y[rows, cols]
        family = likelihood_of(self.likelihood)
        per_draw = np.empty((len(self.draws_), y.size))
        for s, d in enumerate(self.draws_):
            per_draw[s] = family.heldout_logpdf(self._draw_psi(d), d["theta"], rows, cols, y)
        return float(np.sum(logsumexp(per_draw, axis=0) - np.log(len(self.draws_))))

    def perplexity(self, Y, mask):
        """Held-out perplexity exp(-sum y_ij log f_ij / sum y_ij) over entries with mask True.

        f_ij is the posterior mean (over retained draws) of the normalised rate mu_ij / sum_j
        mu_ij, mu = exp(psi) (Poisson), r exp(psi) (negative binomial), softmax(psi)
        (multinomial): the per-word definition used for PFA and LDA (Zhou et al. 2012a).
        """
        family = likelihood_of(self.likelihood)
        if not family.counts:
            raise ValueError(
                f"perplexity needs a count likelihood {COUNT_LIKELIHOODS}; "
                f"this RFLVM has likelihood={self.likelihood!r}"
            )
        Y, mask = self._check_heldout(Y, mask)
        f = np.zeros(Y.shape)
        for d in self.draws_:
            psi = family.log_rate(self._draw_psi(d), d["theta"])
            f += np.exp(psi - logsumexp(psi, axis=1, keepdims=True))
        f /= len(self.draws_)
        y = Y[mask]
        if y.sum() <= 0:
            raise ValueError("the held-out entries hold no counts; perplexity is undefined")
        return float(np.exp(-np.sum(y * np.log(np.maximum(f[mask], 1e-300))) / y.sum()))
