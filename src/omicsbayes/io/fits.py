"""Fitted estimators saved to a file that is data, and loaded back to predict on new samples.

A fit file is a zip archive holding ``fit.json`` and ``.npy`` arrays. ``fit.json`` says what the
file is (format, format version, the omicsbayes and library versions that wrote it), which
estimator it holds (a class name from :data:`ESTIMATORS`), its constructor parameters, the
feature names it was fitted on and, for a fit made by an :mod:`omicsbayes.tl` function, the
genes, gene selection (``mask_var``) and layer it used. Every fitted attribute is written as
JSON (numbers, strings, lists, dicts, objects of the classes of :func:`trusted_classes` with
their attributes) or as an array in the archive (``numpy.save`` without pickle); an ArviZ
``idata_`` is stored as its groups' variables and coordinates the same way.

Why not pickle, joblib or skops: loading a pickle runs code chosen by the file. skops would
need every internal type of ArviZ, xarray and pandas trusted one by one; a format of our own
with a short list of trusted classes, whose objects are rebuilt by calling their constructors
with JSON parameters and setting array / JSON attributes, is small enough to check by reading.

:func:`load_fit` never imports a module or calls a function named by the file: classes are looked
up in :func:`trusted_classes`, arrays are read with ``allow_pickle=False``, anything else (another
member in the archive, bytes after its end, a type not listed) refuses the file with one
message. A file written by any release of the same major version loads (an attribute whose layout
a later format changed is converted as it loads, :data:`UPGRADES`); a newer format version or
another major version is refused with a message naming both.

:func:`save_draws` writes the MCMC draws (``idata_``) to netCDF for ArviZ and other tools.
"""

from __future__ import annotations

import io
import json
import math
import platform
import re
import zipfile
from pathlib import Path

import numpy as np

from .. import __version__, models
from .._attributes import ANNDATA_FIT, IDATA, fitted
from ..jobs import atomic_write

FORMAT = "omicsbayes-fit"
FORMAT_VERSION = 3  # format 1 is the pickle (joblib) format, which no release loads
#: Layouts a format changed, applied to a file of an older format as it loads: format version ->
#: {class name: attribute to transpose}. Format 3 stores ``IBPFactorModel.loadings_`` as genes x
#: latent features, as every model's ``loadings_``; format 2 stored its transpose.
UPGRADES = {2: {"omicsbayes.models.IBPFactorModel": "loadings_"}}
DOCUMENT = "fit.json"

# the scikit-learn composites the tl functions return (tl.bam: a kernel-map Pipeline, one-vs-rest
# for several classes), name in the file -> "module:attribute"
_COMPOSITES = {
    "sklearn.pipeline.Pipeline": "sklearn.pipeline:Pipeline",
    "sklearn.multiclass.OneVsRestClassifier": "sklearn.multiclass:OneVsRestClassifier",
}
#: Classes a fit file may hold at its top: every class of :mod:`omicsbayes.models` and the
#: scikit-learn composites the ``tl`` functions return.
ESTIMATORS = (*(f"omicsbayes.models.{name}" for name in models.__all__), *_COMPOSITES)

#: The classes a fit file may hold besides :data:`ESTIMATORS` and the preprocessing steps (name in
#: the file -> "module:attribute"): the scikit-learn estimators the baselines wrap and the helper
#: objects models keep as fitted attributes. :func:`trusted_classes` gives all of them.
HELPERS = {
    "omicsbayes.preprocess.LowRankKernel": "omicsbayes.preprocess.graph:LowRankKernel",
    "omicsbayes.models.bsvm.BayesianSVM": "omicsbayes.models.bsvm:BayesianSVM",
    "omicsbayes.models.bam._GaussianWeights": "omicsbayes.models.bam:_GaussianWeights",
    "omicsbayes.models.rank_factor._RankIndex": "omicsbayes.models.rank_factor._ranks:_RankIndex",
    "sklearn.linear_model.LogisticRegression": "sklearn.linear_model:LogisticRegression",
    "sklearn.svm.LinearSVC": "sklearn.svm:LinearSVC",
    "sklearn.decomposition.PCA": "sklearn.decomposition:PCA",
    "sklearn.discriminant_analysis.LinearDiscriminantAnalysis": (
        "sklearn.discriminant_analysis:LinearDiscriminantAnalysis"
    ),
    "sklearn.preprocessing.LabelBinarizer": "sklearn.preprocessing:LabelBinarizer",
    "sklearn.preprocessing.StandardScaler": "sklearn.preprocessing:StandardScaler",
}


def trusted_classes():
    """Every class a fit file may hold, as ``{name in the file: class}``.

    :data:`ESTIMATORS`, the preprocessing steps a Pipeline may put before them (the classes of
    :data:`omicsbayes.preprocess.STEPS`, named ``omicsbayes.preprocess.<class>``) and
    :data:`HELPERS`. Only the modules these name are imported; nothing else is trusted.
    """
    import importlib

    from .. import preprocess

    out = {f"omicsbayes.models.{name}": getattr(models, name) for name in models.__all__}
    out.update({f"omicsbayes.preprocess.{cls.__name__}": cls for cls in preprocess.STEPS.values()})
    for name, where in {**_COMPOSITES, **HELPERS}.items():
        module, attribute = where.split(":")
        out[name] = getattr(importlib.import_module(module), attribute)
    return out


_ARRAY_ENTRY = re.compile(r"arrays/\d+\.npy")
_ATTRIBUTE = re.compile(r"(?!__)[A-Za-z_]\w*")

__all__ = [
    "ESTIMATORS",
    "FitFileError",
    "HELPERS",
    "load_fit",
    "read_header",
    "save_draws",
    "save_fit",
    "trusted_classes",
]


class FitFileError(ValueError):
    """A file that is not a valid omicsbayes fit file, or one from an incompatible version."""


def _versions():
    import numpy
    import sklearn

    return {"python": platform.python_version(), "numpy": numpy.__version__,
            "scikit-learn": sklearn.__version__}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Writing: Python values -> JSON nodes and .npy entries


class _Encoder:
    """Turns an estimator into JSON nodes; arrays go to ``self.entries`` (name -> bytes)."""

    def __init__(self):
        self.entries = {}
        self.memo = {}  # id -> node, so an array or InferenceData held twice is stored once
        self.keep = []  # keeps memoised objects alive while ids are in use
        self.names = {cls: name for name, cls in trusted_classes().items()}

    def node(self, value, where):
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, int) and not isinstance(value, np.integer):
            return value
        if isinstance(value, float) and not isinstance(value, np.floating):
            return value if math.isfinite(value) else {"$": "float", "value": repr(value)}
        if isinstance(value, list):
            return [self.node(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return {
                "$": "tuple",
                "items": [self.node(v, f"{where}[{i}]") for i, v in enumerate(value)],
            }
        if isinstance(value, dict):
            return {
                "$": "dict",
                "items": [
                    [self.node(k, where), self.node(v, f"{where}[{k!r}]")] for k, v in value.items()
                ],
            }
        if isinstance(value, np.generic):
            return self.scalar(value, where)
        if isinstance(value, np.ndarray):
            return self.memoised(value, self.array, where)
        if isinstance(value, np.dtype):
            return self.dtype(value, where)
        return self.other(value, where)

    def scalar(self, value, where):
        if value.dtype.kind not in "biufUS":
            raise TypeError(
                f"{where} is a numpy {value.dtype} scalar, which a fit file cannot hold"
            )
        return {"$": "scalar", "dtype": value.dtype.str, "value": self.node(value.item(), where)}

    def dtype(self, value, where):
        if value.hasobject or value.fields is not None:
            raise TypeError(f"{where} is the dtype {value}, which a fit file cannot hold")
        return {"$": "dtype", "value": value.str}

    def memoised(self, value, encode, where):
        if id(value) not in self.memo:
            self.keep.append(value)
            self.memo[id(value)] = encode(value, where)
        return self.memo[id(value)]

    def array(self, value, where):
        if value.dtype.hasobject:
            return {
                "$": "object_array",
                "shape": list(value.shape),
                "items": [self.node(v, f"{where}[{i}]") for i, v in enumerate(value.ravel())],
            }
        if value.dtype.kind not in "biufcUSmM" or value.dtype.fields is not None:
            raise TypeError(
                f"{where} is an array of dtype {value.dtype}, which a fit file cannot hold"
            )
        name = f"arrays/{len(self.entries)}.npy"
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        self.entries[name] = buffer.getvalue()
        return {"$": "array", "entry": name}

    def other(self, value, where):
        import pandas as pd
        import scipy.sparse as sp

        kind = type(value)
        if kind.__name__ == "InferenceData" and kind.__module__.startswith("arviz"):
            return self.memoised(value, self.inference_data, where)
        if isinstance(value, pd.DataFrame):
            columns = list(value.columns)
            return {
                "$": "dataframe",
                "columns": self.node(columns, where),
                "index": self.node(value.index.to_numpy(), where),
                "index_name": self.node(value.index.name, where),
                "data": [self.node(value[c].to_numpy(), f"{where}[{c!r}]") for c in columns],
            }
        if sp.issparse(value) and value.format in ("csr", "csc"):
            return {
                "$": "sparse",
                "format": value.format,
                "array": isinstance(value, sp.sparray),
                "shape": list(value.shape),
                "parts": [
                    self.node(np.asarray(getattr(value, p)), where)
                    for p in ("data", "indices", "indptr")
                ],
            }
        if kind in self.names:
            return self.instance(value, where)
        raise TypeError(
            f"{where} holds a {kind.__module__}.{kind.__qualname__}, which a fit file cannot hold "
            "(it holds numbers, strings, arrays, data frames, ArviZ draws and the classes of "
            "omicsbayes.io.fits.trusted_classes())"
        )

    def instance(self, value, where):
        from sklearn.base import BaseEstimator

        name = self.names[type(value)]
        state = dict(vars(value))
        node = {"$": "object", "class": name}
        if isinstance(value, BaseEstimator):
            params = value.get_params(deep=False)
            for key in params:
                state.pop(key, None)
            node["params"] = {k: self.node(v, f"{where}.{k}") for k, v in params.items()}
        node["attributes"] = {k: self.node(v, f"{where}.{k}") for k, v in state.items()}
        return node

    def inference_data(self, value, where):
        groups = {}
        for group in value.groups():
            content = getattr(value, group).to_dict(data="array")
            groups[group] = self.node(content, f"{where}.{group}")
        return {"$": "inference_data", "groups": groups}


def _training(estimator):
    """``(feature names or None, the tl record or None)`` of a fitted estimator."""
    record = getattr(estimator, ANNDATA_FIT, None)
    if record is not None:
        return [str(v) for v in record["var_names"]], record
    names = getattr(estimator, "feature_names_in_", None)
    return (None if names is None else [str(v) for v in names]), None


def save_fit(estimator, path):
    """Save a fitted estimator to ``path`` as a fit file (data only; see the module docstring).

    Parameters
    ----------
    estimator : fitted estimator
        One of :data:`ESTIMATORS` (an omicsbayes model, or the Pipeline / OneVsRestClassifier a
        ``tl`` function returns).
    path : str or Path
        The file (by convention ``.obfit``); written atomically, its folder created.

    Returns
    -------
    Path

    Raises
    ------
    TypeError
        When the estimator is not one of :data:`ESTIMATORS`, or an attribute holds a value a fit
        file cannot hold (the message names the attribute).
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator)
    encoder = _Encoder()
    name = encoder.names.get(type(estimator))
    if name not in ESTIMATORS:
        known = ", ".join(e.rsplit(".", 1)[1] for e in ESTIMATORS)
        raise TypeError(
            f"save_fit: {type(estimator).__module__}.{type(estimator).__qualname__} is not an "
            f"estimator a fit file can hold; expected one of {known}"
        )
    tree = encoder.node(estimator, type(estimator).__name__)
    feature_names, record = _training(estimator)
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "omicsbayes": __version__,
        "libraries": _versions(),
        "class": name,
        "params": tree["params"],
        "n_features_in": tree["attributes"].get("n_features_in_"),
        "feature_names": feature_names,
        "mask_var": None if record is None else record.get("mask_var"),
        "layer": None if record is None else record.get("layer"),
        "estimator": tree,
    }
    text = json.dumps(document, allow_nan=False, indent=1)
    path = Path(path)

    def write(tmp):
        with zipfile.ZipFile(tmp, "w") as archive:
            for entry, data in [(DOCUMENT, text), *encoder.entries.items()]:
                # a fixed time stamp: the same fit gives the same bytes
                info = zipfile.ZipInfo(entry, date_time=(1980, 1, 1, 0, 0, 0))
                archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)

    atomic_write(path, write)
    return path


# ---------------------------------------------------------------------------------------------
# Reading


class _Refused(Exception):
    """Internal: the reason a file is refused (turned into one FitFileError naming the file)."""


def _refuse(path, reason):
    return FitFileError(
        f"{path}: not a valid omicsbayes fit file ({reason}); expected a file written by "
        "omicsbayes.io.save_fit. Nothing from it was run"
    )


def _archive(path):
    """``(zip archive, document dict)`` after the container checks."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FitFileError(f"{path}: cannot read the fit file ({exc.strerror or exc})") from exc
    if data[:1] == b"\x80":
        raise _Refused(
            "a pickle, as omicsbayes wrote fit files before format 2; pickles run code when "
            "loaded, so it is not read: refit the model and save it again"
        )
    if data[:4] != b"PK\x03\x04":
        raise _Refused("it does not start as a zip archive")
    # the end-of-archive record, without a comment, must be the file's last 22 bytes
    if len(data) < 22 or data[-22:-18] != b"PK\x05\x06" or data[-2:] != b"\x00\x00":
        raise _Refused("truncated, or bytes after the end of the archive")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise _Refused(f"corrupt archive: {exc}") from exc
    names = [info.filename for info in infos]
    if len(set(names)) != len(names) or not names or names[0] != DOCUMENT:
        raise _Refused(f"the archive must start with {DOCUMENT} and name each member once")
    for info in infos:
        if info.flag_bits & 0x1 or info.compress_type not in (
            zipfile.ZIP_STORED,
            zipfile.ZIP_DEFLATED,
        ):
            raise _Refused(f"member {info.filename} is encrypted or in an unknown compression")
        if info.filename != DOCUMENT and not _ARRAY_ENTRY.fullmatch(info.filename):
            raise _Refused(f"unexpected member {info.filename!r}")
    document = json.loads(_member(archive, DOCUMENT).decode("utf-8"))
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise _Refused(f"{DOCUMENT} does not say format {FORMAT!r}")
    return archive, document


def _member(archive, name):
    try:
        return archive.read(name)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
        raise _Refused(f"member {name}: {exc}") from exc


def _check_version(path, document):
    saved, fmt = document.get("omicsbayes"), document.get("format_version")
    if not isinstance(saved, str) or not isinstance(fmt, int) or isinstance(fmt, bool):
        raise _Refused("no omicsbayes version or format version")
    major = saved.split(".")[0]
    if fmt > FORMAT_VERSION or major != __version__.split(".")[0]:
        raise FitFileError(
            f"{path}: {document.get('class')} saved by omicsbayes {saved} (fit file format {fmt}); "
            f"this is omicsbayes {__version__} (format {FORMAT_VERSION}), which reads formats up "
            f"to {FORMAT_VERSION} from omicsbayes {__version__.split('.')[0]}.x. Load it with "
            f"omicsbayes=={saved}, or refit the model"
        )
    if fmt < FORMAT_VERSION and fmt not in UPGRADES:
        raise _Refused(f"format version {fmt}, which this release does not read")


class _Decoder:
    """JSON nodes and archive entries back to Python values; every node kind is checked."""

    def __init__(self, archive, transposed=None):
        self.archive = archive
        self.transposed = transposed or {}  # class name -> attribute an older format transposed
        self.classes = trusted_classes()
        self.used = set()
        self.memo = {}  # entry -> array, so an array held twice comes back shared

    def value(self, node):
        if node is None or isinstance(node, bool | int | float | str):
            return node
        if isinstance(node, list):
            return [self.value(v) for v in node]
        if not isinstance(node, dict) or not isinstance(node.get("$"), str):
            raise _Refused(f"unexpected JSON value {str(node)[:60]!r}")
        method = getattr(self, f"kind_{node['$']}", None)
        if method is None:
            raise _Refused(f"unknown value kind {node['$'][:40]!r}")
        return method(node)

    def kind_float(self, node):
        if node.get("value") not in ("nan", "inf", "-inf"):
            raise _Refused("a float that is not nan / inf / -inf")
        return float(node["value"])

    def kind_tuple(self, node):
        return tuple(self.value(v) for v in self._list(node, "items"))

    def kind_dict(self, node):
        out = {}
        for pair in self._list(node, "items"):
            if not isinstance(pair, list) or len(pair) != 2:
                raise _Refused("a dict item that is not a key, value pair")
            key = self.value(pair[0])
            if not isinstance(key, str | int | float | bool | tuple) and key is not None:
                raise _Refused("a dict key that is not a plain value")
            out[key] = self.value(pair[1])
        return out

    def kind_scalar(self, node):
        dtype = self._dtype(node.get("dtype"))
        if dtype.kind not in "biufUS":
            raise _Refused(f"a scalar of dtype {dtype}")
        return dtype.type(self.value(node.get("value")))

    def kind_dtype(self, node):
        return self._dtype(node.get("value"))

    def kind_array(self, node):
        entry = node.get("entry")
        if not isinstance(entry, str) or not _ARRAY_ENTRY.fullmatch(entry):
            raise _Refused("an array entry with an unexpected name")
        if entry not in self.memo:
            raw = _member(self.archive, entry)
            buffer = io.BytesIO(raw)
            try:
                array = np.load(buffer, allow_pickle=False)
            except (ValueError, OSError, EOFError, MemoryError) as exc:
                raise _Refused(f"{entry}: {exc}") from exc
            if not isinstance(array, np.ndarray) or buffer.tell() != len(raw):
                raise _Refused(f"{entry}: bytes after the array")
            self.memo[entry] = array
            self.used.add(entry)
        return self.memo[entry]

    def kind_object_array(self, node):
        shape = self._list(node, "shape")
        items = [self.value(v) for v in self._list(node, "items")]
        if not all(isinstance(s, int) and s >= 0 for s in shape) or math.prod(shape) != len(items):
            raise _Refused("an object array whose shape does not match its items")
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(shape)

    def kind_dataframe(self, node):
        import pandas as pd

        columns = self.value(node.get("columns"))
        data = [self.value(v) for v in self._list(node, "data")]
        index = self.value(node.get("index"))
        if not isinstance(columns, list) or len(columns) != len(data):
            raise _Refused("a data frame whose columns do not match its data")
        frame = pd.DataFrame(dict(zip(range(len(data)), data)), index=pd.Index(index))
        frame.columns = pd.Index(columns)
        frame.index.name = self.value(node.get("index_name"))
        return frame

    def kind_sparse(self, node):
        import scipy.sparse as sp

        parts = [self.value(v) for v in self._list(node, "parts")]
        shape = tuple(self._list(node, "shape"))
        fmt = node.get("format")
        if fmt not in ("csr", "csc") or len(parts) != 3 or len(shape) != 2:
            raise _Refused("a sparse matrix with an unexpected layout")
        classes = {"csr": (sp.csr_matrix, sp.csr_array), "csc": (sp.csc_matrix, sp.csc_array)}
        cls = classes[fmt][bool(node.get("array"))]
        try:
            return cls(tuple(parts), shape=shape)
        except (ValueError, TypeError) as exc:
            raise _Refused(f"a sparse matrix: {exc}") from exc

    def kind_inference_data(self, node):
        import arviz as az
        import xarray as xr

        groups = node.get("groups")
        if not isinstance(groups, dict):
            raise _Refused("ArviZ draws without groups")
        if not all(map(_ATTRIBUTE.fullmatch, groups)):
            raise _Refused("ArviZ groups that are not plain names")
        datasets = {}
        for group, content in groups.items():
            try:
                datasets[group] = xr.Dataset.from_dict(self.value(content))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise _Refused(f"ArviZ group {group!r}: {exc}") from exc
        return az.InferenceData(**datasets)

    def kind_object(self, node):
        name = node.get("class")
        cls = self.classes.get(name) if isinstance(name, str) else None
        if cls is None:
            raise _Refused(f"class {str(name)[:80]!r} is not one a fit file may hold")
        attributes = node.get("attributes")
        if not isinstance(attributes, dict) or not all(map(_ATTRIBUTE.fullmatch, attributes)):
            raise _Refused(f"{name}: attributes that are not plain names")
        if "params" in node:
            params = node["params"]
            if not isinstance(params, dict):
                raise _Refused(f"{name}: parameters that are not a JSON object")
            try:
                obj = cls(**{k: self.value(v) for k, v in params.items()})
            except TypeError as exc:
                raise _Refused(f"{name}: {exc}") from exc
        else:
            obj = object.__new__(cls)
        vars(obj).update({k: self.value(v) for k, v in attributes.items()})
        transposed = self.transposed.get(name)
        if transposed in vars(obj):
            setattr(obj, transposed, np.asarray(getattr(obj, transposed)).T)
        return obj

    def _list(self, node, key):
        value = node.get(key)
        if not isinstance(value, list):
            raise _Refused(f"a {node['$']} without its {key!r} list")
        return value

    def _dtype(self, text):
        if not isinstance(text, str) or not re.fullmatch(r"[<>|=]?[biufcUSmM]\d*(\[\w+\])?", text):
            raise _Refused(f"an unexpected dtype {str(text)[:40]!r}")
        return np.dtype(text)


def read_header(path):
    """The document of a fit file without the estimator's attributes (a dict): format, versions,
    class, parameters, feature names, gene selection and layer.

    Raises :class:`FitFileError` when ``path`` is not a fit file.
    """
    try:
        _, document = _archive(path)
    except (_Refused, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _refuse(path, _reason(exc)) from exc
    return {k: v for k, v in document.items() if k != "estimator"}


def _one_line(exc):
    return " ".join(str(exc).split())[:200]


def _reason(exc):
    if isinstance(exc, _Refused):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError | json.JSONDecodeError):
        return f"{DOCUMENT} is not JSON"
    return f"{DOCUMENT} is nested too deeply"


def load_fit(path):
    """Load an estimator saved by :func:`save_fit`; no code from the file is run.

    Raises
    ------
    FitFileError
        When ``path`` is not a valid fit file (corrupt, truncated, with bytes after its end, a
        member or class that is not allowed), or was saved by another major version of omicsbayes
        or in a newer fit file format (the message names both versions).
    """
    try:
        archive, document = _archive(path)
        _check_version(path, document)
        tree = document.get("estimator")
        if not isinstance(tree, dict) or document.get("class") not in ESTIMATORS:
            raise _Refused(f"class {str(document.get('class'))[:80]!r} is not an estimator")
        if tree.get("$") != "object" or tree.get("class") != document["class"]:
            raise _Refused("the estimator does not match the class the document names")
        decoder = _Decoder(archive, UPGRADES.get(document["format_version"], {}))
        try:
            estimator = decoder.value(tree)
        except (_Refused, RecursionError):
            raise
        except Exception as exc:  # any other failure to rebuild a value: the file is not valid
            raise _Refused(f"{type(exc).__name__}: {_one_line(exc)}") from exc
        unused = {i.filename for i in archive.infolist()} - decoder.used - {DOCUMENT}
        if unused:
            raise _Refused(f"members no value refers to: {sorted(unused)[:3]}")
    except (_Refused, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _refuse(path, _reason(exc)) from exc
    return estimator


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
