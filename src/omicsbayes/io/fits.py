"""Fitted estimators saved to a file and loaded back, to predict on new samples later.

A fit file is a small header (a pickled dict of plain values: format, omicsbayes version, class,
library versions) followed by the estimator pickled by joblib (compressed). :func:`load_fit`
reads the header first, so a file from another omicsbayes version is refused with a message
naming both versions before any class is unpickled. Pickles run code when loaded: load only
files you trust.

The draws of an MCMC fit (its ArviZ ``idata_``) are inside the fit file; :func:`save_draws` also
writes them to netCDF, for ArviZ and other tools.
"""

from __future__ import annotations

import pickle
import platform
from pathlib import Path

import joblib
from sklearn.utils.validation import check_is_fitted

from .. import __version__
from ..jobs import atomic_write
from ..tl._anndata import IDATA, fitted

FORMAT = "omicsbayes-fit"
FORMAT_VERSION = 1

__all__ = ["FitFileError", "load_fit", "read_header", "save_draws", "save_fit"]


class FitFileError(ValueError):
    """A fit file that is not one, or was written by another omicsbayes version."""


def _versions():
    import numpy
    import sklearn

    return {"python": platform.python_version(), "numpy": numpy.__version__,
            "scikit-learn": sklearn.__version__}  # fmt: skip


def save_fit(estimator, path):
    """Save a fitted estimator (any omicsbayes or scikit-learn estimator) to ``path``.

    Parameters
    ----------
    estimator : fitted estimator
    path : str or Path
        The file (by convention ``.joblib``); written atomically.

    Returns
    -------
    Path
    """
    check_is_fitted(estimator)
    path = Path(path)
    cls = type(estimator)
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "omicsbayes": __version__,
        "class": f"{cls.__module__}.{cls.__qualname__}",
        **_versions(),
    }

    def write(tmp):
        with open(tmp, "wb") as f:
            pickle.dump(header, f, protocol=pickle.HIGHEST_PROTOCOL)
            joblib.dump(estimator, f, compress=3)

    atomic_write(path, write)
    return path


def read_header(path):
    """The header of a fit file (a dict); raises :class:`FitFileError` if it is not one."""
    with open(path, "rb") as f:
        return _header(f, path)


def _header(f, path):
    try:
        header = pickle.load(f)
    except Exception as exc:  # any unpickling failure means: not a fit file
        raise FitFileError(
            f"{path}: not an omicsbayes fit file ({type(exc).__name__}); expected a file written "
            "by omicsbayes.io.save_fit"
        ) from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise FitFileError(
            f"{path}: not an omicsbayes fit file; expected a file written by omicsbayes.io.save_fit"
        )
    return header


def load_fit(path):
    """Load an estimator saved by :func:`save_fit`.

    Raises
    ------
    FitFileError
        When ``path`` is not a fit file, or was saved by another omicsbayes version (the message
        names both; refit, or install the version that saved it).
    """
    with open(path, "rb") as f:
        header = _header(f, path)
        saved = header.get("omicsbayes")
        if saved != __version__ or header.get("format_version") != FORMAT_VERSION:
            raise FitFileError(
                f"{path}: {header.get('class')} saved by omicsbayes {saved} (fit file format "
                f"{header.get('format_version')}); this is omicsbayes {__version__} (format "
                f"{FORMAT_VERSION}). Refit the model, or load it with omicsbayes=={saved}"
            )
        return joblib.load(f)


def save_draws(estimator, path):
    """Write the MCMC draws of a fitted estimator (``idata_``) to a netCDF file.

    Raises ValueError when the estimator keeps no draws (a VB or optimisation fit).
    """
    idata = fitted(estimator, *IDATA)
    if idata is None:
        raise ValueError(
            f"{type(estimator).__name__} keeps no MCMC draws (no {' / '.join(IDATA)}); "
            "only MCMC fits have draws to save"
        )
    atomic_write(Path(path), lambda tmp: idata.to_netcdf(tmp))
    return Path(path)
