"""Checkpoints of a Markov chain: the sampler state written at intervals, so that an interrupted
fit resumes where it stopped and gives the same draws as an uninterrupted chain.

A checkpoint is one pickle file holding the number of completed iterations, the sampler's state
(every array the next iteration reads, the draws retained so far, the histories) and the
``bit_generator.state`` of the fit's numpy Generator, tagged with a fingerprint of the estimator's
hyperparameters and of the input data. A checkpoint whose fingerprint does not match the current
fit (other settings or other data) is ignored with a warning and the chain starts over. Writes
are atomic: a temporary file in the same folder, then ``os.replace``, so a kill during a write
leaves the previous checkpoint intact. The file is removed after a successful fit.

Checkpoints are pickles: only resume from files this library wrote.
"""

import hashlib
import logging
import os
import pickle
import tempfile

import numpy as np

logger = logging.getLogger("omicsbayes")

FORMAT = 2
"""Version of the checkpoint layout; part of every fingerprint."""

NOT_FINGERPRINTED = ("checkpoint", "checkpoint_every", "verbose")
"""Estimator parameters that do not change the chain's draws."""


def _canonical(value, h):
    """Feed a reproducible encoding of a hyperparameter value to the hash ``h``."""
    if isinstance(value, np.random.Generator):
        h.update(b"Generator")
        _canonical(value.bit_generator.state, h)
    elif isinstance(value, np.random.RandomState):
        h.update(b"RandomState")
        _canonical(value.get_state(legacy=False), h)
    elif isinstance(value, np.ndarray):
        _hash_array(value, h)
    elif isinstance(value, dict):
        h.update(b"dict%d" % len(value))
        for key in sorted(value, key=repr):
            _canonical(key, h)
            _canonical(value[key], h)
    elif isinstance(value, list | tuple):
        h.update(b"%s%d" % (type(value).__name__.encode(), len(value)))
        for item in value:
            _canonical(item, h)
    else:
        h.update(repr(value).encode())
    h.update(b";")


def _hash_array(a, h):
    """Shape, dtype, NaN mask and values (NaN payloads zeroed) of an array."""
    a = np.asarray(a)
    h.update(f"array{a.shape}{a.dtype.str}".encode())
    if a.dtype.kind in "fc":
        nan = np.isnan(a)
        h.update(np.packbits(nan).tobytes())
        a = np.where(nan, 0, a)
    h.update(np.ascontiguousarray(a).tobytes())


def fingerprint(estimator, *arrays):
    """Hex sha256 of an estimator's class and hyperparameters (``get_params(deep=False)`` less
    the checkpoint and verbosity settings) and of the input arrays (values and NaN mask).

    Call it before the fit draws from its random state: a Generator passed as ``random_state``
    is fingerprinted by its current state.
    """
    h = hashlib.sha256(b"omicsbayes checkpoint %d;" % FORMAT)
    h.update(type(estimator).__qualname__.encode())
    params = estimator.get_params(deep=False)
    _canonical({k: v for k, v in params.items() if k not in NOT_FINGERPRINTED}, h)
    for a in arrays:
        _hash_array(a, h)
    return h.hexdigest()


class Checkpoint:
    """Periodic checkpoint of one chain at ``path`` (disabled when ``path`` is None).

    Parameters
    ----------
    path : str, os.PathLike or None
        File the state is written to (its folder is created if need be).
    every : int
        Write after every ``every``-th completed iteration.
    name : str
        Name of the fit, for log messages.
    """

    def __init__(self, path, every=10, name="fit"):
        if path is not None and not isinstance(path, str | os.PathLike):
            raise ValueError(f"checkpoint={path!r}; expected None or a file path")
        if not isinstance(every, int | np.integer) or isinstance(every, bool) or every < 1:
            raise ValueError(f"checkpoint_every={every!r}; expected a positive integer")
        self.path = None if path is None else os.fspath(path)
        self.every = int(every)
        self.name = name

    def due(self, iteration, n_iter):
        """True when the 0-based ``iteration`` just finished should be written: every
        ``every``-th one, except the last (the file is removed after a successful fit)."""
        done = iteration + 1
        return self.path is not None and done % self.every == 0 and done < n_iter

    def load(self, fingerprint, rng):
        """The saved ``(iteration, state)`` if a checkpoint with this fingerprint exists, else
        None. ``iteration`` is the number of completed iterations; ``rng`` (the fit's numpy
        Generator) is set to the saved generator state."""
        if self.path is None or not os.path.exists(self.path):
            return None
        try:
            with open(self.path, "rb") as f:
                saved = pickle.load(f)
            ok = isinstance(saved, dict) and saved.get("format") == FORMAT
        except Exception as err:  # truncated or foreign files fail in many ways
            logger.warning(
                "%s: checkpoint %s is unreadable (%s); starting over", self.name, self.path, err
            )
            return None
        if not ok or saved.get("fingerprint") != fingerprint:
            logger.warning(
                "%s: checkpoint %s was written for other settings or data; starting over",
                self.name,
                self.path,
            )
            return None
        rng.bit_generator.state = saved["rng"]
        logger.info(
            "%s: resuming from checkpoint %s after iteration %d",
            self.name,
            self.path,
            saved["iteration"],
        )
        return saved["iteration"], saved["state"]

    def save(self, iteration, state, fingerprint, rng):
        """Atomically write ``state`` after ``iteration`` completed iterations, with the generator
        state of ``rng``."""
        payload = {
            "format": FORMAT,
            "fingerprint": fingerprint,
            "iteration": int(iteration),
            "rng": rng.bit_generator.state,
            "state": state,
        }
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=self._temp_prefix(), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(payload, f, protocol=pickle.HIGHEST_PROTOCOL)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        logger.debug("%s: checkpoint after iteration %d in %s", self.name, iteration, self.path)

    def _temp_prefix(self):
        return f".{os.path.basename(self.path)}."

    def remove(self):
        """Delete the checkpoint file (after a successful fit), and any temporary file a process
        killed during a write left behind."""
        if self.path is None:
            return
        if os.path.exists(self.path):
            os.remove(self.path)
        folder = os.path.dirname(os.path.abspath(self.path))
        for entry in os.listdir(folder) if os.path.isdir(folder) else ():
            if entry.startswith(self._temp_prefix()) and entry.endswith(".tmp"):
                os.remove(os.path.join(folder, entry))


__all__ = ["Checkpoint", "fingerprint"]
