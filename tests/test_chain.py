"""The shared MCMC driver and VB loop (omicsbayes.inference.chain), several chains
with R-hat / ESS and the warning of an unconverged fit, burn-in following n_iter."""

import logging
import re
import warnings

import arviz as az
import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import poisson
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from omicsbayes.inference import NumericalError, progress
from omicsbayes.inference import chain as chain_mod
from omicsbayes.inference.chain import (
    burn_in_of,
    run_chain,
    run_vb,
    sample_chains,
    sample_estimator_chains,
)
from omicsbayes.inference.convergence import ChainConvergenceWarning, mcmc_diagnostics
from omicsbayes.models import (
    RFLVM,
    IBPFactorModel,
    PFAClassifier,
    PoissonFactorAnalysis,
    RankFactorClassifier,
)


class _Counter:
    """A toy sampler: iteration it has log likelihood -it (or NaN at ``bad``)."""

    def __init__(self, rng, bad=None):
        self.rng, self.bad, self.value = rng, bad, None

    def sweep(self, it):
        self.value = it
        ll = np.nan if it == self.bad else -float(it)
        return {"log_likelihood": ll, "u": self.rng.uniform()}

    def draw(self):
        return self.value

    def state(self):
        return self.value

    def final(self):
        return "done"


@pytest.mark.parametrize(("n_iter", "burn_in", "thin"), [(10, 0, 1), (10, 4, 3), (7, 6, 2)])
def test_run_chain_keeps_burn_in_plus_multiples_of_thin(n_iter, burn_in, thin):
    rng = np.random.default_rng(0)
    out = run_chain(
        lambda state: _Counter(rng), rng, n_iter=n_iter, burn_in=burn_in, thin=thin, name="toy"
    )
    assert out.draws == list(range(burn_in, n_iter, thin))
    np.testing.assert_array_equal(out.traces["log_likelihood"], -np.arange(n_iter))
    np.testing.assert_array_equal(out.traces["u"], np.random.default_rng(0).uniform(size=n_iter))
    assert out.final == "done"
    np.testing.assert_array_equal(out.kept("log_likelihood"), -np.array(out.draws))


def test_sample_estimator_chains_runs_the_estimator_settings(tmp_path):
    """Each chain is run_chain with the estimator's settings on its spawned generator, and
    checkpoints to its own file (removed after the chain)."""
    from types import SimpleNamespace

    est = SimpleNamespace(
        n_iter=9, thin=2, n_chains=2, verbose=False, checkpoint=tmp_path / "c", checkpoint_every=3
    )
    chains = sample_estimator_chains(
        est,
        lambda rng, state: _Counter(rng),
        np.random.default_rng(5),
        burn_in=3,
        name="toy",
        fingerprint="f",
    )
    for chain, rng in zip(chains, np.random.default_rng(5).spawn(2), strict=True):
        assert chain.draws == [3, 5, 7] and (chain.burn_in, chain.thin) == (3, 2)
        np.testing.assert_array_equal(chain.traces["u"], rng.uniform(size=9))
    assert not list(tmp_path.iterdir())


def test_run_chain_refuses_a_non_finite_log_likelihood():
    rng = np.random.default_rng(0)
    with pytest.raises(NumericalError, match="toy sweep .* at iteration 3"):
        run_chain(lambda s: _Counter(rng, bad=3), rng, n_iter=6, burn_in=0, name="toy")


def test_burn_in_none_is_half_of_n_iter():
    assert burn_in_of(None, 61) == 30 and burn_in_of(5, 61) == 5
    # IBPFactorModel(n_iter=60) failed with the fixed default burn_in=100
    Y = np.random.default_rng(0).standard_normal((6, 3))
    for model in (IBPFactorModel(n_iter=6), RFLVM(n_iter=6, n_random_features=3, hmc_moves=0)):
        assert model.fit(Y).idata_.posterior.sizes["draw"] == 3
    X = np.random.default_rng(1).poisson(3.0, size=(6, 4)).astype(float)
    assert PoissonFactorAnalysis(n_factors=2, n_iter=6).fit(X).idata_.posterior.sizes["draw"] == 3


def _geometric(ratio, scale=1.0):
    """Bounds ``-1 - scale * ratio**it`` (increasing to -1)."""
    return lambda it: -1.0 - scale * ratio**it


def test_run_vb_stops_at_the_first_iteration_below_tol():
    step = _geometric(0.5)
    bounds = np.array([step(i) for i in range(60)])
    change = np.abs(np.diff(bounds) / np.abs(bounds[:-1]))
    expected = int(np.argmax(change < 1e-6)) + 2  # change[i] compares iterations i and i + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        lb, n_iter, converged = run_vb(step, max_iter=100, tol=1e-6, name="toy")
    assert converged and n_iter == expected and lb.size == expected
    np.testing.assert_array_equal(lb, bounds[:expected])
    # lag: the change over `lag` iterations, per iteration; min_iter holds off the check
    lb, n_iter, _ = run_vb(step, max_iter=100, tol=1e-6, name="toy", lag=5, min_iter=30)
    assert n_iter == 30
    lb, n_iter, _ = run_vb(step, max_iter=100, tol=1e-6, name="toy", initial=-7.0)
    assert lb[0] == -7.0 and lb.size == n_iter + 1


def test_run_vb_warns_when_max_iter_is_reached():
    with pytest.warns(ConvergenceWarning, match="toy did not converge in max_iter=5"):
        _, n_iter, converged = run_vb(_geometric(0.9), max_iter=5, tol=1e-12, name="toy")
    assert n_iter == 5 and not converged


def _draw(rng, chain):
    return chain, rng.uniform(size=3)


def test_sample_chains_seeds_each_chain_from_one_generator(monkeypatch):
    one = sample_chains(_draw, np.random.default_rng(4), 1)
    np.testing.assert_array_equal(one[0][1], np.random.default_rng(4).uniform(size=3))
    parallel = sample_chains(_draw, np.random.default_rng(4), 3)
    monkeypatch.setattr(chain_mod.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    sequential = sample_chains(_draw, np.random.default_rng(4), 3)
    spawned = np.random.default_rng(4).spawn(3)
    for c in range(3):
        assert parallel[c][0] == sequential[c][0] == c
        np.testing.assert_array_equal(parallel[c][1], sequential[c][1])
        np.testing.assert_array_equal(parallel[c][1], spawned[c].uniform(size=3))
    assert not np.allclose(parallel[0][1], parallel[1][1])


def _counts(seed=0, n=15, d=6):
    rng = np.random.default_rng(seed)
    return rng.poisson(rng.gamma(5.0, 1.0, size=(n, 1)) * np.ones((1, d))).astype(float)


def test_each_chain_is_the_single_chain_fit_of_its_spawned_generator():
    X = _counts()
    mask = np.zeros(X.shape, bool)
    mask[::4, 1] = True
    Xtr = np.where(mask, np.nan, X)
    kw = {"n_factors": 2, "n_iter": 10, "burn_in": 4, "thin": 2}
    both = PoissonFactorAnalysis(n_chains=2, random_state=3, **kw).fit(Xtr)
    assert both.idata_.posterior["theta"].shape[:2] == (2, 3)
    singles = [
        PoissonFactorAnalysis(random_state=g, **kw).fit(Xtr)
        for g in np.random.default_rng(3).spawn(2)
    ]
    for c, single in enumerate(singles):
        np.testing.assert_array_equal(
            both.idata_.posterior["theta"].values[c], single.idata_.posterior["theta"].values[0]
        )
    np.testing.assert_array_equal(both.scores_, singles[0].scores_)  # factors: first chain
    np.testing.assert_array_equal(both.log_likelihood_, singles[0].log_likelihood_)
    np.testing.assert_array_equal(  # every chain's whole trace, burn-in included
        both.log_likelihood_chains_, [single.log_likelihood_ for single in singles]
    )
    # held-out: the predictive averages over the draws of both chains
    rows, cols = np.nonzero(mask)
    y = X[rows, cols]
    rate = np.concatenate(
        [
            np.einsum("sik,sik->si", s._draws["theta"][:, rows], s._draws["phi"][:, cols])
            for s in singles
        ]
    )
    logp = poisson.logpmf(y, rate)
    pooled = np.sum(logsumexp(logp, axis=0) - np.log(len(logp)))
    assert both.log_likelihood(X, mask) == pytest.approx(pooled, rel=1e-12)


def test_rhat_near_one_for_well_mixed_chains():
    """One-factor PFA (no label switching) on a tiny cohort: four chains of 400 sweeps."""
    model = PoissonFactorAnalysis(n_factors=1, n_iter=400, n_chains=4, random_state=1)
    table = mcmc_diagnostics(model.fit(_counts(1)).idata_)
    assert set(table.index) == {"log_likelihood_observed", "predictive_mean"}
    assert (table["n_chains"] == 4).all() and (table["n_draws"] == 200).all()
    assert (table["r_hat"] < 1.03).all() and not table["flagged"].any()
    assert (table["ess_bulk"] > 200).all()


def test_rhat_flags_chains_started_apart_and_cut_short():
    """IBP chains started with 0 and 30 features, six sweeps each, no burn-in."""
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((12, 2)) @ rng.standard_normal((2, 5))
    Y += 0.3 * rng.standard_normal(Y.shape)
    kw = {"n_iter": 6, "burn_in": 0, "alpha": 0.01, "alpha_prior": None}
    low = IBPFactorModel(n_init_features=0, random_state=1, **kw).fit(Y)
    high = IBPFactorModel(n_init_features=30, random_state=2, **kw).fit(Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no numpy warning leaks
        table = mcmc_diagnostics(az.concat(low.idata_, high.idata_, dim="chain"))
    assert table.loc["log_likelihood_observed", "r_hat"] > 1.05
    assert table.loc["log_likelihood_observed", "flagged"]
    # the number of active features is not identifiable: its mean, no R-hat, never flagged
    assert np.isnan(table.loc["n_active", ["r_hat", "ess_bulk"]].astype(float)).all()
    assert not table.loc["n_active", "identifiable"] and not table.loc["n_active", "flagged"]
    assert table.loc["n_active", "mean"] == pytest.approx(
        np.mean(
            np.r_[
                low.idata_.posterior["n_active"].values.ravel(),
                high.idata_.posterior["n_active"].values.ravel(),
            ]
        )
    )


def _idata(loglik, n_active):
    """Through the driver's own summary: log likelihoods and active counts, chains x draws."""
    return chain_mod.chains_to_idata(
        posterior={"n_active": list(n_active)},
        sample_stats={"log_likelihood_observed": list(loglik)},
    )


def test_chains_that_disagree_warn_naming_the_quantity_and_values():
    rng = np.random.default_rng(3)
    loglik = rng.normal(size=(2, 200)) + np.array([[0.0], [4.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.warns(UserWarning, match=r"log_likelihood_observed: R-hat (\d+\.\d+)") as rec:
            _idata(loglik, np.full((2, 200), 3))
    assert issubclass(rec[0].category, ChainConvergenceWarning)
    r_hat = float(re.search(r"R-hat (\d+\.\d+)", str(rec[0].message)).group(1))
    assert r_hat == pytest.approx(az.rhat(az.convert_to_dataset(loglik))["x"].item(), abs=0.01)
    assert "n_active" not in str(rec[0].message)


def test_one_chain_is_diagnosed_within_itself():
    """A random walk of 50 draws: split R-hat and ESS of the one chain flag it."""
    walk = np.cumsum(np.random.default_rng(4).normal(size=(1, 50)), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.warns(ChainConvergenceWarning, match="1 chain\\(s\\) x 50 draws"):
            idata = _idata(walk, np.arange(50)[None] % 4)
        table = mcmc_diagnostics(idata)
    row = table.loc["log_likelihood_observed"]
    assert row["flagged"] and row["ess_bulk"] < 20 and row["r_hat"] > 1.05
    halves = az.convert_to_dataset(walk.reshape(2, 25))
    assert row["r_hat"] == pytest.approx(az.rhat(halves)["x"].item())
    assert not table.loc["n_active", "flagged"]


def test_well_mixed_chains_do_not_warn():
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = mcmc_diagnostics(_idata(rng.normal(size=(2, 300)), rng.integers(2, 5, (2, 300))))
    assert not table["flagged"].any() and table.loc["log_likelihood_observed", "ess_bulk"] > 400


def test_a_two_chain_rflvm_cut_short_warns():
    Y = np.random.default_rng(6).poisson(3.0, size=(20, 6)).astype(float)
    model = RFLVM(likelihood="poisson", n_iter=16, n_chains=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.warns(UserWarning, match="log_likelihood_observed: R-hat"):
            model.fit(Y)


def test_several_chains_of_every_sampler(tmp_path):
    X = _counts(2, n=12, d=5)
    y = np.arange(12) % 2
    clf = PFAClassifier(n_factors=2, n_iter=6, n_chains=2, svm_max_iter=10, random_state=0)
    assert clf.fit(X + 3 * y[:, None], y).idata_.posterior.sizes["chain"] == 2
    Y = np.log1p(X)
    ibp = IBPFactorModel(n_iter=6, n_chains=2, random_state=0).fit(Y)
    assert len(ibp._draws["W"]) == 6 and ibp.idata_.posterior.sizes["chain"] == 2
    rf = RFLVM(n_iter=4, n_chains=2, n_random_features=3, hmc_moves=0, random_state=0).fit(Y)
    assert len(rf.draws_) == 4 and rf.idata_.posterior["X"].shape[:2] == (2, 2)
    gibbs = RankFactorClassifier(
        n_factors=2, inference="gibbs", n_samples=5, n_chains=2, random_state=0
    ).fit(Y, y)
    assert gibbs.idata_.posterior["train_decision"].shape[:2] == (2, 5)
    assert gibbs.log_likelihood_.shape == (10,)
    assert np.all(np.isfinite(gibbs.decision_function(Y)))
    for i, model in enumerate((clf, ibp, rf, gibbs)):  # savable (workflow's draws.nc)
        sampler = getattr(model, "pfa_", model)  # PFAClassifier: its factor model's chains
        assert sampler.log_likelihood_chains_.shape == (2, sampler.log_likelihood_.size)
        np.testing.assert_array_equal(sampler.log_likelihood_chains_[0], sampler.log_likelihood_)
        path = tmp_path / f"draws{i}.nc"
        model.idata_.to_netcdf(path)
        assert az.from_netcdf(path).posterior.sizes["chain"] == 2


def test_unfitted_samplers_raise_not_fitted_error():
    X = _counts(3, n=4, d=3)
    mask = np.ones(X.shape, bool)
    for call in (
        lambda: PoissonFactorAnalysis().log_likelihood(X, mask),
        lambda: PoissonFactorAnalysis().transform(X),
        lambda: PFAClassifier().transform(X),
        lambda: IBPFactorModel().log_likelihood(X, mask),
        lambda: RFLVM().log_likelihood(X, mask),
    ):
        with pytest.raises(NotFittedError):
            call()


def test_each_chain_checkpoints_to_its_own_file(tmp_path, monkeypatch):
    """Chain 1 interrupted after its 6th sweep resumes from ``<checkpoint>.chain1``; chain 0,
    finished, starts over from its seed: the fit equals an uninterrupted one."""
    from omicsbayes.inference.checkpoint import Checkpoint

    monkeypatch.setattr(chain_mod.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    X = _counts(4, n=10, d=4)
    path = tmp_path / "pfa.ckpt"
    kw = {"n_factors": 2, "n_iter": 12, "n_chains": 2, "random_state": 7}
    reference = PoissonFactorAnalysis(**kw).fit(X)
    original = Checkpoint.save

    def save(ck, iteration, state, key, rng):
        original(ck, iteration, state, key, rng)
        if ck.path.endswith(".chain1") and iteration == 6:
            raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoint, "save", save)
    with pytest.raises(KeyboardInterrupt):
        PoissonFactorAnalysis(checkpoint=path, checkpoint_every=3, **kw).fit(X)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pfa.ckpt.chain1"]
    monkeypatch.setattr(Checkpoint, "save", original)
    resumed = PoissonFactorAnalysis(checkpoint=path, checkpoint_every=3, **kw).fit(X)
    assert list(tmp_path.iterdir()) == []
    for name in ("theta", "phi"):
        np.testing.assert_array_equal(
            resumed.idata_.posterior[name].values, reference.idata_.posterior[name].values
        )


def _toy_chains(verbose, n_chains=2):
    def run(rng, chain):
        return run_chain(
            lambda state: _Counter(rng), rng, n_iter=10, burn_in=2, name="toy", verbose=verbose
        )

    return sample_chains(run, np.random.default_rng(0), n_chains)


@pytest.mark.parametrize("parallel", [False, True])
def test_each_chain_draws_its_own_bar_and_verbose_false_draws_none(parallel, monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "_interactive", lambda: True)  # as in a terminal
    if not parallel:
        monkeypatch.setattr(chain_mod.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    _toy_chains(verbose=True)
    err = capsys.readouterr().err
    finals = re.findall(r"toy chain (\d)/2: 100%\|[^\r\n]*10/10", err)
    assert sorted(set(finals)) == ["1", "2"]  # two bars, each run to its end
    assert "\x1b[A" in err  # the second bar is drawn on its own line (position=1)
    _toy_chains(verbose=False)
    assert capsys.readouterr().err == ""


def test_a_short_fit_stays_silent_unless_tqdm_delay_says_otherwise(monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY", 60.0)
    monkeypatch.setattr(progress, "_interactive", lambda: True)  # as in a terminal
    monkeypatch.setattr(chain_mod.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.delenv("TQDM_DELAY", raising=False)
    _toy_chains(verbose=True)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("TQDM_DELAY", "0")
    _toy_chains(verbose=True)
    assert "toy chain 2/2: 100%" in capsys.readouterr().err
    monkeypatch.setenv("TQDM_DELAY", "soon")
    with pytest.raises(ValueError, match="TQDM_DELAY must be a number of seconds. Got 'soon'"):
        _toy_chains(verbose=True)


def test_progress_without_a_terminal_is_a_line_every_tenth(monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "_interactive", lambda: False)  # a log file or a pipe
    monkeypatch.setattr(chain_mod.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    # a logger without handlers, whatever logging an earlier test configured: the lines then go
    # to stderr themselves
    quiet = logging.getLogger("omicsbayes.test_progress_without_a_terminal")
    monkeypatch.setattr(quiet, "propagate", False)
    monkeypatch.setattr(progress, "logger", quiet)
    _toy_chains(verbose=True)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 20 and "\r" not in "".join(lines)
    assert lines[9].startswith("toy chain 1/2 iteration 10/10 loglik -9")
    assert lines[19].startswith("toy chain 2/2 iteration 10/10")


@pytest.mark.parametrize(("n_chains", "n_draws"), [(1, 50), (1, 9), (2, 20), (4, 101)])
def test_split_diagnostics_are_arviz_for_every_element_at_once(n_chains, n_draws):
    """Autocorrelated, independent and tied (rounded) elements, one chain apart."""
    from omicsbayes.inference.convergence import split_diagnostics

    rng = np.random.default_rng(n_draws)
    walk = rng.normal(size=(n_chains, n_draws, 6))
    for t in range(1, n_draws):
        walk[:, t] += 0.9 * walk[:, t - 1]
    x = np.concatenate([walk, rng.normal(size=walk.shape), np.round(walk)], axis=2)
    x[:, :, 0] += 2.0 * np.arange(n_chains)[:, None]
    r_hat, ess_bulk, ess_tail = split_diagnostics(x)
    halves = x if n_chains > 1 else x[:, : 2 * (n_draws // 2)].reshape(2, n_draws // 2, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's own warnings about short chains
        expected = az.rhat(az.convert_to_dataset({"v": halves}))["v"].values
        data = az.convert_to_dataset({"v": x})
        bulk = az.ess(data, method="bulk")["v"].values
        tail = az.ess(data, method="tail")["v"].values
    np.testing.assert_allclose(r_hat, expected, rtol=1e-12)
    np.testing.assert_allclose(ess_bulk, bulk, rtol=1e-10)
    np.testing.assert_allclose(ess_tail, tail, rtol=1e-10)


def test_whole_chain_traces_place_every_chain_at_its_retained_iterations():
    trace = -np.arange(10.0)  # burn_in 3, thin 2: iterations 3, 5, 7, 9 kept
    kept = np.array([trace[3::2], [-30.0, -50.0, -70.0, -90.0]])
    traces, burn_in = chain_mod.whole_chain_traces(trace, kept, thin=2)
    assert burn_in == 3
    np.testing.assert_array_equal(traces[0], trace)
    np.testing.assert_array_equal(np.flatnonzero(~np.isnan(traces[1])), [3, 5, 7, 9])
    np.testing.assert_array_equal(traces[1, 3::2], kept[1])


def test_a_vb_history_is_a_lower_bound_only_where_the_model_says_so():
    from omicsbayes.models import BAMClassifier, BM2PCAClassifier

    assert chain_mod.trace_label(BAMClassifier(), "lower_bound") == "lower bound"
    assert chain_mod.trace_label(BM2PCAClassifier(), "lower_bound") == "lower bound"
    assert chain_mod.trace_label(RankFactorClassifier(), "lower_bound") == "objective"
    assert chain_mod.trace_label(RFLVM(), "log_likelihood") == "log likelihood"


@pytest.mark.parametrize(
    ("declared", "label"), [(None, "objective"), ("lower bound", "lower bound")]
)
def test_vb_progress_lines_name_what_the_history_is(declared, label, caplog):
    from omicsbayes.models._base import VBEstimator

    class Toy(VBEstimator):
        def __init__(self, max_iter=4, tol=0.0, verbose=False):
            self.max_iter, self.tol, self.verbose = max_iter, tol, verbose

    if declared is not None:
        Toy._trace_label = declared
    with caplog.at_level("INFO", logger="omicsbayes"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        Toy()._run_vb(lambda it: -10.0 / (it + 1), name="toy VB")
    assert f"toy VB iteration 4/4 {label} -2.5" in caplog.text
