"""BLAS threads: the estimators' thread policy and results that do not depend on it
.

Each model is fitted twice on the same data and seed, with BLAS limited to one thread and to two
(the estimators' own one-thread policy for small problems switched off, so two threads really
run); the outputs agree to a relative tolerance far below any statistical difference. Every
public estimator's fit and predict-time method goes through the one policy (``_threads``), and a
workflow job runs on exactly its rule's ``threads:`` (BLAS and numba).
"""

import json
import logging
import os
import sys
import threading
import types

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from omicsbayes.models import (
    BAMClassifier,
    BM2PCAClassifier,
    IBPFactorModel,
    RankFactorClassifier,
    _threads,
)


def _fit(name, X, y):
    if name == "BAM_L":
        model = BAMClassifier(ranking="listwise", max_iter=30, random_state=0)
        return model.fit(X, y).decision_function(X)
    if name == "BM2PCA":
        model = BM2PCAClassifier(n_components=3, max_iter=30, random_state=0)
        return model.fit(X, y).decision_function(X)
    if name == "R-L-BSVM":
        model = RankFactorClassifier.from_variant(
            "R-L-BSVM", n_factors=3, max_iter=15, random_state=0
        )
        return model.fit(X, y).decision_function(X)
    return IBPFactorModel(n_iter=20, burn_in=10, random_state=0).fit(X).latent_


@pytest.mark.parametrize("name", ["BAM_L", "BM2PCA", "IBP", "R-L-BSVM"])
def test_one_and_two_threads_agree(name, monkeypatch):
    monkeypatch.setattr(_threads, "SMALL_PROBLEM", 0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 40))
    y = (X[:, 0] + 0.5 * rng.standard_normal(120) > 0).astype(int)
    with threadpool_limits(limits=1):
        single = _fit(name, X, y)
    with threadpool_limits(limits=2):
        double = _fit(name, X, y)
    np.testing.assert_allclose(single, double, rtol=1e-6, atol=1e-8)


def _blas_threads():
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


class _Probe:
    """Records the BLAS threads its methods run with."""

    @_threads.limit_blas
    def fit(self, X):
        self.threads = _blas_threads()
        self._fit_shape = np.shape(X)
        return self

    @_threads.limit_blas
    def predict(self, X):
        return _blas_threads()


def test_limit_blas_one_thread_below_small_problem_and_no_limit_above():
    side = int(np.sqrt(_threads.SMALL_PROBLEM))
    small, large = np.zeros((side - 1, side - 1)), np.zeros((side + 1, side + 1))
    with threadpool_limits(limits=2, user_api="blas"):
        outer = _blas_threads()
        assert _Probe().fit(small).threads == 1
        assert _Probe().fit(large).threads == outer
        # at predict time the fitted size counts too: a large fit keeps the threads
        assert _Probe().fit(large).predict(small[:2]) == outer
        assert _Probe().fit(small).predict(small[:2]) == 1
        assert _blas_threads() == outer  # restored after each call


class _SequentialProbe(_Probe):
    _blas_sequential = True


def test_limit_blas_one_thread_at_every_size_for_sequential_estimators():
    side = int(np.sqrt(_threads.SMALL_PROBLEM))
    large = np.zeros((side + 1, side + 1))
    with threadpool_limits(limits=2, user_api="blas"):
        outer = _blas_threads()
        assert _SequentialProbe().fit(large).threads == 1
        assert _SequentialProbe().fit(large).predict(large) == 1
        assert _blas_threads() == outer


class _WorkerProbe(_SequentialProbe):
    """Records the worker threads map_blocks would use, and the threads it ran its blocks on."""

    _worker_blocks = True

    @_threads.limit_blas
    def fit(self, X):
        self.threads = _blas_threads()
        self.workers = _threads.worker_threads()
        self.names = _threads.map_blocks(lambda i: threading.current_thread().name, range(8))
        # a block that maps again runs its inner blocks on its own thread (no deadlock)
        self.nested = _threads.map_blocks(
            lambda i: set(_threads.map_blocks(lambda j: threading.current_thread().name, range(4))),
            range(4),
        )
        return self


def test_worker_threads_are_what_the_caller_allows():
    """An estimator with ``_worker_blocks`` runs map_blocks on as many threads as the caller's
    BLAS / OpenMP limit (at most the CPUs), while BLAS itself is held at one; everything else,
    and the estimator outside its methods, on one."""
    cpus = len(os.sched_getaffinity(0))
    with threadpool_limits(limits=1):
        probe = _WorkerProbe().fit(np.zeros((3, 3)))
        assert probe.workers == 1 and set(probe.names) == {threading.current_thread().name}
    with threadpool_limits(limits=2):
        probe = _WorkerProbe().fit(np.zeros((3, 3)))
        assert probe.threads == 1
        assert probe.workers == min(2, cpus)
        if cpus > 1:
            assert all(name.startswith("omicsbayes") for name in probe.names)
            assert all(len(names) == 1 for names in probe.nested)
        assert _SequentialProbe().fit(np.zeros((3, 3))).threads == 1
        assert _threads.worker_threads() == 1
        assert _threads.map_blocks(lambda a, b: a * b, [1, 2, 3], [4, 5, 6]) == [4, 10, 18]


def test_rflvm_count_draws_do_not_depend_on_the_worker_threads():
    """The negative-binomial RFLVM's feature blocks (Polya-gamma beta step, HMC gradient) and
    row blocks (likelihoods) run on the worker threads; every block draws from its own
    generator and every sum has a fixed order, so one and two threads give the same chain."""
    from omicsbayes.models import RFLVM

    rng = np.random.default_rng(3)
    Y = rng.negative_binomial(3.0, 0.4, size=(40, 1100)).astype(float)
    Y[rng.uniform(size=Y.shape) < 0.1] = np.nan
    draws = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads):
            model = RFLVM(
                likelihood="negative_binomial",
                n_random_features=8,
                n_iter=3,
                burn_in=1,
                hmc_leapfrog=5,
                random_state=0,
            ).fit(Y)
        draws.append(model.draws_)
    for one, two in zip(*draws, strict=True):
        for key in one:
            np.testing.assert_array_equal(one[key], two[key])


def test_blas_threads_of_shapes():
    assert _threads.blas_threads((10, 10), (3,)) == 1
    assert _threads.blas_threads((_threads.SMALL_PROBLEM, 1)) is None
    assert _threads.blas_threads() == 1


class _NestedProbe(_WorkerProbe):
    """``predict`` calls ``decision_function``, as a classifier's predict does; ``score`` calls
    a policy method of another estimator."""

    @_threads.limit_blas
    def decision_function(self, X):
        return _blas_threads(), _threads.worker_threads()

    @_threads.limit_blas
    def predict(self, X):
        return self.decision_function(X)

    @_threads.limit_blas
    def score(self, X):
        return _Probe().fit(X).threads


def test_nested_policy_methods_run_under_their_callers_policy(monkeypatch):
    """A policy method called from another of the same estimator keeps its caller's limits and
    worker threads (found once, before BLAS was limited); one of another estimator applies its
    own policy."""
    applied = []
    blas_limit = _threads.blas_limit
    monkeypatch.setattr(_threads, "blas_limit", lambda *s: applied.append(s) or blas_limit(*s))
    cpus = len(os.sched_getaffinity(0))
    with threadpool_limits(limits=2):
        probe = _NestedProbe().fit(np.zeros((3, 3)))
        applied.clear()
        assert probe.predict(np.zeros((3, 3))) == (1, min(2, cpus))
        assert len(applied) == 1
        applied.clear()
        side = int(np.sqrt(_threads.SMALL_PROBLEM))
        assert probe.score(np.zeros((side - 1, side - 1))) == 1
        assert len(applied) == 2


def test_the_controller_is_made_again_only_after_an_import(monkeypatch):
    """Finding the libraries is slow: the policy's ``ThreadpoolController`` is made once and
    again when a module has been imported since (a new library comes with an import)."""
    made = []

    class Counting(_threads.ThreadpoolController):
        def __init__(self):
            made.append(1)
            super().__init__()

    monkeypatch.setattr(_threads, "ThreadpoolController", Counting)
    monkeypatch.setattr(_threads, "_CONTROLLER", (0, None))
    small = np.zeros((3, 3))
    with threadpool_limits(limits=2, user_api="blas"):
        for _ in range(3):
            assert _Probe().fit(small).threads == 1
            assert _blas_threads() == 2
        assert len(made) == 1
        monkeypatch.setitem(sys.modules, "omicsbayes_test_imported", types.ModuleType("m"))
        assert _Probe().fit(small).threads == 1
        assert len(made) == 2


# ---------------------------------------------------------------- every estimator, every path
def _classification_data():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 6))
    return X, (X[:, 0] + 0.3 * rng.standard_normal(40) > 0).astype(int)


def _counts():
    return np.random.default_rng(2).poisson(3.0, size=(30, 12)).astype(float)


def _entries():
    rng = np.random.default_rng(3)
    flat = rng.choice(10 * 8, 35, replace=False)
    return flat // 8, flat % 8, rng.standard_normal(35), (10, 8)


def _cases():
    """``(name, build, fit args, predict-time method or None)`` for every public estimator whose
    methods go through ``_threads``."""
    from omicsbayes import models
    from omicsbayes.models.bsvm import BayesianSVM

    Xy = _classification_data()
    X_counts = _counts()
    y_counts = (X_counts[:, 0] > 3).astype(int)
    quick = {
        "BayesianProbitClassifier": dict(max_iter=5),
        "BAMClassifier": dict(max_iter=5),
        "BM2PCAClassifier": dict(n_components=2, max_iter=5),
        "BM2PCARegressor": dict(n_components=2, max_iter=5),
        "FullSVM": dict(max_iter=50),
        "PCASVM": dict(n_components=2, max_iter=50),
        "LDASVM": dict(max_iter=50),
        "LogisticBaseline": {},
        "LinearSVMBaseline": dict(max_iter=50),
        "RankFactorClassifier": dict(n_factors=2, max_iter=3),
        "PFAClassifier": dict(n_factors=2, n_iter=6, burn_in=3),
        "PoissonFactorAnalysis": dict(n_factors=2, n_iter=6, burn_in=3),
        "IBPFactorModel": dict(n_iter=6, burn_in=3),
        "ConstrainedMVGP": dict(lam=0.5, sigma2=1.0, max_rank=3),
        "TraceGP": dict(lam=0.5, sigma2=1.0, max_rank=3),
        "MVGP": dict(sigma2=1.0),
        "KPMF": dict(rank=2, sigma2=1.0),
        "PMF": dict(rank=2, sigma2=1.0),
        "ProDiGe": dict(C=1.0),
        "RFLVM": dict(n_iter=4, n_random_features=6, n_latent=2),
    }
    assert set(quick) == set(models.__all__), "a new estimator needs a case here"
    for name, params in quick.items():
        cls = getattr(models, name)
        if "matrix_completion" in cls.capabilities:
            yield name, lambda c=cls, p=params: c(**p), _entries(), None
        elif name == "PoissonFactorAnalysis":
            yield name, lambda c=cls, p=params: c(**p), (X_counts,), "transform"
        elif name in ("IBPFactorModel", "RFLVM"):
            yield name, lambda c=cls, p=params: c(**p), Xy[:1], None
        elif name == "PFAClassifier":
            yield name, lambda c=cls, p=params: c(**p), (X_counts, y_counts), "decision_function"
        else:
            method = "predict" if name == "BM2PCARegressor" else "decision_function"
            yield name, lambda c=cls, p=params: c(**p), Xy, method
    yield "BayesianSVM", lambda: BayesianSVM(max_iter=5), Xy, "decision_function"


_CASES = list(_cases())


@pytest.mark.parametrize("case", _CASES, ids=[c[0] for c in _CASES])
def test_every_estimator_path_applies_the_thread_policy(case, monkeypatch):
    """fit and the predict-time method each ask ``_threads.blas_threads`` (the one policy; that its
    answer is applied is the test above), and the process's threads are restored after."""
    name, build, args, method = case
    asked = []

    def spy(*shapes):
        asked.append(shapes)
        return 1

    monkeypatch.setattr(_threads, "blas_threads", spy)
    with threadpool_limits(limits=2, user_api="blas"):
        if _blas_threads() < 2:
            pytest.skip("BLAS runs one thread here whatever the limit")
        model = build()
        model.fit(*args)
        assert asked, f"{name}.fit does not go through _threads.blas_limit"
        if method is not None:
            asked.clear()
            getattr(model, method)(args[0])
            assert asked, f"{name}.{method} does not go through _threads.blas_limit"
        assert _blas_threads() == 2


# ---------------------------------------------------------------- a workflow job's threads
def test_run_job_runs_main_on_the_jobs_threads(tmp_path):
    """In process, with a stand-in for Snakemake's object: BLAS, and the worker threads of an
    estimator's blocks (``_threads.map_blocks``), on ``threads``."""
    from omicsbayes.jobs import run_job

    seen = {}

    def main(smk):
        seen.update(blas=_blas_threads(), workers=_threads._allowed_threads())

    smk = types.SimpleNamespace(threads=1, log=[str(tmp_path / "job.log")], input=[])
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with threadpool_limits(limits=2, user_api="blas"):
            if _blas_threads() < 2:
                pytest.skip("one thread here whatever the limit")
            run_job(smk, main)
            assert seen == {"blas": 1, "workers": 1}
            assert _blas_threads() == 2  # restored
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


_THREADS_SNAKEFILE = """
rule all:
    input: "one.json", "two.json"

rule probe:
    output: "{name}.json"
    threads: lambda wc: {"one": 1, "two": 2}[wc.name]
    script: "probe.py"
"""

_PROBE = """
import json, os
from omicsbayes.jobs import run_job

def main(smk):
    from threadpoolctl import threadpool_info

    from omicsbayes.models._threads import _allowed_threads

    blas = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    with open(smk.output[0], "w") as f:
        json.dump(dict(env, blas=blas, workers=_allowed_threads()), f)

run_job(snakemake, main)  # noqa: F821
"""


@pytest.mark.workflow
def test_workflow_jobs_run_on_their_threads(tmp_path, snakemake_run):
    """A real Snakemake run: a ``threads: 1`` job and a ``threads: 2`` job (``--cores 2``) see
    exactly their threads in the BLAS variables, in BLAS and as the worker threads of an
    estimator's blocks (``_threads.map_blocks``)."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: a two-thread job is scaled down to one")
    (tmp_path / "Snakefile").write_text(_THREADS_SNAKEFILE)
    (tmp_path / "probe.py").write_text(_PROBE)
    result = snakemake_run(tmp_path, "--cores", "2", snakefile=tmp_path / "Snakefile")
    assert result.returncode == 0, result.stderr[-3000:]
    for name, threads in (("one", 1), ("two", 2)):
        seen = json.loads((tmp_path / f"{name}.json").read_text())
        want = str(threads)
        assert seen == {
            "OMP_NUM_THREADS": want,
            "OPENBLAS_NUM_THREADS": want,
            "blas": threads,
            "workers": threads,
        }, name
