"""Why IBP RFLVM ties the dense RFLVM (claim ``c_rflvm``): planted latent sparsity, and the
sparsity of the IBP RFLVM's fitted mask on the real cohorts.

Run ``c_rflvm_sparsity`` of ``python -m benchmarks.fidelity`` (rows of claim
``c_rflvm_sparsity``). Paper 002 (section 4.2) credits the IBP RFLVM's lead to sparsity of the
latent space, the IBP's binary mask Z on X:

- **Planted** (:func:`sparse_latent_matrix`): matrices of Wisconsin's size (569 x 30) from
  four standard normal latent dimensions through a draw of a GP with an RBF kernel (random
  Fourier features), each sample using a random subset of the four (each entry of Z on with
  probability 1/2, as the Cambridge bars' four shapes), or all four (dense). Both RFLVMs are
  fitted as run ``c_rflvm_paper`` fits them (100 iterations, M = 50, the IBP RFLVM from two
  dimensions, the dense RFLVM with the IBP RFLVM's instantiated count), one held-out split
  (20 % of the entries) per draw. If the implementation carries the paper's mechanism the IBP
  RFLVM is ahead on the sparse draws.
- **Fitted sparsity** (:func:`mask_density`): the posterior mean fraction of active entries
  of Z among the instantiated dimensions, on the planted draws (model ``planted`` gives the
  drawn Z's) and on run ``c_rflvm_paper``'s trials of Wisconsin and GSE7390 (the same fits:
  the same specs, held-out entries and seeds). The dense RFLVM is the IBP RFLVM with Z fixed
  at ones and the dimension fixed, so where the fitted mask is near ones a tie is expected.
- **Start and length** (:data:`CHAINS`): the same two models on the same planted draws,
  held-out entries and seeds, with the IBP RFLVM started from :data:`LONG_START` dimensions,
  with both run for :data:`LONG_ITER` sweeps (half burn-in), and with both changes
  (:data:`LONG_PAIR`): whether the paper's protocol (two dimensions, 100 sweeps) or the model
  keeps the IBP RFLVM level with the dense one, and which of the two settings matters.
  ``--models`` picks the pairs by their IBP model; each picked IBP model is refitted on the
  real cohorts' trials too (the long pair's reproduces run ``c_rflvm_paper``'s fits with
  ``--ibp-start 8 --sweeps 500``).
"""

import numpy as np

SPARSITY_SHAPE = (569, 30)  # Wisconsin's samples and features
SPARSITY_LATENT = 4  # the Cambridge bars' shapes
SPARSITY_ON = 0.5  # probability that a sample uses a latent dimension (sparse kind)
SPARSITY_NOISE = 0.1  # noise variance against unit signal variance per feature
SPARSITY_KINDS = ("sparse latent", "dense latent")
SPARSITY_DRAWS = 10  # planted draws per kind (fewer when the settings' n_planted is smaller)
PAPER_START, PAPER_ITER = 2, 100  # run c_rflvm_paper's: the paper's section 4
LONG_START = 8  # the later start (run c_rflvm_paper's --ibp-start 8)
LONG_ITER = 500  # the longer chain, five times the paper's sweeps
PAPER_PAIR = ("IBP RFLVM", "RFLVM")
LONG_PAIR = (f"IBP RFLVM from {LONG_START}, {LONG_ITER} sweeps", f"RFLVM {LONG_ITER} sweeps")
START_PAIR = (
    f"IBP RFLVM from {LONG_START}, {PAPER_ITER} sweeps",
    f"RFLVM {PAPER_ITER} sweeps, sized from {LONG_START}",
)
LENGTH_PAIR = (
    f"IBP RFLVM from {PAPER_START}, {LONG_ITER} sweeps",
    f"RFLVM {LONG_ITER} sweeps, sized from {PAPER_START}",
)
# the pairs beside the paper's: (IBP model, dense model) -> (IBP start, sweeps of both)
CHAINS = {
    START_PAIR: (LONG_START, PAPER_ITER),
    LENGTH_PAIR: (PAPER_START, LONG_ITER),
    LONG_PAIR: (LONG_START, LONG_ITER),
}


def sparse_latent_matrix(kind, rng, shape=SPARSITY_SHAPE, n_latent=SPARSITY_LATENT):
    """A z-scored matrix from ``n_latent`` masked latent dimensions through an RBF GP draw.

    X is standard normal; Z is Bernoulli(:data:`SPARSITY_ON`) per entry (``"sparse latent"``)
    or all ones (``"dense latent"``). Each feature is a draw of a zero-mean GP with an RBF
    kernel of lengthscale 1 at the rows of X * Z (200 random Fourier features), scaled to unit
    variance, plus Gaussian noise of variance :data:`SPARSITY_NOISE`; the columns are z-scored.

    Parameters
    ----------
    kind : {"sparse latent", "dense latent"}
    rng : numpy.random.Generator
    shape : (int, int)
    n_latent : int

    Returns
    -------
    Y : ndarray of shape ``shape``
    Z : ndarray of bool, shape (n_samples, n_latent)
        The drawn mask.
    """
    if kind not in SPARSITY_KINDS:
        raise ValueError(f"kind: expected one of {SPARSITY_KINDS}, got {kind!r}")
    n, p = shape
    X = rng.standard_normal((n, n_latent))
    Z = rng.random((n, n_latent)) < SPARSITY_ON
    if kind == "dense latent":
        Z[:] = True
    n_freq = 200
    W = rng.standard_normal((n_latent, n_freq))
    b = rng.uniform(0, 2 * np.pi, n_freq)
    F = np.sqrt(2.0 / n_freq) * np.cos((X * Z) @ W + b) @ rng.standard_normal((n_freq, p))
    F = (F - F.mean(0)) / F.std(0)
    Y = F + np.sqrt(SPARSITY_NOISE) * rng.standard_normal((n, p))
    return (Y - Y.mean(0)) / Y.std(0), Z


def mask_density(draws):
    """Posterior mean fraction of active entries of Z among the instantiated dimensions.

    Each retained draw of :class:`omicsbayes.models.RFLVM` (``draws_``) holds ``XZ`` = X * Z
    over its instantiated dimensions; X is continuous, so Z's active entries are the nonzero
    ones. The fraction per draw, averaged over the draws (1 for the dense RFLVM).

    Parameters
    ----------
    draws : list of dict
        Each with ``"XZ"`` of shape (n_samples, instantiated dimensions).
    """
    if not draws:
        raise ValueError("draws: expected at least one retained draw, got none")
    return float(np.mean([np.mean(d["XZ"] != 0) if d["XZ"].size else 0.0 for d in draws]))


def _fit(spec, Y, mask, state):
    """Fit ``spec`` with ``mask``'s entries hidden; held-out log likelihood per entry, the
    instantiated dimensions at the last iteration and :func:`mask_density`."""
    from omicsbayes.protocols._common import make_estimator

    model = make_estimator(spec, state).fit(np.where(mask, np.nan, Y))
    return {
        "heldout_loglik_per_entry": float(model.log_likelihood(Y, mask)) / mask.sum(),
        "n_active": int(model.n_active_[-1]),
        "z_density": mask_density(model.draws_),
    }


def sparsity_rows(settings, seed, specs, real_trials):
    """Per-split rows (:data:`benchmarks.fidelity.SPLIT_COLUMNS`) of run ``c_rflvm_sparsity``.

    Parameters
    ----------
    settings : dict
        ``n_planted`` (draws per kind: at most :data:`SPARSITY_DRAWS`), ``cohorts`` (names to
        keep, as ``--cohorts``).
    seed : int
        Decides every planted matrix, held-out mask and planted fit.
    specs : dict
        The specs of :data:`PAPER_PAIR` (run ``c_rflvm_paper``'s) and of :data:`CHAINS`' pairs;
        in each pair the dense RFLVM gets the IBP RFLVM's instantiated count per draw.
    real_trials : iterable of (cohort, Y, split, mask, state)
        Run ``c_rflvm_paper``'s trials and fit seeds: each picked IBP model's fitted mask there.
    """
    from omicsbayes._seed import derive_seed
    from omicsbayes.evaluate.splitters import heldout_entry_splits
    from omicsbayes.protocols.heldout_entries import heldout_mask

    wanted = settings.get("cohorts")
    pairs = [PAPER_PAIR, *CHAINS]
    if settings.get("models") is not None:
        unknown = sorted(set(settings["models"]) - {ibp for ibp, _ in pairs})
        if unknown:
            fitted = [ibp for ibp, _ in pairs]
            raise SystemExit(f"--models {unknown}: run c_rflvm_sparsity fits the pairs of {fitted}")
        pairs = [pair for pair in pairs if pair[0] in settings["models"]]
    rows = []

    def add(protocol, cohort, model, split, metrics):
        for metric, value in metrics.items():
            rows.append(("c_rflvm_sparsity", protocol, cohort, model, metric, split, value))

    for kind in SPARSITY_KINDS:
        cohort = f"planted {kind}, {SPARSITY_SHAPE[0]} x {SPARSITY_SHAPE[1]}"
        if wanted and not any(w in cohort for w in wanted):
            continue
        for draw in range(min(settings["n_planted"], SPARSITY_DRAWS)):
            rng = np.random.default_rng(derive_seed(seed, "c_rflvm_sparsity", cohort, draw))
            Y, Z = sparse_latent_matrix(kind, rng, shape=SPARSITY_SHAPE)
            table = heldout_entry_splits(
                np.ones(Y.shape, dtype=bool),
                fraction=0.2,
                n_repeats=1,
                random_state=derive_seed(seed, "c_rflvm_sparsity", cohort, draw, "split"),
            )
            mask = heldout_mask(Y.shape, table)
            state = derive_seed(seed, "c_rflvm_sparsity", cohort, draw, "fit")
            for ibp_name, dense_name in pairs:
                ibp = _fit(specs[ibp_name], Y, mask, state)
                dense_spec = {**specs[dense_name]}
                dense_spec["params"] = {**dense_spec["params"], "n_latent": ibp["n_active"]}
                dense = _fit(dense_spec, Y, mask, state)
                add("paper", cohort, ibp_name, draw, ibp)
                add("paper", cohort, dense_name, draw, dense)
                print(
                    f"  c_rflvm_sparsity {cohort} draw {draw}: {ibp_name}"
                    f" {ibp['heldout_loglik_per_entry']:.3f} (Z density {ibp['z_density']:.2f},"
                    f" {ibp['n_active']} dims), {dense_name}"
                    f" {dense['heldout_loglik_per_entry']:.3f}",
                    flush=True,
                )
            if PAPER_PAIR in pairs:
                add("paper", cohort, "planted", draw, {"z_density": float(Z.mean())})
    for cohort, Y, split, mask, state in real_trials:
        for ibp_name, _ in pairs:
            ibp = _fit(specs[ibp_name], Y, mask, state)
            add("paper", cohort, ibp_name, split, ibp)
            print(
                f"  c_rflvm_sparsity {cohort} trial {split}: {ibp_name} Z density"
                f" {ibp['z_density']:.3f} ({ibp['n_active']} dims)",
                flush=True,
            )
    return rows
