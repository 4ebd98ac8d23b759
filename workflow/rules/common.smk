# Config validation, shared helpers and the default target.
import glob
import os
from pathlib import Path

import yaml
from snakemake.io import strip_wildcard_constraints
from snakemake.utils import min_version

from omicsbayes import protocols
from omicsbayes.config import (
    NAME_PATTERN,
    ConfigError,
    check_cohort_labels,
    check_config,
    check_reserved_names,
    reserved_names,
    validate_config,
)
from omicsbayes.downloads import is_url
from omicsbayes.io.cohort import PATH_KEYS

min_version("9.0")

# The checkout the conda environment (workflow/envs/omicsbayes.yaml) pip-installs omicsbayes from:
# this file's own (also under `module`, where workflow.basedir is the importing workflow's),
# unless OMICSBAYES_SOURCE is set (e.g. a remote module: a local checkout of the same version).
_source = Path(str(workflow.current_basedir)).parents[1]
if (_source / "pyproject.toml").is_file():
    os.environ.setdefault("OMICSBAYES_SOURCE", str(_source))


# The default run only when no --configfile is given: Snakemake merges --configfile into a
# `configfile:` it loads, so `--configfile my.yaml` would drag the default experiments along.
# --config KEY=VALUE still overrides either. Under `module`, the importing workflow's config wins.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


def config_source():
    """The config file(s) in use, for error messages."""
    return ", ".join(map(str, workflow.configfiles)) or "the config given to the module"


def cohort_paths(cohort):
    """The files a cohort entry names (keys in omicsbayes.io.cohort.PATH_KEYS), globs expanded.

    Raises WorkflowError naming the key and the file when one is missing, so a run stops before
    any job; relative paths are relative to the working directory, as the reader resolves them.
    """
    found = []
    for key in PATH_KEYS:
        values = config["cohorts"][cohort].get(key)
        for value in [values] if isinstance(values, str) else values or []:
            if is_url(value):  # fetched by rule fetch (data.smk)
                continue
            matches = sorted(glob.glob(value)) if glob.has_magic(value) else [value]
            if not matches or not os.path.exists(matches[0]):
                raise WorkflowError(
                    f"config key cohorts.{cohort}.{key}: file {value!r} not found (relative to "
                    f"{os.getcwd()}; config {config_source()}); expected the cohort's file"
                )
            found += matches
    return found


if not config.get("experiments"):
    raise WorkflowError(
        f"config key experiments: {config_source()} names no experiment; expected at least one "
        "under experiments (see config/README.md)"
    )
# The schema with its model, kind and protocol-type enums from the registries, then the checks a
# schema cannot make; each fault is one line naming the key.
_schema = workflow.current_basedir.join("../schemas/config.schema.yaml")
try:
    if not workflow.modifier.skip_validation:
        with workflow.sourcecache.open(_schema) as schema:
            validate_config(config, yaml.safe_load(schema))
except ConfigError as err:
    raise WorkflowError(f"{err} ({config_source()})") from None
try:
    check_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None

# Every name wildcard is one path part of the schema's name pattern, a split a number: no rule's
# wildcard can reach into another rule's folders. check_names() refuses, once every rule is
# defined, the names that are file or folder names of the outputs themselves.
wildcard_constraints:
    cohort=NAME_PATTERN,
    transform=NAME_PATTERN,
    protocol=NAME_PATTERN,
    model=NAME_PATTERN,
    experiment=NAME_PATTERN,
    sweep=NAME_PATTERN,
    split=r"\d+",


REPORT = "results/report.html"  # where `make run` and `omicsbayes run` write the report


def check_names():
    """Refuse config names that are file or folder names of any rule's outputs or logs (or of
    the report), before any job: called by the Snakefile after every rule is included."""
    outputs = [f for r in workflow.rules for f in r.output]
    logs = [f.split("/", 2)[-1] for r in workflow.rules for f in r.log]  # no name is logs/<rule>
    paths = [REPORT, *map(strip_wildcard_constraints, map(str, outputs + logs))]
    try:
        check_reserved_names(config, reserved_names(paths))
    except ConfigError as err:
        raise WorkflowError(str(err)) from None

EXPERIMENTS = config["experiments"]
COHORT_PATHS = {c: cohort_paths(c) for c in {e["cohort"] for e in EXPERIMENTS.values()}}
try:  # once the files are known to be there: what the sample sheets tell (once, not per job)
    if workflow.is_main_process:
        check_cohort_labels(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None


def experiment_splits(experiment):
    return range(protocols.n_splits(config["protocols"][EXPERIMENTS[experiment]["protocol"]]))


def experiment_kind(experiment):
    return protocols.kind_of(EXPERIMENTS[experiment])


def experiment_protocol(experiment):
    """The experiment kind of an experiment (omicsbayes.protocols), which gives its wildcard
    values."""
    return protocols.get(experiment_kind(experiment))


# What each kind's rules file registers with register_kind. Its "fits" entry is the output
# pattern of the fit rule that the evaluate rule reads; its "targets" are the patterns of the
# further default targets, with the one wildcard experiment.
KIND_FILES = {}


def register_kind(kind, fits, targets=()):
    """Called by rules/<kind>.smk after its rules, with their output patterns
    (rules.<rule>.output.<name>): the rule files own every path of their kind."""
    if kind not in protocols.KINDS:
        raise WorkflowError(f"register_kind({kind!r}): not an experiment kind of {protocols.KINDS}")
    KIND_FILES[kind] = {"fits": fits, "targets": list(targets)}


def check_kinds_registered():
    """Every experiment kind's rules file registered its outputs: called by the Snakefile after
    the kinds' rules files are included."""
    missing = [k for k in protocols.KINDS if k not in KIND_FILES]
    if missing:
        files = ", ".join(f"workflow/rules/{k}.smk" for k in missing)
        raise WorkflowError(f"{files}: no register_kind(...) call after the kind's rules")


def fill(pattern, values):
    """``pattern`` filled with each dict of wildcard ``values``, in their order."""
    return [expand(pattern, **{k: [v] for k, v in w.items()})[0] for w in values]


def fold_wildcards(experiment):
    """The wildcard values of every fit output of an experiment, as its kind gives them."""
    return experiment_protocol(experiment).fits(
        experiment, EXPERIMENTS[experiment], experiment_splits(experiment)
    )


def fit_outputs(wildcards):
    """Every fold table of an experiment: its kind's fit pattern, filled."""
    e = wildcards.experiment
    return fill(KIND_FILES[experiment_kind(e)]["fits"], fold_wildcards(e))


def kind_targets():
    """The files each experiment's kind adds to the default target (candidates, latent figure)."""
    return [
        t
        for e in EXPERIMENTS
        for pattern in KIND_FILES[experiment_kind(e)]["targets"]
        for t in fill(pattern, [{"experiment": e}])
    ]


def cohort_file(wildcards, folder):
    """The file of an experiment's cohort its jobs read: ``raw`` (rule data), ``transformed``
    (rule preprocess, the job's transform) or ``splits`` (rule split, the experiment's
    protocol)."""
    e = EXPERIMENTS[wildcards.experiment]
    if folder == "raw":
        return fill(rules.data.output[0], [{"cohort": e["cohort"]}])[0]
    if folder == "transformed":
        values = {"cohort": e["cohort"], "transform": wildcards.transform}
        return fill(rules.preprocess.output[0], [values])[0]
    return fill(rules.split.output[0], [{"cohort": e["cohort"], "protocol": e["protocol"]}])[0]


# Paper 000's model figures (model_figures.smk): which models of an experiment, and their outputs.
FIGURE_FOLDER = "results/{experiment}/model_figures/{model}"
FIGURE_OUTPUTS = (
    "rank_vs_log.png",
    "coefficients.png",
    "loadings_heatmap.png",
    "top_genes.tsv",
    "gene_network.png",
    "gene_network_edges.tsv",
    "trace.png",
    "fit.h5ad",
)
IMAGE_COHORTS = {"digits"}  # bundled cohorts whose features are the pixels of an image


def figure_models(experiment):
    """The models an experiment lists under `figures:` that have the `model_figures` capability
    (others are skipped)."""
    e = EXPERIMENTS[experiment]
    unknown = [m for m in e.get("figures", []) if m not in e["models"]]
    if unknown:
        raise WorkflowError(
            f"experiments.{experiment}.figures: {unknown} not among the experiment's models "
            f"{e['models']}"
        )
    if e.get("figures") and not experiment_protocol(experiment).model_figures:
        kinds = " and ".join(protocols.kinds_with("model_figures"))
        raise WorkflowError(
            f"experiments.{experiment}.figures: only {kinds} experiments have model figures, "
            f"this one is {experiment_kind(experiment)!r}"
        )
    return [
        m
        for m in e.get("figures", [])
        if "model_figures" in protocols.spec_capabilities(config["models"][m])
    ]


def is_mcmc(model):
    """Whether a figure model keeps MCMC draws (the `mcmc` capability of its instance)."""
    return "mcmc" in protocols.spec_capabilities(config["models"][model])


def has_pixel_features(experiment):
    cohort = config["cohorts"][EXPERIMENTS[experiment]["cohort"]]
    return cohort["format"] == "demo" and cohort.get("name") in IMAGE_COHORTS


def model_figure_targets():
    """Final outputs of every experiment's model figures, for rule all."""
    targets = []
    for experiment in EXPERIMENTS:
        for model in figure_models(experiment):
            folder = FIGURE_FOLDER.format(experiment=experiment, model=model)
            targets += [f"{folder}/{name}" for name in FIGURE_OUTPUTS]
            if has_pixel_features(experiment):
                targets.append(f"{folder}/loadings_images.png")
            if is_mcmc(model):
                targets.append(f"{folder}/draws.nc")
        if figure_models(experiment):
            targets.append(f"results/{experiment}/diagnostics.tsv")
    return targets


def _table(name, what):
    return report(
        f"{FIGURE_FOLDER}/{name}.tsv",
        caption=f"../report/model_figures_{name}.rst",
        category="{experiment}",
        subcategory="{model} fitted on the whole cohort",
        labels={"model": "{model}", "table": what},
    )


def _figure(name, what, suffix="png"):
    return report(
        f"{FIGURE_FOLDER}/{name}.{suffix}",
        caption=f"../report/model_figures_{name}.rst",
        category="{experiment}",
        subcategory="{model} fitted on the whole cohort",
        labels={"model": "{model}", "figure" if suffix == "png" else "table": what},
    )


# Paper 003's sweeps (sweeps.smk): each checked before any job.
SWEEPS = config.get("sweeps", {})


def check_sweep(name):
    """Raise WorkflowError naming the sweeps.<name> key that cannot work."""
    sweep = SWEEPS[name]
    key = f"sweeps.{name}"
    experiments, values = sweep["experiments"], sweep["values"]
    if len(values) != len(experiments):
        raise WorkflowError(
            f"{key}.values: {len(values)} values for {len(experiments)} experiments; "
            "expected one x value per experiment, in the same order"
        )
    unknown = [e for e in experiments if e not in EXPERIMENTS]
    if unknown:
        raise WorkflowError(
            f"{key}.experiments: {unknown} not defined under experiments "
            f"(defined: {sorted(EXPERIMENTS)})"
        )
    other = [e for e in experiments if not experiment_protocol(e).sweeps]
    if other:
        swept = protocols.kinds_with("sweeps")
        metrics = ", ".join(dict.fromkeys(m for k in swept for m in protocols.get(k).metrics))
        kinds = " or ".join(swept)
        raise WorkflowError(
            f"{key}.experiments: {other} are not {kinds} experiments; a sweep draws a metric "
            f"({metrics}) of {kinds} experiments"
        )
    for label, models in sweep.get("lines", {}).items():
        if len(models) != len(experiments):
            raise WorkflowError(
                f"{key}.lines.{label}: {len(models)} models for {len(experiments)} experiments; "
                "expected one model entry per experiment, in the same order"
            )
        for experiment, model in zip(experiments, models):
            if model not in EXPERIMENTS[experiment]["models"]:
                raise WorkflowError(
                    f"{key}.lines.{label}: {model!r} is not a model of experiment "
                    f"{experiment!r} ({EXPERIMENTS[experiment]['models']})"
                )


for _sweep in SWEEPS:
    check_sweep(_sweep)


def sweep_targets():
    """Figure and table of every sweep, for rule all."""
    return [f"results/sweeps/{s}.{ext}" for s in SWEEPS for ext in ("png", "tsv")]
