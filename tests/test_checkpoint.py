"""Checkpoint / resume of long MCMC fits (interrupted runs): a chain interrupted after
iteration k and resumed from its checkpoint gives exactly the draws of an uninterrupted chain."""

import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from omicsbayes.inference import checkpoint as ckpt_mod
from omicsbayes.inference.checkpoint import Checkpoint, fingerprint
from omicsbayes.models import RFLVM, IBPFactorModel, PoissonFactorAnalysis, ibp_factor, pfa
from omicsbayes.models.rflvm import _Chain

N_ITER, EVERY, STOP = 12, 3, 6


def _counts(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.poisson(rng.gamma(2.0, 2.0, size=(14, 1)) * rng.dirichlet(np.ones(7), 14) * 7)
    X = X.astype(float)
    mask = rng.random(X.shape) < 0.1
    return X, mask


def _gauss(seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((14, 2)) @ rng.standard_normal((2, 6))
    Y += 0.3 * rng.standard_normal(Y.shape)
    mask = rng.random(Y.shape) < 0.1
    return Y, mask


def _rflvm_result(m, Y, mask):
    out = {"latent_": m.latent_, "log_likelihood_": m.log_likelihood_, "n_active_": m.n_active_}
    for s, d in enumerate(m.draws_):
        out.update({f"draw{s}_{k}": v for k, v in d.items()})
    out["idata_X"] = m.idata_.posterior["X"].values
    out["heldout"] = np.array(m.log_likelihood(Y, mask))
    return out


def _pfa_result(m, X, mask):
    out = {
        "scores_": m.scores_,
        "components_": m.components_,
        "r_": m.r_,
        "p_": m.p_,
        "log_likelihood_": m.log_likelihood_,
    }
    out.update({f"draws_{k}": v for k, v in m._draws.items()})
    out["heldout"] = np.array(m.log_likelihood(X, mask))
    out["transform"] = m.transform(X[:4])  # seeded from the Generator after the last sweep
    return out


def _ibp_result(m, Y, mask):
    out = {
        "latent_": m.latent_,
        "loadings_": m.loadings_,
        "alpha_": m.alpha_,
        "n_active_": m.n_active_,
        "log_likelihood_": m.log_likelihood_,
    }
    for s, (x, w) in enumerate(zip(m._draws["latent"], m._draws["W"])):
        out[f"latent{s}"], out[f"W{s}"] = x, w
    out["heldout"] = np.array(m.log_likelihood(Y, mask))
    return out


# (estimator factory, data, result extractor, (object, method) called once per iteration)
CASES = {
    "rflvm": (
        lambda **kw: RFLVM(
            likelihood="negative_binomial", n_random_features=5, n_iter=N_ITER, **kw
        ),
        _counts,
        _rflvm_result,
        (_Chain, "step_dp"),
    ),
    "rflvm_gaussian": (
        lambda **kw: RFLVM(n_random_features=5, n_iter=N_ITER, x_sweeps=1, **kw),
        _gauss,
        _rflvm_result,
        (_Chain, "step_dp"),
    ),
    "pfa": (
        lambda **kw: PoissonFactorAnalysis(n_factors=3, n_iter=N_ITER, burn_in=4, **kw),
        _counts,
        _pfa_result,
        (pfa, "sample_theta"),
    ),
    "ibp": (
        lambda **kw: IBPFactorModel(n_iter=N_ITER, burn_in=4, **kw),
        _gauss,
        _ibp_result,
        (ibp_factor, "z_step"),
    ),
}


def _train(make_data):
    Y, mask = make_data()
    return np.where(mask, np.nan, Y), Y, mask


class _Recorder:
    """Wraps Checkpoint.save: records the iterations written and raises KeyboardInterrupt right
    after writing iteration ``stop_at`` (an interruption between two iterations)."""

    def __init__(self, monkeypatch):
        self.saved, self.stop_at = [], None
        original = Checkpoint.save

        def save(ck, iteration, state, key, rng):
            original(ck, iteration, state, key, rng)
            self.saved.append(iteration)
            if iteration == self.stop_at:
                raise KeyboardInterrupt

        monkeypatch.setattr(Checkpoint, "save", save)


def _count_calls(monkeypatch, owner, name):
    calls = []
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _assert_identical(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


@pytest.mark.parametrize("case", list(CASES))
def test_interrupted_fit_resumes_with_identical_draws(case, tmp_path, monkeypatch, caplog):
    make, make_data, result, (owner, per_iter) = CASES[case]
    Ytr, Y, mask = _train(make_data)
    path = tmp_path / "chain.ckpt"
    kw = {"random_state": 5, "checkpoint": str(path), "checkpoint_every": EVERY}
    rec = _Recorder(monkeypatch)
    calls = _count_calls(monkeypatch, owner, per_iter)

    reference = make(**kw).fit(Ytr)
    assert rec.saved == [3, 6, 9]  # not after the last iteration
    assert os.listdir(tmp_path) == []  # removed after a successful fit
    assert len(calls) == N_ITER
    reference = result(reference, Y, mask)

    rec.saved.clear()
    calls.clear()
    rec.stop_at = STOP
    with pytest.raises(KeyboardInterrupt):
        make(**kw).fit(Ytr)
    assert os.listdir(tmp_path) == [path.name]  # the checkpoint and no temporary file
    assert len(calls) == STOP

    rec.saved.clear()
    calls.clear()
    rec.stop_at = None
    with caplog.at_level(logging.INFO, logger="omicsbayes"):
        resumed = make(**kw).fit(Ytr)
    assert f"after iteration {STOP}" in caplog.text and "resuming" in caplog.text
    assert len(calls) == N_ITER - STOP  # only the remaining iterations ran
    assert rec.saved == [9]
    _assert_identical(reference, result(resumed, Y, mask))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("change", ["seed", "data"])
@pytest.mark.parametrize("case", ["rflvm", "pfa", "ibp"])
def test_checkpoint_of_other_settings_or_data_is_ignored(
    case, change, tmp_path, monkeypatch, caplog
):
    make, make_data, result, (owner, per_iter) = CASES[case]
    Ytr, Y, mask = _train(make_data)
    path = tmp_path / "chain.ckpt"
    rec = _Recorder(monkeypatch)
    rec.stop_at = STOP
    with pytest.raises(KeyboardInterrupt):
        make(random_state=1, checkpoint=path, checkpoint_every=EVERY).fit(Ytr)
    rec.stop_at = None
    calls = _count_calls(monkeypatch, owner, per_iter)
    seed = 2 if change == "seed" else 1
    if change == "data":
        i, j = np.argwhere(~mask)[0]
        Ytr = Ytr.copy()
        Ytr[i, j] += 1.0  # one observed entry differs
    kw = {"random_state": seed, "checkpoint": path, "checkpoint_every": EVERY}
    with caplog.at_level(logging.INFO, logger="omicsbayes"):
        other = make(**kw).fit(Ytr)  # the checkpoint does not apply
    assert "other settings or data" in caplog.text and "resuming" not in caplog.text
    assert len(calls) == N_ITER
    fresh = make(random_state=seed).fit(Ytr)  # no checkpointing at all
    _assert_identical(result(fresh, Y, mask), result(other, Y, mask))


def test_fingerprint_covers_params_data_and_nan_mask():
    Y, _ = _gauss()
    base = fingerprint(IBPFactorModel(n_iter=5, burn_in=1, random_state=0), Y)
    same = IBPFactorModel(
        n_iter=5, burn_in=1, random_state=0, checkpoint="x.pkl", checkpoint_every=2, verbose=True
    )
    assert fingerprint(same, Y.copy()) == base  # checkpoint settings and verbosity excluded
    assert fingerprint(IBPFactorModel(n_iter=6, burn_in=1, random_state=0), Y) != base
    assert fingerprint(IBPFactorModel(n_iter=5, burn_in=1, random_state=1), Y) != base
    assert fingerprint(RFLVM(n_iter=5, burn_in=1, random_state=0), Y) != base
    Y2 = Y.copy()
    Y2[3, 2] = np.nextafter(Y2[3, 2], np.inf)
    assert fingerprint(IBPFactorModel(n_iter=5, burn_in=1, random_state=0), Y2) != base
    Y3 = Y.copy()
    Y3[3, 2] = np.nan
    Y4 = Y.copy()
    Y4[3, 2] = 0.0  # NaN hashes as 0 plus its mask bit: still different from a real 0
    fp3 = fingerprint(IBPFactorModel(n_iter=5, burn_in=1, random_state=0), Y3)
    fp4 = fingerprint(IBPFactorModel(n_iter=5, burn_in=1, random_state=0), Y4)
    assert len({base, fp3, fp4}) == 3
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    assert fingerprint(PoissonFactorAnalysis(random_state=g1), Y) == fingerprint(
        PoissonFactorAnalysis(random_state=g2), Y
    )
    g2.random()
    assert fingerprint(PoissonFactorAnalysis(random_state=g1), Y) != fingerprint(
        PoissonFactorAnalysis(random_state=g2), Y
    )


def test_save_load_roundtrip_restores_generator(tmp_path):
    ck = Checkpoint(tmp_path / "c.pkl", every=2, name="test")
    rng = np.random.default_rng(7)
    rng.random(5)
    state = {"a": np.arange(6.0).reshape(2, 3), "draws": [np.ones(2)]}
    ck.save(4, state, "key", rng)
    expected = rng.random(10)
    rng2 = np.random.default_rng(123)
    it, loaded = ck.load("key", rng2)
    assert it == 4 and np.array_equal(loaded["a"], state["a"])
    assert np.array_equal(rng2.random(10), expected)
    assert ck.load("other key", np.random.default_rng(0)) is None
    assert [ck.due(i, 10) for i in range(10)] == [i in (1, 3, 5, 7) for i in range(10)]
    ck.remove()
    assert os.listdir(tmp_path) == []
    nested = Checkpoint(tmp_path / "new" / "c.pkl")
    nested.remove()  # nothing written yet, folder absent: no error
    nested.save(2, state, "key", rng)  # creates the folder
    (tmp_path / "new" / ".c.pkl.x1.tmp").write_bytes(b"left by a killed write")
    (tmp_path / "new" / "other.tmp").write_bytes(b"not ours")
    nested.remove()
    assert os.listdir(tmp_path / "new") == ["other.tmp"]
    off = Checkpoint(None)
    assert off.load("key", rng) is None and not any(off.due(i, 10) for i in range(10))


def test_failed_write_keeps_previous_checkpoint_and_no_temp_file(tmp_path, monkeypatch):
    ck = Checkpoint(tmp_path / "c.pkl")
    rng = np.random.default_rng(0)
    ck.save(3, {"x": np.zeros(4)}, "key", rng)
    before = (tmp_path / "c.pkl").read_bytes()

    def broken_dump(obj, f, protocol=None):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt_mod.pickle, "dump", broken_dump)
    with pytest.raises(OSError, match="disk full"):
        ck.save(6, {"x": np.ones(4)}, "key", rng)
    assert os.listdir(tmp_path) == ["c.pkl"]
    assert (tmp_path / "c.pkl").read_bytes() == before
    monkeypatch.undo()
    assert ck.load("key", rng)[0] == 3


def test_corrupt_checkpoint_is_ignored(tmp_path, caplog):
    make, make_data, result, _ = CASES["pfa"]
    Ytr, Y, mask = _train(make_data)
    path = tmp_path / "c.pkl"
    path.write_bytes(pickle.dumps({"format": 1, "fingerprint": "x"})[:10])
    with caplog.at_level(logging.WARNING, logger="omicsbayes"):
        m = make(random_state=4, checkpoint=path, checkpoint_every=EVERY).fit(Ytr)
    assert "unreadable" in caplog.text
    _assert_identical(result(make(random_state=4).fit(Ytr), Y, mask), result(m, Y, mask))
    assert not path.exists()


@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_checkpoint_every_out_of_range(value, tmp_path):
    X, _ = _counts()
    with pytest.raises(ValueError, match="checkpoint_every"):
        PoissonFactorAnalysis(
            n_iter=4, burn_in=1, checkpoint=tmp_path / "c", checkpoint_every=value
        ).fit(X)


CHILD = """
import signal, sys
import numpy as np
from omicsbayes.inference.checkpoint import Checkpoint
from omicsbayes.models import PoissonFactorAnalysis

original = Checkpoint.save
saves = 0

def save_then_wait(*args):
    global saves
    original(*args)
    saves += 1
    if saves == STOP_AFTER:
        open(sys.argv[2], "w").close()  # tell the parent, then wait for its SIGKILL
        signal.pause()

Checkpoint.save = save_then_wait
X = np.load(sys.argv[1])
PoissonFactorAnalysis(**KW).fit(X)
"""


def test_sigkill_during_fit_then_resume(tmp_path, caplog):
    """A hard kill (SIGKILL) of a process in the middle of a fit: the next fit resumes from the
    last checkpoint written and ends with the draws of an uninterrupted chain.

    The child signals through a file once its second checkpoint is written and then waits, so the
    kill lands mid-chain at a known iteration whatever the machine's speed."""
    X, mask = _counts()
    Xtr = np.where(mask, np.nan, X)
    np.save(tmp_path / "X.npy", Xtr)
    path, ready = tmp_path / "chain.ckpt", tmp_path / "ready"
    kw = dict(n_factors=3, n_iter=30, burn_in=10, random_state=9)
    kw_ck = dict(kw, checkpoint=str(path), checkpoint_every=2)
    script = CHILD.replace("KW", repr(kw_ck)).replace("STOP_AFTER", "2")
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), str(tmp_path / "X.npy"), str(ready)]
    )
    try:
        deadline = time.monotonic() + 300  # a hung child fails the test instead of hanging it
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ready.exists(), "the child never reached its second checkpoint"
        assert proc.poll() is None, "the child finished; it should be waiting to be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    ready.unlink()
    assert proc.returncode == -signal.SIGKILL  # killed, not finished
    assert path.exists()
    with caplog.at_level(logging.INFO, logger="omicsbayes"):
        resumed = PoissonFactorAnalysis(**kw_ck).fit(Xtr)
    assert "resuming from checkpoint" in caplog.text
    reference = PoissonFactorAnalysis(**kw).fit(Xtr)
    _assert_identical(_pfa_result(reference, X, mask), _pfa_result(resumed, X, mask))
    assert sorted(os.listdir(tmp_path)) == ["X.npy"]
