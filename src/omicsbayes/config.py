"""Checks of a workflow config: its JSON schema, then what a schema cannot check.

The schema (workflow/schemas/config.schema.yaml) checks types, names and ranges; its lists of
model classes, experiment kinds and protocol types come from the registries
(:func:`config_schema`), and :func:`validate_config` checks a config against it
(:func:`schema_message` turns the first error into one line naming the key). This module checks
what a schema cannot: that every experiment refers to a defined cohort, transform, model and
protocol, that transform steps and model parameters exist (and each parameter's value
passes the estimator's own constraints), what its experiment kind asks
(:func:`omicsbayes.protocols.check_experiment`: protocol type, transforms, model capabilities),
what the sample sheet of a cohort whose labels an experiment reads already tells
(:func:`check_cohort_labels`, for every cohort format, reading only the sheet), and that no name
is a file or folder name of the workflow's own outputs (:func:`check_reserved_names`).
Each problem is one :class:`ConfigError` naming the config key.
"""

import inspect
import os
from collections import defaultdict
from pathlib import Path

import pandas as pd

from . import protocols
from .io.cohort import PATH_KEYS
from .protocols import ExperimentError, make_estimator

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
"""What a cohort, transform, protocol, model, sweep or experiment name may be (the schema's
``$defs.name`` pattern and the workflow's wildcard constraint): it becomes a folder or file name
under results/ and logs/."""

NAMED_SECTIONS = ("cohorts", "transforms", "protocols", "models", "sweeps", "experiments")
"""Config sections whose keys are names that become part of output paths."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and what was expected."""


def config_schema(schema):
    """The workflow's config schema with the enums the registries own.

    ``schema`` is the schema as loaded from workflow/schemas/config.schema.yaml (a dict, not
    changed) or the path of that file.

    ``models.<name>.class``: every model class some experiment kind can run (the models of
    :func:`omicsbayes.protocols.models_for` each kind's ``requires``); ``experiments.<name>.kind``:
    :data:`omicsbayes.protocols.KINDS`; ``protocols.<name>.type``: the protocol types of every
    kind (their ``split_counts``), in kind order.

    Returns
    -------
    dict
    """
    import copy

    import yaml

    if isinstance(schema, dict):
        schema = copy.deepcopy(schema)
    else:
        schema = yaml.safe_load(Path(schema).read_text())
    kinds = [protocols.get(kind) for kind in protocols.KINDS]
    runnable = frozenset().union(*(protocols.models_for(kind.requires) for kind in kinds))
    properties = schema["properties"]
    entry = properties["models"]["additionalProperties"]["properties"]
    entry["class"]["enum"] = sorted(runnable)
    experiment = properties["experiments"]["additionalProperties"]["properties"]
    experiment["kind"]["enum"] = list(protocols.KINDS)
    protocol = properties["protocols"]["additionalProperties"]["properties"]
    protocol["type"]["enum"] = [t for kind in kinds for t in kind.split_counts]
    return schema


def validate_config(config, schema):
    """Check ``config`` against :func:`config_schema` of ``schema`` (the loaded schema or its
    path), filling in the schema's defaults (as Snakemake's ``validate`` does). Needs jsonschema
    (the ``workflow`` extra).

    Raises
    ------
    ConfigError
        The first schema error, as one line naming the key (:func:`schema_message`).
    """
    from jsonschema import Draft202012Validator, validators

    schema = config_schema(schema)
    check_properties = Draft202012Validator.VALIDATORS["properties"]

    def properties_with_defaults(validator, properties, instance, schema):
        for name, subschema in properties.items():
            if "default" in subschema and isinstance(instance, dict):
                instance.setdefault(name, subschema["default"])
        yield from check_properties(validator, properties, instance, schema)

    Validator = validators.extend(Draft202012Validator, {"properties": properties_with_defaults})
    error = next(Validator(schema).iter_errors(config), None)
    if error is not None:
        raise ConfigError(schema_message(error))


def schema_message(error):
    """One line for a JSON-schema validation error: ``config key a.b.c: what is wrong``.

    Parameters
    ----------
    error : jsonschema.ValidationError

    Returns
    -------
    str
    """
    path = [str(p) for p in error.absolute_path]
    if "propertyNames" in error.absolute_schema_path:
        path.append(str(error.instance))
        message = (
            f"the name {error.instance!r} does not match {error.schema.get('pattern', '')!r}; "
            "expected letters, digits and _ . + - (first a letter or digit)"
        )
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties", {}))
        path.append(sorted(set(error.instance) - set(known), key=str)[0])
        message = f"unknown key; expected one of {', '.join(known)}"
    elif error.validator == "required" and isinstance(error.instance, dict):
        path.append(next(k for k in error.validator_value if k not in error.instance))
        message = "required but missing"
    else:
        message = error.message
    return f"config key {'.'.join(path) or '(top level)'}: {message}"


def check_config(config):
    """Raise :class:`ConfigError` for the first cross-reference or parameter problem found."""
    from .preprocess import build_pipeline

    config.setdefault("transforms", {})
    for name, transform in config["transforms"].items():
        try:
            build_pipeline(transform["steps"])
        except ValueError as err:
            raise ConfigError(f"config key transforms.{name}.steps: {err}") from None
    for name, spec in config["models"].items():
        try:
            make_estimator(spec)._validate_params()  # each parameter's type and range
        except (ExperimentError, TypeError, ValueError) as err:
            raise ConfigError(f"config key models.{name}: {err}") from None
    for name, experiment in config["experiments"].items():
        key = f"experiments.{name}"
        for field, section in (("cohort", "cohorts"), ("protocol", "protocols")):
            if experiment[field] not in config[section]:
                raise ConfigError(
                    f"config key {key}.{field}: {experiment[field]!r} is not defined under "
                    f"{section} (defined: {sorted(config[section])})"
                )
        for field in ("transforms", "models"):
            unknown = [v for v in experiment.get(field, []) if v not in config[field]]
            if unknown:
                raise ConfigError(
                    f"config key {key}.{field}: {unknown} not defined under {field} "
                    f"(defined: {sorted(config[field])})"
                )
        try:
            protocols.check_experiment(name, config)
        except ExperimentError as err:
            raise ConfigError(str(err)) from None


def reserved_names(paths):
    """The file and folder names of output paths, with and without their extension.

    Parameters
    ----------
    paths : iterable of str
        Output and log path patterns of the workflow's rules (``results/{cohort}/raw.h5ad``);
        parts holding a wildcard are skipped.

    Returns
    -------
    set of str
        e.g. ``results``, ``raw.h5ad``, ``raw``, ``splits``, ``summary.tsv``, ``summary``.
    """
    reserved = set()
    for path in paths:
        for part in str(path).split("/"):
            if part and "{" not in part:
                reserved.update({part, part.split(".", 1)[0]})
    return reserved


def check_reserved_names(config, reserved):
    """Raise :class:`ConfigError` when a name of :data:`NAMED_SECTIONS` is in ``reserved``
    (:func:`reserved_names`): such a name would make two rules write one file, or a file where a
    folder must be."""
    for section in NAMED_SECTIONS:
        for name in config.get(section) or {}:
            if name in reserved:
                stems = sorted({r.split(".", 1)[0] for r in reserved})
                raise ConfigError(
                    f"config key {section}.{name}: {name!r} is a file or folder name of the "
                    "workflow's own outputs; expected another name (taken, with or without "
                    f"their extension: {', '.join(stems)})"
                )


SHEET_SOURCES = {
    "demo": "the sample sheet of the bundled demo {name}",
    "delimited": "sample_sheet {sample_sheet}",
    "counts": "sample_sheet {sample_sheet} and the summary rows of path {path}",  # STAR
    "h5ad": "the .obs of path {path}",
    "geo": "the !Sample_ lines of path {path}",
    "tcga": "the barcodes of path {path} and the columns of clinical {clinical}",
    "hivdb": "fold_change and label (drug {drug}) and the annotation columns of path {path}",
    "simulated_counts": "the simulated label",
}
"""Cohort format -> what the config check reads of a cohort's sample sheet, for messages."""


def _cohort_key(name, spec, message):
    """The config key of the cohort file a reader's message names (or of the cohort)."""
    for key in PATH_KEYS:
        values = spec.get(key)
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str) and value and value in message:
                return f"cohorts.{name}.{key}"
    return f"cohorts.{name}"


def cohort_sample_sheet(name, spec, local_paths=None):
    """The ``.obs`` a cohort's data job will write, read before it
    (:func:`omicsbayes.io.cohort.read_cohort_obs`: a sample sheet, an h5ad's ``.obs``, a series
    matrix's header lines, ... never the matrix).

    Parameters
    ----------
    name : str
        The cohort's name under ``cohorts``.
    spec : dict
        Its entry; local paths are relative to the working directory.
    local_paths : dict, optional
        URL -> the path of its fetched copy, for the URLs fetched so far.

    Returns
    -------
    pandas.DataFrame or None
        None when a file the sheet is read from is a URL not fetched yet (the fetch step checks
        it).

    Raises
    ------
    ConfigError
        Naming ``cohorts.<name>.name`` for an unknown demo, or the key of a file that cannot be
        read (the reader's message names the file and what was expected).
    """
    from .downloads import is_url, local_spec
    from .io._common import CohortError
    from .io.cohort import OBS_READERS, RENAMES, read_cohort_obs
    from .io.demo import DEMOS

    fmt = spec["format"]
    if fmt == "demo" and spec.get("name") not in DEMOS:
        raise ConfigError(
            f"config key cohorts.{name}.name: {spec.get('name')!r} is not a bundled demo cohort; "
            f"expected one of {sorted(DEMOS)}"
        )
    if fmt not in OBS_READERS:
        return pd.DataFrame()
    local = {url: path for url, path in (local_paths or {}).items() if os.path.exists(path)}
    renames = RENAMES.get(fmt, {})
    wanted = inspect.signature(OBS_READERS[fmt]).parameters
    urls = {}
    for key in PATH_KEYS:
        values = spec.get(key)
        values = [v for v in (values if isinstance(values, list) else [values]) if is_url(v)]
        if renames.get(key, key) in wanted and any(v not in local for v in values):
            return None
        urls.update({v: local.get(v, v) for v in values})  # other URLs stay as they are
    reader_spec = local_spec(spec, urls)
    for key in ("label", "label_map", "keep_labels"):
        reader_spec.pop(key, None)
    try:
        return read_cohort_obs(reader_spec)
    except (CohortError, ValueError) as err:
        fetched = {path: url for url, path in local.items()}
        message = str(err)
        for path, url in fetched.items():
            message = message.replace(path, url)
        raise ConfigError(f"config key {_cohort_key(name, spec, message)}: {message}") from None


def sheet_source(spec):
    """What the check reads of a cohort's sample sheet, for messages (:data:`SHEET_SOURCES`)."""
    if spec["format"] == "delimited" and spec.get("sample_sheet") is None:
        return "no sample_sheet given"
    if spec["format"] == "counts" and spec.get("count_format") != "star":
        return "sample_sheet {sample_sheet} of the samples of path {path}".format_map(
            defaultdict(lambda: "(none)", spec)
        )
    template = SHEET_SOURCES.get(spec["format"], "a {format} cohort has no sample sheet")
    fields = {k: v for k, v in spec.items() if k in PATH_KEYS or k in ("name", "drug", "format")}
    return template.format_map(defaultdict(lambda: "(none)", fields))


def cohort_labels(name, spec, sheet):
    """The labels a cohort's data job will write, as strings with missing values dropped (NaN
    and the strings meaning missing, :func:`omicsbayes.tl._checks.missing_labels`, with its
    warning): the sheet's ``label`` column recoded by ``label_map`` and kept to ``keep_labels``
    as the data job does. Raises :class:`ConfigError` naming ``cohorts.<name>.label`` or
    ``.keep_labels``."""
    from .tl._checks import missing_labels

    key, label = f"config key cohorts.{name}", spec["label"]
    if label not in sheet.columns:
        raise ConfigError(
            f"{key}.label: {label!r} is not a column of the cohort's sample sheet "
            f"({sheet_source(spec)}); expected one of {sorted(map(str, sheet.columns))}"
        )
    labels = sheet[label].astype("string")
    if spec.get("label_map"):
        labels = labels.replace(spec["label_map"])
    if spec.get("keep_labels") is not None:
        wanted = [str(v) for v in spec["keep_labels"]]
        absent = sorted(set(wanted) - set(labels.dropna()))
        if absent:
            raise ConfigError(
                f"{key}.keep_labels: {absent} not among the {label!r} values "
                f"{sorted(set(labels.dropna()))}"
            )
        labels = labels[labels.isin(wanted).to_numpy()]
    return labels[~missing_labels(labels, label, f"cohort {name!r}", stacklevel=2)]


def check_cohort_labels(config, local_paths=None, cohorts=None):
    """What the sample sheets tell before any job: every demo exists and, for an experiment
    whose kind :attr:`~omicsbayes.protocols.ExperimentKind.reads_labels`, the label column is
    there and the labels pass the kind's
    :meth:`~omicsbayes.protocols.ExperimentKind.check_labels` (for classification: every
    positive label occurs, and the smallest class has the samples each protocol needs,
    ``n_splits`` folds, ``n_per_class`` plus one test sample).

    Run after :func:`check_config` and after the cohort's local files were found (the
    workflow's ``cohort_paths``). A cohort whose sheet is in a URL not fetched yet
    (:func:`cohort_sample_sheet` is None) is checked by the fetch step, with ``local_paths``
    (URL -> fetched copy) and ``cohorts`` (the names to check; default every cohort of an
    experiment). Raises :class:`ConfigError` naming the key.
    """
    sheets = {}
    for name, experiment in config["experiments"].items():
        cohort = experiment["cohort"]
        spec = config["cohorts"][cohort]
        if cohorts is not None and cohort not in cohorts:
            continue
        kind = protocols.get(protocols.kind_of(experiment))
        if not kind.reads_labels:
            if spec["format"] == "demo":  # the demo exists
                cohort_sample_sheet(cohort, spec)
            continue
        if cohort not in sheets:
            sheets[cohort] = cohort_sample_sheet(cohort, spec, local_paths)
        if sheets[cohort] is None:
            continue
        labels = cohort_labels(cohort, spec, sheets[cohort]).dropna()
        try:
            kind.check_labels(name, experiment, config, labels)
        except ExperimentError as err:
            raise ConfigError(str(err)) from None
