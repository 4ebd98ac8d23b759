"""What makes R-L-BSVM's held-out AUROC weak on sparse single-cell data: one factor at a time.

Run ``OMP_NUM_THREADS=1 python -m benchmarks.single_cell`` (``--quick`` for a smoke run,
``--cohorts`` to pick cohorts by part of their name, ``--n-splits``).  Every fit is a
:class:`~omicsbayes.models.RankFactorClassifier` at its constructor defaults (VB, K = 20, at most
100 iterations, ``tol`` 1e-4) except the one factor a row varies; one ``--seed`` decides every
split, subsample and fit through :func:`omicsbayes._seed.derive_seed`, and all rows of a split
share its fit seed, so differences are paired.

Factors (:data:`FACTORS`; the first level of each is the reference its rows are compared with):

``likelihood``
    R-L-BSVM (max-margin rank, latent form) on the values, OR-L-BSVM (Hoff's rank likelihood)
    on the values, G-L-BSVM (Gaussian) on log1p of the values (paper 000 fits its Gaussian
    models on logs).
``maxmargin_form``
    R-L-BSVM's latent form (w = a^T z + v), the printed form (w = a^T z) with the Monte Carlo
    VB, and the printed form with the paper's deterministic VB (``inference="vb_deterministic"``).
``inference``
    Only when asked (``--factors inference``), on the simulated cohorts
    (:data:`INFERENCE_COHORTS`): R-L-BSVM's inference, the default VB
    (latent form, Monte Carlo q(W)), Gibbs sampling of the latent form, and Gibbs sampling of
    the printed form (w = a^T z), which is paper 000's model and sampler as printed (sections
    2, 3 and 7: the pseudo-likelihood of eq. 6 with the neighbours of ERRATA section 2); all
    Gibbs settings at their defaults.
``prediction_bounds``
    Where a new value is placed among the fitted training w (``prediction_bounds``): between
    the running extremes over all smaller / larger training values, or between the mean w of
    the adjacent tie groups; for R-L-BSVM and OR-L-BSVM, the same fit predicting both ways.
``zero_filter``
    Paper 000's gene filter (section 4.3: genes with more than 25 % zeros dropped,
    :class:`~omicsbayes.preprocess.MaxZeroFraction` fitted on the training cells) off or on,
    for R-L-BSVM and G-L-BSVM.
``cohort_size``
    The training cells or the genes subsampled at random (each subsample keeps the cohort's
    sparsity in expectation), for R-L-BSVM and G-L-BSVM.

Cohorts (:func:`cohorts`): pbmc68k_reduced's T and NK cells (scanpy; CD8+ cytotoxic against
the rest; normalised counts, 68 % zeros), scikit-learn's digits 3 against 5 (pixel counts 0-16,
about half zeros; the paper's MNIST task on the shipped digits) and simulated sparse counts of
two cell states (:func:`benchmarks.bench_rank_factor.sparse_cohort`, 100 marker genes of 3,000,
through library size, log and the top 800 genes fitted on the training cells; about 90 % zeros)
at 400 cells and, with the likelihood factor and R-L-BSVM's prediction bounds only
(:data:`LIGHT`; the inference factor when asked), at 2,000 cells: a larger cohort at the same
sparsity.  Splits: stratified 75/25 subsampling.

Writes ``docs/_generated/single_cell_splits.tsv`` (one row per split and setting; ``seconds`` is
the process CPU time of the row's fit and predictions) and ``docs/_generated/single_cell_table.md``
(:func:`markdown_table`), which the models page includes; ``--from-splits`` summarises per-split
tables of cohorts run apart (the committed ones: ``docs/_generated/single_cell_splits/``).
"""

import argparse
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.metrics import auroc
from omicsbayes.evaluate.splitters import classification_splits
from omicsbayes.models import RankFactorClassifier

DEFAULT_SEED = 20261127
SPLIT_COLUMNS = ["cohort", "factor", "model", "level", "split", "auroc", "seconds"]
TABLE_COLUMNS = ["cohort", "factor", "model", "level", "mean", "se", "difference", "verdict", "n"]
AHEAD_SE = 2.0  # a level differs from its factor's reference beyond two paired standard errors

# factor -> its levels, the first the reference
FACTORS = {
    "likelihood": ["R-L-BSVM", "OR-L-BSVM", "G-L-BSVM on log1p"],
    "maxmargin_form": ["latent", "exact", "exact, paper's deterministic VB"],
    "inference": ["VB, latent form", "Gibbs, latent form", "Gibbs, printed form (the paper's)"],
    "prediction_bounds": ["extreme", "adjacent"],
    "zero_filter": ["off", "genes with > 25 % zeros dropped"],
    "cohort_size": ["all", "half the training cells", "half the genes", "a quarter of the genes"],
}
_SIZES = {  # cohort_size level -> (fraction of training cells, fraction of genes)
    "all": (1.0, 1.0),
    "half the training cells": (0.5, 1.0),
    "half the genes": (1.0, 0.5),
    "a quarter of the genes": (1.0, 0.25),
}
SIMULATED = {  # simulated cohorts: name -> (cells, generated genes, marker genes, genes kept)
    "simulated sparse counts, 400 cells": (400, 3000, 100, 800),
    "simulated sparse counts, 2000 cells": (2000, 3000, 100, 800),
}
LIGHT = {"simulated sparse counts, 2000 cells"}  # likelihood and R-L's bounds only (split_rows)
INFERENCE_COHORTS = set(SIMULATED)  # cohorts with the inference factor (split_rows)


# --------------------------------------------------------------------------- cohorts
def _pbmc_t_nk():
    from benchmarks.fidelity import PBMC_T_NK, _pbmc

    p = _pbmc()
    t_nk = p[p.obs["bulk_labels"].isin(PBMC_T_NK).to_numpy()]
    raw = t_nk.raw.X
    logs = np.asarray(raw.toarray() if hasattr(raw, "toarray") else raw, dtype=float)
    y = (t_nk.obs["bulk_labels"].astype(str) == "CD8+ Cytotoxic T").to_numpy().astype(int)
    return np.expm1(logs), y


def _digits_3_5():
    from sklearn.datasets import load_digits

    X, digit = load_digits(return_X_y=True)
    keep = np.isin(digit, [3, 5])
    return X[keep].astype(float), (digit[keep] == 5).astype(int)


def _simulated(cells, genes, markers):
    from benchmarks.bench_rank_factor import sparse_cohort

    counts, state = sparse_cohort(cells, genes, seed=0, n_markers=markers)
    return counts, state


def cohorts(quick=False):
    """``{name: (X, y, preprocess)}``: ``X`` the values a rank likelihood sees (samples x
    genes; sparse counts for the simulated cohorts), ``y`` 0/1, ``preprocess`` None or the
    number of top genes kept after library size and log (fitted on the training cells, then
    mapped back to normalised counts by expm1)."""
    out = {"pbmc68k T/NK, CD8+ cytotoxic vs rest": (*_pbmc_t_nk(), None)}
    out["digits 3 vs 5"] = (*_digits_3_5(), None)
    for name, (cells, genes, markers, kept) in SIMULATED.items():
        if quick:
            cells, genes, markers, kept = cells // 4, genes // 6, markers // 6, kept // 6
        out[name] = (*_simulated(cells, genes, markers), kept)
    return out


def _prepare(X, train, test, kept):
    """Training and test matrices (dense, values on the count scale) of one split."""
    from omicsbayes.preprocess import Log, NormalizeTotal, TopGenes
    from omicsbayes.preprocess.transforms import dense_matrix

    tr, te = X[train], X[test]
    if kept is not None:
        for step in (NormalizeTotal(), Log(), TopGenes(n=kept)):
            tr, te = step.fit_transform(tr), step.transform(te)
        tr, te = np.expm1(dense_matrix(tr)), np.expm1(dense_matrix(te))
    return np.asarray(tr, dtype=float), np.asarray(te, dtype=float)


# --------------------------------------------------------------------------- fits
def _fit_scores(variant, Xtr, ytr, Xte, yte, seed, bounds=("extreme",), **params):
    """Held-out AUROC of one fit, predicted with each of ``bounds``; ``{bound: auroc}`` and the
    seconds of fit and prediction."""
    start = time.process_time()
    model = RankFactorClassifier.from_variant(variant, random_state=seed, verbose=False, **params)
    model.fit(Xtr, ytr)
    out = {}
    for bound in bounds:
        model.set_params(prediction_bounds=bound)
        out[bound] = auroc(yte, model.decision_function(Xte))
    return out, time.process_time() - start


def cohort_factors(cohort, asked=()):
    """The factors of :data:`FACTORS` run on ``cohort``: without ``asked``, all but
    ``inference`` (on :data:`LIGHT` cohorts only ``likelihood`` and ``prediction_bounds``);
    with ``asked``, those of them, where ``inference`` is available on
    :data:`INFERENCE_COHORTS` only (its Gibbs fits are run apart, ``--factors inference``)."""
    names = {"likelihood", "prediction_bounds"} if cohort in LIGHT else set(FACTORS)
    names.discard("inference")
    if not asked:
        return names
    if cohort in INFERENCE_COHORTS:
        names.add("inference")
    return names & set(asked)


def split_rows(cohort, Xtr, ytr, Xte, yte, seed, factors):
    """The rows of :data:`SPLIT_COLUMNS` (without split) of one split for the factors
    ``factors`` (a subset of :func:`cohort_factors`); prediction bounds are compared for
    OR-L-BSVM as well as R-L-BSVM outside the :data:`LIGHT` cohorts."""
    rows = []

    def add(factor, model, level, value, seconds):
        rows.append((cohort, factor, model, level, value, seconds))

    light = cohort in LIGHT
    logs_tr, logs_te = np.log1p(Xtr), np.log1p(Xte)
    both = ("extreme", "adjacent")
    rl, rl_s = _fit_scores("R-L-BSVM", Xtr, ytr, Xte, yte, seed, both)
    if factors & {"likelihood", "zero_filter", "cohort_size"}:
        gl, gl_s = _fit_scores("G-L-BSVM", logs_tr, ytr, logs_te, yte, seed)
    if "likelihood" in factors:
        add("likelihood", "", "R-L-BSVM", rl["extreme"], rl_s)
    if "inference" in factors:
        add("inference", "R-L-BSVM", "VB, latent form", rl["extreme"], rl_s)
        for level, form in (
            ("Gibbs, latent form", "latent"),
            ("Gibbs, printed form (the paper's)", "exact"),
        ):
            gibbs, s = _fit_scores(
                "R-L-BSVM", Xtr, ytr, Xte, yte, seed, inference="gibbs", maxmargin_form=form
            )
            add("inference", "R-L-BSVM", level, gibbs["extreme"], s)
    if "likelihood" in factors or ("prediction_bounds" in factors and not light):
        orl, orl_s = _fit_scores("OR-L-BSVM", Xtr, ytr, Xte, yte, seed, both)
    if "likelihood" in factors:
        add("likelihood", "", "OR-L-BSVM", orl["extreme"], orl_s)
        add("likelihood", "", "G-L-BSVM on log1p", gl["extreme"], gl_s)
    if "prediction_bounds" in factors:
        fitted = [("R-L-BSVM", rl, rl_s)] + ([] if light else [("OR-L-BSVM", orl, orl_s)])
        for model, scores, seconds in fitted:
            for bound in both:
                add("prediction_bounds", model, bound, scores[bound], seconds)
    if "maxmargin_form" in factors:
        add("maxmargin_form", "R-L-BSVM", "latent", rl["extreme"], rl_s)
        exact, s = _fit_scores("R-L-BSVM", Xtr, ytr, Xte, yte, seed, maxmargin_form="exact")
        add("maxmargin_form", "R-L-BSVM", "exact", exact["extreme"], s)
        det, s = _fit_scores("R-L-BSVM", Xtr, ytr, Xte, yte, seed, inference="vb_deterministic")
        add("maxmargin_form", "R-L-BSVM", "exact, paper's deterministic VB", det["extreme"], s)
    if not factors & {"zero_filter", "cohort_size"}:
        return rows

    from omicsbayes.preprocess import MaxZeroFraction

    try:
        keep = MaxZeroFraction(0.25).fit(Xtr).support_
    except ValueError:  # no gene has at most 25 % zeros: the filter leaves nothing to fit
        keep = None
    for model, full, seconds, (tr, te) in (
        ("R-L-BSVM", rl, rl_s, (Xtr, Xte)),
        ("G-L-BSVM on log1p", gl, gl_s, (logs_tr, logs_te)),
    ):
        variant = model.split(" ")[0]
        if "zero_filter" in factors:
            add("zero_filter", model, "off", full["extreme"], seconds)
            if keep is not None:
                filtered, s = _fit_scores(variant, tr[:, keep], ytr, te[:, keep], yte, seed)
                add("zero_filter", model, "genes with > 25 % zeros dropped", filtered["extreme"], s)
        if "cohort_size" not in factors:
            continue
        add("cohort_size", model, "all", full["extreme"], seconds)
        for level, (cell_fraction, gene_fraction) in list(_SIZES.items())[1:]:
            rng = np.random.default_rng(derive_seed(seed, "cohort_size", level))
            cells = np.sort(rng.permutation(len(ytr))[: int(round(cell_fraction * len(ytr)))])
            if len(np.unique(ytr[cells])) < 2:
                continue
            genes = np.sort(rng.permutation(tr.shape[1])[: int(round(gene_fraction * tr.shape[1]))])
            sub, s = _fit_scores(
                variant, tr[np.ix_(cells, genes)], ytr[cells], te[:, genes], yte, seed
            )
            add("cohort_size", model, level, sub["extreme"], s)
    return rows


def run(names, n_splits, seed, quick=False, factors=()):
    """Per-split table (:data:`SPLIT_COLUMNS`) of the cohorts whose names contain one of
    ``names`` (all when empty), each with its :func:`cohort_factors` of ``factors``."""
    rows = []
    for cohort, (X, y, kept) in cohorts(quick).items():
        if names and not any(n in cohort for n in names):
            continue
        splits = classification_splits(
            y,
            "repeated_subsampling",
            random_state=derive_seed(seed, "single_cell", cohort),
            n_splits=n_splits,
        )
        for split, table in splits.groupby("split"):
            train = table.loc[table["role"] == "train", "sample"].to_numpy()
            test = table.loc[table["role"] == "test", "sample"].to_numpy()
            Xtr, Xte = _prepare(X, train, test, kept)
            fit_seed = derive_seed(seed, "single_cell", cohort, split)
            chosen = cohort_factors(cohort, factors)
            if not chosen:
                continue
            for row in split_rows(cohort, Xtr, y[train], Xte, y[test], fit_seed, chosen):
                rows.append((*row[:4], split, *row[4:]))
            print(f"{cohort}: split {split} done", file=sys.stderr, flush=True)
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


# --------------------------------------------------------------------------- summary
def summarize(per_split):
    """One row per cohort, factor, model and level: mean AUROC, its standard error over splits,
    and the paired difference from the factor's reference level with its standard error and
    verdict (``higher`` / ``lower`` beyond two paired standard errors, else ``level``)."""
    out = []
    keys = ["cohort", "factor", "model"]
    per_split = per_split.fillna({"model": ""})  # the likelihood rows name no model (TSV: NaN)
    for (cohort, factor, model), group in per_split.groupby(keys, sort=False):
        wide = group.pivot(index="split", columns="level", values="auroc")
        reference = FACTORS[factor][0]
        for level in [lv for lv in FACTORS[factor] if lv in wide]:
            values = wide[level].dropna()
            se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else np.nan
            if level == reference:
                difference, verdict = "reference", ""
            else:
                paired = (wide[level] - wide[reference]).dropna()
                d = paired.mean()
                d_se = paired.std(ddof=1) / np.sqrt(len(paired)) if len(paired) > 1 else np.nan
                difference = f"{d:+.3f} ± {d_se:.3f}"
                verdict = (
                    "higher"
                    if d > AHEAD_SE * d_se
                    else "lower"
                    if d < -AHEAD_SE * d_se
                    else "level"
                )
            out.append((cohort, factor, model, level, values.mean(), se, difference, verdict,
                        len(values)))  # fmt: skip
    return pd.DataFrame(out, columns=TABLE_COLUMNS)


def markdown_table(table, argv):
    """The summary as Markdown, headed by the command that made it."""
    lines = [
        "<!-- generated by benchmarks/single_cell.py; do not edit -->",
        "",
        f"Made by `{shlex.join(['python', '-m', 'benchmarks.single_cell', *argv])}`.",
        "",
        "Held-out AUROC, mean ± standard error over n stratified 75/25 splits; *difference* is "
        "the paired difference from the factor's reference level (its first row), *higher* / "
        "*lower* beyond two paired standard errors, else *level*.",
        "",
        "| cohort | factor | model | level | AUROC | difference | verdict | n |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.cohort} | {r.factor} | {r.model} | {r.level} | {r.mean:.3f} ± {r.se:.3f} "
            f"| {r.difference} | {r.verdict} | {r.n} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m benchmarks.single_cell", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 splits, small simulated cohorts")
    parser.add_argument("--cohorts", nargs="*", default=[], help="parts of cohort names")
    parser.add_argument("--factors", nargs="*", default=[], help="run only these factors")
    parser.add_argument("--n-splits", type=int, default=10)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--from-splits", nargs="*", default=None, help="summarise these TSVs")
    parser.add_argument("--splits-out", default="docs/_generated/single_cell_splits.tsv")
    parser.add_argument("--markdown", default="docs/_generated/single_cell_table.md")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.factors) - set(FACTORS))
    if unknown:
        parser.error(f"--factors: unknown {unknown}; expected some of {sorted(FACTORS)}")
    if args.from_splits:
        per_split = pd.concat([pd.read_csv(p, sep="\t") for p in args.from_splits])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n_splits = 2 if args.quick else args.n_splits
            per_split = run(args.cohorts, n_splits, args.seed, args.quick, args.factors)
        Path(args.splits_out).parent.mkdir(parents=True, exist_ok=True)
        per_split.to_csv(args.splits_out, sep="\t", index=False)
    table = summarize(per_split)
    print(table.to_string(index=False))
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(markdown_table(table, argv))


if __name__ == "__main__":
    main()
