"""Names and config faults through the real snakemake: every name a config gives either works or
is refused before the first job, with one message naming the config key (workflow/rules/common.smk
and omicsbayes.config). A refused config is run for real (not as a dry run): nothing may be
written under results/ or logs/."""

import copy
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from omicsbayes.config import NAME_PATTERN, reserved_names

pytestmark = pytest.mark.workflow
REPO = Path(__file__).resolve().parents[1]


def refused(run, workdir, config, expected):
    """Run ``config`` for real; assert it stops at parse time with one line naming the key."""
    result = run(workdir, "--cores", "1", config=config, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    lines = [line for line in output.splitlines() if line.startswith("config key ")]
    assert len(lines) == 1, output
    assert lines[0].startswith(expected), lines[0]
    assert "Building DAG" not in output and "Exception" not in output, output
    assert not (workdir / "results").exists() and not (workdir / "logs").exists()
    return lines[0]


def renamed(config, section, old, new):
    """``config`` with ``section.old`` renamed ``new`` everywhere it is referred to."""
    config = copy.deepcopy(config)
    config[section] = {new if k == old else k: v for k, v in config[section].items()}
    field = {"cohorts": "cohort", "protocols": "protocol"}.get(section)
    for experiment in config["experiments"].values():
        if field and experiment[field] == old:
            experiment[field] = new
        for key in ("transforms", "models", "figures"):
            if section in ("transforms", "models") and key in experiment:
                experiment[key] = [new if v == old else v for v in experiment[key]]
    for sweep in config.get("sweeps", {}).values():
        if section == "experiments":
            sweep["experiments"] = [new if e == old else e for e in sweep["experiments"]]
        if section == "models":
            for line in sweep.get("lines", {}).values():
                line[:] = [new if m == old else m for m in line]
    return config


@pytest.mark.parametrize(
    "section, old, new, expected",
    [
        ("transforms", "zscore", "raw", "config key transforms.raw: 'raw' is a file or folder"),
        ("transforms", "zscore", "splits", "config key transforms.splits: 'splits' is a file"),
        ("models", "logistic", "log/reg", "config key models.log/reg: the name 'log/reg' does"),
        (
            "experiments",
            "malignant",
            "summary.tsv",
            "config key experiments.summary.tsv: 'summary.tsv' is a file or folder name",
        ),
        ("cohorts", "breast_cancer", "results", "config key cohorts.results: 'results' is a"),
        ("protocols", "cv3", "cv 3", "config key protocols.cv 3: the name 'cv 3' does not"),
    ],
)
def test_a_name_that_cannot_work_is_refused(
    section, old, new, expected, tmp_path, tiny_config, snakemake_run
):
    refused(snakemake_run, tmp_path, renamed(tiny_config, section, old, new), expected)


def test_legal_names_work_in_every_position(tmp_path, snakemake_run):
    """The shared tiny run's config (classification, model figures, sweeps) with names of dots,
    pluses and dashes, a cohort and an experiment of one name, a model named like a transform and
    a sweep like an experiment: the dry run plans the same jobs as with the plain names."""
    from conftest import tiny_run_config

    plain = tiny_run_config()
    tricky = plain
    for section, old, new in [
        ("cohorts", "digits", "digits.v1"),
        ("experiments", "digits_ovr", "digits.v1"),  # a cohort's name too
        ("cohorts", "tissue", "n2"),  # and an experiment's
        ("transforms", "zscore", "z-score+1"),
        ("models", "PCA2", "z-score+1"),  # a transform's name too
        ("models", "R-L-BSVM", "R-L-BSVM_0.5"),
        ("protocols", "few2", "2.per-class"),
    ]:
        tricky = renamed(tricky, section, old, new)
    tricky["sweeps"]["n2"] = tricky["sweeps"].pop("per_class")  # a sweep named as an experiment
    counts = []
    for name, config in (("plain", plain), ("tricky", tricky)):
        result = snakemake_run(tmp_path / name, "--dry-run", "--cores", "1", config=config)
        assert result.returncode == 0, result.stderr[-3000:]
        table = re.search(r"Job stats:\n(.*?)\ntotal\s+\d+", result.stdout, re.S).group(1)
        counts.append(table)
    assert counts[0] == counts[1]
    for path in (
        "results/digits.v1/model_figures/R-L-BSVM_0.5/fit.h5ad",
        "results/n2/splits/2.per-class.tsv",  # the cohort n2
        "results/n2/fits/unit_length/z-score+1/predictions.tsv",  # the experiment n2
        "results/sweeps/n2.png",
    ):
        assert path in result.stdout


def test_every_output_name_is_reserved_and_the_schema_pattern_is_the_wildcards():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema["$defs"]["name"]["pattern"] == f"^{NAME_PATTERN}$"
    reserved = reserved_names(["results/{cohort}/raw.h5ad", "results/{e}/fits/{t}/{m}/x.tsv"])
    assert reserved == {"results", "raw.h5ad", "raw", "fits", "x.tsv", "x"}


SCHEMA_FAULTS = {
    "too_short": (
        lambda c: c["cohorts"]["breast_cancer"].update(keep_labels=["3"]),
        "config key cohorts.breast_cancer.keep_labels: ['3'] is too short",
    ),
    "wrong_type": (
        lambda c: c["models"]["logistic"].update(params={"n_iter": "3"}),
        "config key models.logistic.params.n_iter: '3' is not of type 'integer'",
    ),
    "unknown_key": (
        lambda c: c.update(sed=1),
        "config key sed: unknown key; expected one of cohorts, experiments, models",
    ),
    "missing_key": (
        lambda c: c["experiments"]["malignant"].pop("protocol"),
        "config key experiments.malignant.protocol: required but missing",
    ),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_FAULTS))
def test_a_schema_error_is_one_line_naming_the_key_first(
    case, tmp_path, tiny_config, snakemake_run
):
    edit, expected = SCHEMA_FAULTS[case]
    edit(tiny_config)
    line = refused(snakemake_run, tmp_path, tiny_config, expected)
    assert line.endswith("(config/config.yaml)")


DEMO_FAULTS = {
    "unknown_demo": (
        lambda c: c["cohorts"]["breast_cancer"].update(name="breast_cancer_wisconson"),
        "config key cohorts.breast_cancer.name: 'breast_cancer_wisconson' is not a bundled demo",
    ),
    "label_not_in_cohort": (
        lambda c: c["cohorts"]["breast_cancer"].update(label="diagnosys"),
        "config key cohorts.breast_cancer.label: 'diagnosys' is not a column of the cohort's",
    ),
    "positive_never_occurs": (
        lambda c: c["experiments"]["malignant"]["task"].update(positive=["Malignant"]),
        "config key experiments.malignant.task.positive: ['Malignant'] never occur in the "
        "'diagnosis' labels of cohort 'breast_cancer' (values: ['benign', 'malignant'])",
    ),
    "more_folds_than_the_smallest_class": (
        lambda c: c["protocols"]["cv3"].update(n_splits=213),  # 212 malignant samples
        "config key protocols.cv3.n_splits: stratified_kfold with n_splits=213 needs at least "
        "213 labelled samples per class; class 'malignant' of cohort 'breast_cancer' (experiment "
        "'malignant') has 212",
    ),
}


@pytest.mark.parametrize("case", sorted(DEMO_FAULTS))
def test_what_the_demo_sample_sheet_tells_is_checked_before_any_job(
    case, tmp_path, tiny_config, snakemake_run
):
    edit, expected = DEMO_FAULTS[case]
    edit(tiny_config)
    refused(snakemake_run, tmp_path, tiny_config, expected)


def delimited_config(workdir):
    """A delimited cohort of 8 samples (classes a x 5, b x 3) with its sample sheet, written to
    ``workdir``, and a config classifying it by stratified 3-fold cross-validation."""
    workdir.mkdir(parents=True, exist_ok=True)
    samples = [f"s{i}" for i in range(8)]
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.normal(size=(8, 3)), index=samples, columns=["g1", "g2", "g3"]).to_csv(
        workdir / "x.tsv", sep="\t"
    )
    sheet = pd.DataFrame({"sample": samples, "group": list("aaaaabbb")})
    sheet.to_csv(workdir / "samples.tsv", sep="\t", index=False)
    return {
        "seed": 1,
        "cohorts": {
            "small": {
                "format": "delimited",
                "path": "x.tsv",
                "sample_sheet": "samples.tsv",
                "label": "group",
            }
        },
        "transforms": {"zscore": {"steps": ["zscore"]}},
        "protocols": {
            "cv3": {"type": "stratified_kfold", "n_splits": 3},
            "few2": {"type": "few_shot", "n_per_class": 2, "n_repeats": 2},
        },
        "models": {"logistic": {"class": "LogisticBaseline"}},
        "experiments": {
            "ab": {
                "cohort": "small",
                "task": {"kind": "binary", "positive": ["b"]},
                "transforms": ["zscore"],
                "models": ["logistic"],
                "protocol": "cv3",
            }
        },
    }


SHEET_FAULTS = {
    "label_not_in_sheet": (
        lambda c: c["cohorts"]["small"].update(label="grp"),
        "config key cohorts.small.label: 'grp' is not a column of the cohort's sample sheet "
        "(sample_sheet samples.tsv); expected one of ['group']",
    ),
    "keep_labels_absent": (
        lambda c: c["cohorts"]["small"].update(keep_labels=["a", "c"]),
        "config key cohorts.small.keep_labels: ['c'] not among the 'group' values ['a', 'b']",
    ),
    "positive_is_every_class": (
        lambda c: c["experiments"]["ab"]["task"].update(positive=["a", "b"]),
        "config key experiments.ab.task.positive: ['a', 'b'] are every class of cohort 'small', "
        "so every training split would hold a single class",
    ),
    "one_class_left": (
        lambda c: c["cohorts"]["small"].update(label_map={"b": "a"}),
        "config key experiments.ab.task.positive: ['b'] never occur",
    ),
    "more_folds_than_the_smallest_class": (
        lambda c: c["protocols"]["cv3"].update(n_splits=4),
        "config key protocols.cv3.n_splits: stratified_kfold with n_splits=4 needs at least 4 "
        "labelled samples per class; class 'b' of cohort 'small' (experiment 'ab') has 3",
    ),
    "n_per_class_too_large": (
        lambda c: (
            c["protocols"]["few2"].update(n_per_class=3),
            c["experiments"]["ab"].update(protocol="few2"),
        ),
        "config key protocols.few2.n_per_class: few_shot with n_per_class=3 needs at least 4 "
        "labelled samples per class; class 'b' of cohort 'small' (experiment 'ab') has 3",
    ),
    "few_shot_without_n_per_class": (
        lambda c: (
            c["protocols"]["few2"].pop("n_per_class"),
            c["experiments"]["ab"].update(protocol="few2"),
        ),
        "config key protocols.few2.n_per_class: a few_shot protocol sets",
    ),
    "multiclass_of_one_class": (
        lambda c: (
            c["cohorts"]["small"].update(label_map={"b": "a"}),
            c["experiments"]["ab"].update(task={"kind": "multiclass"}),
        ),
        "config key cohorts.small.label: 'group' holds ['a'] in cohort 'small' (experiment 'ab'); "
        "a classification experiment needs at least 2 classes",
    ),
}


@pytest.mark.parametrize("case", sorted(SHEET_FAULTS))
def test_what_a_sample_sheet_tells_is_checked_before_any_job(case, tmp_path, snakemake_run):
    config = delimited_config(tmp_path)
    edit, expected = SHEET_FAULTS[case]
    edit(config)
    refused(snakemake_run, tmp_path, config, expected)


def test_a_sample_sheet_that_fits_passes_the_checks(tmp_path, snakemake_run):
    """The delimited cohort as written (3 folds, b has 3 samples; few-shot 2 per class, b keeps a
    test sample): the dry run plans its jobs."""
    config = delimited_config(tmp_path)
    config["experiments"]["few"] = {**config["experiments"]["ab"], "protocol": "few2"}
    result = snakemake_run(tmp_path, "--dry-run", "--cores", "1", config=config)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "results/ab/summary.tsv" in result.stdout
    assert "results/few/summary.tsv" in result.stdout


def cohort_kind_config(workdir, kind):
    """delimited_config's experiment on a fixture cohort of another kind (absolute paths), its
    label column misspelled: (config, the key path of the label, what the message names)."""
    from test_cohort_obs import COHORTS, EXAMPLES

    config = delimited_config(workdir)
    config["experiments"]["ab"]["task"] = {"kind": "one_vs_rest"}
    config["protocols"]["cv3"]["n_splits"] = 2
    if kind == "h5ad":
        from omicsbayes.io import read_cohort

        path = workdir / "data" / "gse7390.h5ad"
        path.parent.mkdir()
        read_cohort({"format": "demo", "name": "gse7390"}).write_h5ad(path)
        spec, source = {"format": "h5ad", "path": str(path)}, f"the .obs of path {path}"
    else:
        spec = COHORTS[kind]
        source = {
            "geo": f"the !Sample_ lines of path {spec['path']}",
            "tcga": f"the barcodes of path {spec['path']} and the columns of clinical",
            "hivdb": "fold_change and label (drug DDC) and the annotation columns of path",
            "featurecounts": f"sample_sheet {EXAMPLES / 'rnaseq' / 'samples.tsv'}",
        }[kind]
    config["cohorts"]["small"] = {**spec, "label": "lable"}
    return config, source


@pytest.mark.parametrize("kind", ["geo", "tcga", "hivdb", "featurecounts", "h5ad"])
def test_a_label_column_not_in_a_cohort_of_any_kind_is_refused_before_any_job(
    kind, tmp_path, snakemake_run
):
    """The sheet of each cohort kind is read before any job (a series matrix's header lines, a
    TCGA matrix's header and clinical table, an HIVDB file's phenotype columns, a count table's
    sample sheet, an h5ad file's .obs): one line naming the key, the file and the columns."""
    config, source = cohort_kind_config(tmp_path, kind)
    line = refused(snakemake_run, tmp_path, config, "config key cohorts.small.label: 'lable' is")
    assert source in line and "expected one of [" in line
