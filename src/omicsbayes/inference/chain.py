"""One MCMC driver and one VB loop for every model.

:func:`run_chain` runs one Markov chain: restore from a checkpoint, sweep, check the log
likelihood is finite, record the per-iteration traces, keep a draw at ``burn_in + j * thin``,
write checkpoints, report progress. :func:`sample_chains` runs ``n_chains`` of them, each seeded
from ``random_state`` (``Generator.spawn``), in parallel processes where cores allow (one BLAS
thread each), and :func:`sample_estimator_chains` does so with an estimator's chain settings;
:func:`chains_to_idata` stacks their draws into ArviZ ``InferenceData`` with a
chain dimension. :func:`run_vb` iterates a variational update until the relative change of the
lower bound falls below ``tol`` (``ConvergenceWarning`` otherwise).

A model's sampler is any object with

- ``sweep(iteration) -> dict``: one iteration; the dict holds this iteration's scalars, at least
  ``"log_likelihood"`` (they become the traces);
- ``draw() -> object``: what to keep at a retained iteration;
- ``state() -> object``: everything the next iteration reads (picklable, for checkpoints);
- ``final() -> object``: what the model reads from the last state after the chain.

``run_chain`` builds it with ``make(state)``: ``make(None)`` starts a new chain (its initial
draws come from the chain's generator), ``make(state)`` rebuilds a checkpointed one.
"""

import os
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from .checkpoint import Checkpoint
from .convergence import check_finite, mcmc_diagnostics, relative_improvement, warn_unconverged
from .progress import ChainBars, Progress, chain_context

__all__ = [
    "ChainResult",
    "burn_in_of",
    "chain_checkpoint",
    "chain_rngs",
    "chains_to_idata",
    "check_burn_in",
    "run_chain",
    "run_vb",
    "sample_chains",
    "sample_estimator_chains",
    "trace_label",
    "whole_chain_traces",
]

TRACE_LABELS = {
    "lower_bound": "lower bound",
    "objective": "objective",
    "log_likelihood": "log likelihood",
    "draws_log_likelihood": "log likelihood of the retained draws",
}
"""What a trace of each name is, for figures. A VB history (``lower_bound_``) is a lower bound
only where the estimator says so (:func:`trace_label`)."""


@dataclass
class ChainResult:
    """One chain: per-iteration ``traces`` (name -> array of length n_iter), the retained
    ``draws`` (a list, one entry per kept iteration), the sampler's ``final()`` and the
    ``burn_in`` and ``thin`` that chose the retained iterations."""

    traces: dict
    draws: list
    final: object
    burn_in: int = 0
    thin: int = 1

    def kept(self, name):
        """Trace ``name`` at the retained iterations (one value per entry of ``draws``)."""
        return self.traces[name][self.burn_in :: self.thin]


def burn_in_of(burn_in, n_iter):
    """The burn-in a ``burn_in`` parameter means: ``None`` is ``n_iter // 2``."""
    return int(n_iter) // 2 if burn_in is None else int(burn_in)


def check_burn_in(burn_in, n_iter, who):
    """``burn_in_of(burn_in, n_iter)``, refused unless it leaves at least one kept iteration."""
    burn = burn_in_of(burn_in, n_iter)
    if not burn < n_iter:
        raise ValueError(
            f"The 'burn_in' parameter of {who} must be below n_iter={n_iter} (None means "
            f"n_iter // 2). Got {burn_in!r} instead."
        )
    return burn


def run_chain(
    make,
    rng,
    *,
    n_iter,
    burn_in,
    thin=1,
    name,
    verbose=False,
    checkpoint=None,
    checkpoint_every=10,
    fingerprint=None,
):
    """Run one chain of ``n_iter`` iterations; return a :class:`ChainResult`.

    Parameters
    ----------
    make : callable
        ``make(None)`` a new sampler, ``make(state)`` one restored from a checkpoint.
    rng : numpy.random.Generator
        The chain's generator (restored with the checkpoint).
    n_iter, burn_in, thin : int
        Iterations, iterations discarded, keep every ``thin``-th after them.
    name : str
        For progress lines and error messages.
    checkpoint, checkpoint_every, fingerprint
        :class:`~omicsbayes.inference.checkpoint.Checkpoint` path (None: off), its interval and
        the fit's fingerprint (hyperparameters and data).
    """
    ckpt = Checkpoint(checkpoint, checkpoint_every, name)
    saved = ckpt.load(fingerprint, rng)
    if saved is None:
        start, sampler, traces, draws = 0, make(None), {}, []
    else:
        start, state = saved
        sampler, traces, draws = make(state["sampler"]), state["traces"], state["draws"]
    progress = Progress(n_iter, name, verbose, first=start)
    for it in range(start, n_iter):
        stats = sampler.sweep(it)
        check_finite(stats["log_likelihood"], f"{name} sweep (log likelihood)", it)
        for key, value in stats.items():
            traces.setdefault(key, []).append(value)
        if it >= burn_in and (it - burn_in) % thin == 0:
            draws.append(sampler.draw())
        progress.step(it, stats["log_likelihood"], "loglik")
        if ckpt.due(it, n_iter):
            state = {"sampler": sampler.state(), "traces": traces, "draws": draws}
            ckpt.save(it + 1, state, fingerprint, rng)
    progress.close()
    ckpt.remove()
    traces = {k: np.asarray(v) for k, v in traces.items()}
    return ChainResult(traces, draws, sampler.final(), int(burn_in), int(thin))


def chain_rngs(rng, n_chains):
    """Generators of ``n_chains`` chains: ``rng`` itself for one chain (so a single chain draws
    what it always drew), otherwise ``rng.spawn(n_chains)`` (independent streams)."""
    return [rng] if n_chains == 1 else rng.spawn(n_chains)


def chain_checkpoint(path, chain, n_chains):
    """The checkpoint file of one chain: ``path`` itself for one chain, ``path.chain<c>``."""
    if path is None or n_chains == 1:
        return path
    return f"{os.fspath(path)}.chain{chain}"


def _one_chain(run, rng, chain, n_chains, relay=None):
    with chain_context(chain, n_chains, relay):
        return run(rng, chain)


def _one_blas_thread(run, rng, chain, n_chains, relay):
    with threadpool_limits(limits=1, user_api="blas"):
        return _one_chain(run, rng, chain, n_chains, relay)


def sample_chains(run, rng, n_chains):
    """``[run(rng_c, c) for each chain c]``, in parallel processes when there are several chains
    and more than one core (joblib's loky backend; one BLAS thread per chain process).

    ``run(rng, chain)`` runs one chain (typically a bound method calling :func:`run_chain`).
    Each chain's progress bar has its own line; chains in worker processes send their progress
    to this process, which draws the bars (:class:`~.progress.ChainBars`).
    """
    rngs = chain_rngs(rng, n_chains)
    n_jobs = min(n_chains, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if n_jobs <= 1:
        return [_one_chain(run, r, c, n_chains) for c, r in enumerate(rngs)]
    from joblib import Parallel, delayed

    bars = ChainBars()
    try:
        return Parallel(n_jobs=n_jobs, backend="loky")(
            delayed(_one_blas_thread)(run, r, c, n_chains, bars.relay) for c, r in enumerate(rngs)
        )
    finally:
        bars.stop()


def sample_estimator_chains(estimator, make, rng, *, burn_in, name, fingerprint):
    """The chains of an MCMC estimator: :func:`sample_chains` of :func:`run_chain` with the
    estimator's chain settings ``n_iter``, ``thin`` (1 if it has none), ``n_chains``,
    ``verbose``, ``checkpoint`` and ``checkpoint_every`` (``models._base.MCMC_CONSTRAINTS``).

    Parameters
    ----------
    make : callable
        ``make(rng, state)``: the sampler of the chain with generator ``rng``, new
        (``state=None``) or restored from a checkpoint.
    rng : numpy.random.Generator
        Seeds the chains (:func:`chain_rngs`).
    burn_in : int
        From :func:`check_burn_in`.
    name, fingerprint
        As for :func:`run_chain` (the fingerprint taken before anything draws from ``rng``).

    Returns
    -------
    list of ChainResult
    """

    def run(chain_rng, chain):
        return run_chain(
            lambda state: make(chain_rng, state),
            chain_rng,
            n_iter=estimator.n_iter,
            burn_in=burn_in,
            thin=getattr(estimator, "thin", 1),
            name=name,
            verbose=estimator.verbose,
            checkpoint=chain_checkpoint(estimator.checkpoint, chain, estimator.n_chains),
            checkpoint_every=estimator.checkpoint_every,
            fingerprint=fingerprint,
        )

    return sample_chains(run, rng, estimator.n_chains)


def chains_to_idata(posterior, sample_stats=None, dims=None, coords=None):
    """ArviZ ``InferenceData`` from per-chain lists: ``posterior[name]`` (and
    ``sample_stats[name]``) is a list, one entry per chain, of arrays whose first axis is the
    draw.

    This is the end of every MCMC fit: a :class:`~.convergence.ChainConvergenceWarning` names
    the identifiable quantities whose R-hat or bulk ESS says the chains have not converged
    (:func:`~.convergence.mcmc_diagnostics`), also for a single chain.
    """
    import arviz as az

    def stack(groups):
        return {key: np.stack(per_chain) for key, per_chain in (groups or {}).items()}

    idata = az.from_dict(
        posterior=stack(posterior), sample_stats=stack(sample_stats), dims=dims, coords=coords
    )
    warn_unconverged(mcmc_diagnostics(idata))
    return idata


def trace_label(estimator, name):
    """The label of the trace ``name`` of ``estimator`` (``TRACE_LABELS``).

    The VB history ``lower_bound_`` is labelled "lower bound" only when the estimator's class
    declares ``_trace_label = "lower bound"`` (a true evidence lower bound, which increases at
    every iteration); any other VB history is an "objective" (a monitoring or Monte Carlo
    objective that need not increase).
    """
    if name == "lower_bound":
        return getattr(estimator, "_trace_label", "objective")
    return TRACE_LABELS.get(name, str(name).replace("_", " "))


def whole_chain_traces(trace, kept, thin=1):
    """Every chain's trace on the iterations of the first chain's whole trace, and the burn-in.

    Parameters
    ----------
    trace : array_like, shape (n_iter,)
        The first chain's value at every iteration (``log_likelihood_``).
    kept : array_like, shape (n_chains, n_draws)
        Every chain's value at its retained iterations (``burn_in + j * thin``), as in
        ``idata_.sample_stats``; the first row is ``trace`` at those iterations.
    thin : int

    Returns
    -------
    traces : ndarray, shape (n_chains, n_iter)
        ``trace`` first; the other chains at their retained iterations, NaN elsewhere.
    burn_in : int
        The first retained iteration (the one at which ``trace`` matches ``kept[0]``).
    """
    trace = np.asarray(trace, dtype=float)
    kept = np.atleast_2d(np.asarray(kept, dtype=float))
    n_iter, (n_chains, n_draws), thin = trace.size, kept.shape, int(thin)
    earliest = max(n_iter - n_draws * thin, 0)
    candidates = range(earliest, max(n_iter - (n_draws - 1) * thin, earliest + 1))
    burn_in = next(
        (b for b in candidates if np.array_equal(trace[b::thin][:n_draws], kept[0])), earliest
    )
    traces = np.full((n_chains, n_iter), np.nan)
    traces[0] = trace
    positions = burn_in + thin * np.arange(n_draws)
    inside = positions < n_iter
    traces[1:, positions[inside]] = kept[1:, inside]
    return traces, int(burn_in)


def run_vb(
    step, *, max_iter, tol, name, verbose=False, initial=None, lag=1, min_iter=1, label="objective"
):
    """Iterate ``bound = step(iteration)`` until the lower bound settles.

    Stops after iteration ``n`` (1-based) when ``n >= min_iter`` and
    ``|relative change over the last lag iterations| / lag < tol``, or after ``max_iter``
    iterations with a ``ConvergenceWarning``.

    Parameters
    ----------
    step : callable
        ``step(iteration)`` runs one update (0-based ``iteration``) and returns the bound.
    initial : float or None
        The bound at the start, kept as the first entry of the history.
    lag, min_iter : int
        A Monte Carlo objective fluctuates: compare with the bound ``lag`` iterations back.
    label : str
        What the bound is, in progress lines (:func:`trace_label`: "lower bound" or
        "objective").

    Returns
    -------
    lower_bound : ndarray
        The history (``initial`` first when given).
    n_iter : int
        Iterations run.
    converged : bool
    """
    bounds = [] if initial is None else [float(check_finite(initial, f"{name}: initial bound", 0))]
    progress = Progress(max_iter, name, verbose)
    converged, n_iter = False, 0
    for it in range(max_iter):
        bound = float(check_finite(step(it), f"{name}: lower bound", it + 1))
        bounds.append(bound)
        progress.step(it, bound, label)
        n_iter = it + 1
        if len(bounds) > lag and n_iter >= min_iter:
            if abs(relative_improvement(bounds[-1 - lag], bound)) / lag < tol:
                converged = True
                break
    progress.close()
    if not converged:
        warnings.warn(
            f"{name} did not converge in max_iter={max_iter} iterations (relative change of the "
            f"lower bound above tol={tol}); raise max_iter",
            ConvergenceWarning,
            stacklevel=3,
        )
    return np.asarray(bounds), n_iter, converged
