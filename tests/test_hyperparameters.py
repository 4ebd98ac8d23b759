"""Each hyperparameter changed alone to a value in its documented range gives a working estimator
("changing one hyperparameter never breaks another").

Generated from the estimators themselves: every class in ``omicsbayes.models``, every parameter of
its ``__init__``, values read from its ``_parameter_constraints`` (both ends of an ``Interval``,
just inside an open end; each option of ``StrOptions``/``Options``; ``None``; both booleans; an
int, ``None`` and a ``RandomState`` for ``random_state``). The estimator is fitted on a tiny
problem chosen by its ``capabilities`` with its iteration count cut to a few (``n_iter=4``,
``max_iter=3``) unless that count is the parameter being changed, in which case every other
parameter keeps its default (so ``n_iter=1`` runs with the default ``burn_in``).
"""

import inspect
import warnings
from numbers import Integral

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, Options

from omicsbayes import models
from omicsbayes.models._capabilities import capabilities_of

TINY = {"n_iter": 4, "max_iter": 3}
N_SAMPLES, N_FEATURES = 32, 24


def _inside(interval, end):
    """A value at the ``end`` ("left"/"right") of ``interval``, or just inside when open."""
    value = getattr(interval, end)
    if value is None or not np.isfinite(value):
        return None
    closed = interval.closed in (end, "both")
    if closed:
        return value
    if interval.type is Integral:
        return value + 1 if end == "left" else value - 1
    step = 1e-3 * max(1.0, abs(value))
    return value + step if end == "left" else value - step


def sweep_values(constraints):
    """The values of one parameter's documented range the sweep tries."""
    values = []
    for constraint in constraints:
        if isinstance(constraint, Interval):
            values += [
                v
                for v in (_inside(constraint, "left"), _inside(constraint, "right"))
                if v is not None
            ]
        elif isinstance(constraint, Options):
            values += sorted(constraint.options, key=repr)
        elif constraint is None:
            values.append(None)
        elif constraint == "boolean":
            values += [True, False]
        elif constraint == "random_state":
            values += [None, 0, np.random.RandomState(0)]
    return values


def _case_id(value):
    """A test id that is the same in every process (pytest-xdist workers must collect identical
    ids, so no object reprs carrying memory addresses)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    return type(value).__name__


def _init_params(cls):
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def _cases():
    for name in models.__all__:
        cls = getattr(models, name)
        constraints = getattr(cls, "_parameter_constraints", {})  # none: a failure below
        for param in _init_params(cls):
            for value in sweep_values(constraints.get(param, [])):
                yield pytest.param(name, param, value, id=f"{name}-{param}={_case_id(value)}")


def tiny_problem(cls, rng, params=None):
    """``(args, check)``: fit arguments for a tiny problem the class can take (by its
    capabilities and, for a ``likelihood`` parameter, the data type it names), and a function of
    the fitted estimator returning its outputs to check."""
    caps = capabilities_of(cls)
    if (params or {}).get("likelihood") == "bernoulli":
        caps = caps - {"counts"} | {"binary"}
    X = rng.normal(size=(N_SAMPLES, N_FEATURES))
    if "matrix_completion" in caps:
        shape = (10, 8)
        cells = rng.permutation(shape[0] * shape[1])[:40]
        rows, cols = np.divmod(cells, shape[1])
        values = (rng.random(40) < 0.5).astype(float)
        return (rows, cols, values, shape, np.eye(shape[0]), np.eye(shape[1])), (
            lambda est: est.predict(rows, cols)
        )
    if "classifier" in caps:
        y = np.arange(N_SAMPLES) % 2
        X[:, :3] += 1.5 * y[:, None]
        if "counts" in caps:
            X = rng.poisson(3.0 + 3.0 * y[:, None], size=X.shape).astype(float)
        return (X, y), lambda est: est.decision_function(X)
    if "regressor" in caps:
        y = X[:, 0] - X[:, 1]
        return (X, y), lambda est: est.predict(X)
    if "heldout_scoring" in caps:
        if "counts" in caps:
            X = rng.poisson(3.0, size=X.shape).astype(float)
        if "binary" in caps:
            X = (X > 0).astype(float)
        mask = rng.random(X.shape) < 0.1
        observed = np.where(mask, np.nan, X)
        return (observed,), lambda est: est.log_likelihood(X, mask)
    raise AssertionError(
        f"{cls.__name__} declares no capability that says how to fit it "
        f"(capabilities: {sorted(caps)}); declare one of classifier, regressor, "
        "heldout_scoring, matrix_completion"
    )


@pytest.mark.parametrize(("name", "param", "value"), list(_cases()))
def test_one_hyperparameter_changed_alone_fits(name, param, value):
    cls = getattr(models, name)
    accepted = _init_params(cls)
    params = {} if param in TINY else {k: v for k, v in TINY.items() if k in accepted}
    params[param] = value
    estimator = cls(**params)
    args, outputs = tiny_problem(cls, np.random.default_rng(0), params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a few iterations by design
        assert estimator.fit(*args) is estimator
    out = np.asarray(outputs(estimator), dtype=float)
    assert np.all(np.isfinite(out)), f"{estimator!r} gives non-finite outputs"


@pytest.mark.parametrize("name", models.__all__)
def test_every_parameter_has_a_documented_range(name):
    """A class with ``_parameter_constraints`` constrains every ``__init__`` parameter (so the
    sweep above sees them all) and nothing else."""
    cls = getattr(models, name)
    constraints = getattr(cls, "_parameter_constraints", None)
    assert constraints is not None, f"{name} declares no _parameter_constraints"
    assert set(constraints) == set(_init_params(cls))
