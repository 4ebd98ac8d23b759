# Paper 003's Figures 2-3: a metric against a varied setting (training samples per class, number
# of components k, regularisation C), drawn from the summary tables of several experiments.
#
# Each entry of the optional config section `sweeps:` lists one experiment per point of the x axis
# (`experiments`, an experiment may repeat) and the x value of each point (`values`). Without
# `lines`, every model of those experiments is one line; with `lines`, each line label names one
# model entry per point (e.g. BM2PCA_k2, BM2PCA_k4, ... drawn as one line "BM2PCA").
#
# Needs common.smk (EXPERIMENTS, experiment_kind); the main Snakefile includes this file and adds
# sweep_targets() to rule all.

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
    other = [e for e in experiments if experiment_kind(e) != "classification"]
    if other:
        raise WorkflowError(
            f"{key}.experiments: {other} are not classification experiments; a sweep draws "
            "accuracy, AUROC or AUPR of classification experiments"
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


rule sweep_figure:
    input:
        lambda wc: [
            f"results/{e}/summary.tsv" for e in dict.fromkeys(SWEEPS[wc.sweep]["experiments"])
        ],
    output:
        figure=report(
            "results/sweeps/{sweep}.png",
            caption="../report/sweep_figure.rst",
            category="Sweeps",
            subcategory="{sweep}",
            labels={"sweep": "{sweep}", "figure": "metric against the varied setting"},
        ),
        table=report(
            "results/sweeps/{sweep}.tsv",
            caption="../report/sweep_table.rst",
            category="Sweeps",
            subcategory="{sweep}",
            labels={"sweep": "{sweep}", "table": "mean and sd per point and line"},
        ),
    params:
        sweep=lambda wc: SWEEPS[wc.sweep],
    wildcard_constraints:
        sweep="[^/]+",
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/sweeps/{sweep}.log",
    benchmark:
        "benchmarks/sweeps/{sweep}.tsv"
    script:
        "../scripts/sweep_figure.py"
