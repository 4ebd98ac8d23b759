"""Attribution of paper 000's claims ``a_bsvm`` and ``a_nonlinear`` (benchmarks/fidelity.py) to
the model, the data or the implementation.

Two claim runs of ``python -m benchmarks.fidelity`` (``--only a_bsvm_attr``, ``--only
a_nonlinear_attr``), each on planted cohorts, where the mechanism the paper names must show if
the implementation is right, and on paper 000's real cohorts, where it measures what that
mechanism needs. The real-cohort fits are those of runs ``a_rank`` (``default`` rows: its
splits, fit seeds and specs) and ``a_rank_paper`` (``paper`` rows), so the diagnostics describe
the fits whose AUROC the fidelity table reports. One seed decides every planted cohort, split
and fit; nothing is tuned per cohort. Run ``a_bsvm_grade_attr`` (:func:`grade_attr_runs`)
plants far-side label flips in the training labels of the real cohorts themselves. Run
``a_bsvm_link_attr`` (:func:`link_attr_runs`) splits the OR-L pair's held-out AUROC into the
factor scores and the label link.

Planted cohorts (:func:`planted_flips`, :func:`planted_subtypes`): ``n_samples`` scores ``z``,
``n_genes`` genes ``x = A z + noise`` (the ``log`` scale; the rank likelihoods see ``2**x``),
75/25 stratified subsampling, test AUROC against the true labels.

Metrics (per split):

``auroc``
    Held-out AUROC (planted cohorts only; the real cohorts' are the table's ``a_rank`` rows).
``train_error``
    Fraction of training samples on the wrong side of the label-free training decision
    (``decision_function`` of the training samples: scores inferred from ``x`` alone).
``far_side``
    Fraction of training samples beyond the margin on the wrong side of the label-free training
    decision (``y f < -1``, ``y`` in {-1, 1}): the samples a hinge loss counts linearly and a
    probit log likelihood quadratically.
``wrong_side_depth``
    Runs ``a_bsvm_overlap`` and ``a_bsvm_grade_attr`` only: the median of ``-y f`` over the
    training samples on the wrong side of the label-free training decision (``y f < 0``), in
    units of the margin (``|f| = 1``).
``wrong_side_tail``
    Runs ``a_bsvm_overlap`` and ``a_bsvm_grade_attr`` only: the 90th percentile of ``-y f``
    over the wrong-side training samples over the median of ``y f`` over the right-side ones
    (free of the decision's scale): far-side label errors leave a tail of wrong-side samples as
    deep as the right side's typical margin or deeper, class overlap does not.
``train_auroc_gap``
    Training AUROC (against the labels the fit saw) of the label-informed decision (the fitted
    ``scores_``) minus that of the label-free one: how far the labels moved the training scores.
``heldout_spearman``
    Spearman correlation of the held-out decisions of a model and its rival on the same split
    (on the claimed winner's row).
``n_active``, ``top_weight``
    DP mixture: components holding at least :data:`ACTIVE_WEIGHT` of the training samples'
    responsibility, and the largest share.
"""

import numpy as np
import pandas as pd
from scipy import stats

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.metrics import auroc
from omicsbayes.evaluate.splitters import classification_splits
from omicsbayes.preprocess.transforms import build_pipeline
from omicsbayes.protocols._common import make_estimator

SPLIT_COLUMNS = ["claim", "protocol", "cohort", "model", "metric", "split", "value"]
ACTIVE_WEIGHT = 0.05  # a component is active with at least this share of the training samples
PLANTED = {"n_samples": 200, "n_genes": 60, "n_factors": 4}
FLIP_FRACTION = 0.1
OVERLAP_WRONG_SIDE = 0.15  # planted class overlap: share of samples beyond the Bayes rule
SUBTYPE_SEPARATION = 3.0


def _rank_factor(variant, **params):
    return {"class": "RankFactorClassifier", "variant": variant, "params": params}


# Planted models; the name's suffix is the scale each sees: log (x), intensity (2**x) or z (the
# planted scores themselves, a linear classifier with no factor model: the link alone)
BSVM_PLANTED = {
    "G-L-BSVM/log": _rank_factor("G-L-BSVM"),
    "G-L-Probit/log": _rank_factor("G-L-Probit"),
    "OR-L-BSVM/intensity": _rank_factor("OR-L-BSVM"),
    "OR-L-Probit/intensity": _rank_factor("OR-L-Probit"),
    "G-L-BSVM gibbs/log": _rank_factor("G-L-BSVM", inference="gibbs"),
    "G-L-Probit gibbs/log": _rank_factor("G-L-Probit", inference="gibbs"),
    "BSVM/z": {"class": "BayesianSVM"},  # the factor model's label block (inference/bsvm.py)
    "probit/z": {"class": "BayesianProbitClassifier", "params": {"nu": 0.0}},
}
NONLINEAR_PLANTED = {
    "R-L-BSVM/intensity": _rank_factor("R-L-BSVM"),
    "R-NL-BSVM/intensity": _rank_factor("R-NL-BSVM"),
}
BSVM_PAIRS = [
    ("G-L-BSVM/log", "G-L-Probit/log"),
    ("OR-L-BSVM/intensity", "OR-L-Probit/intensity"),
    ("G-L-BSVM gibbs/log", "G-L-Probit gibbs/log"),
    ("BSVM/z", "probit/z"),
]
OVERLAP_PAIRS = [BSVM_PAIRS[1], BSVM_PAIRS[3]]  # run a_bsvm_overlap: the OR-L pair, the link alone
# run a_bsvm_grade_attr: paper 000's cohorts that get far-side flips, its flipped models and its
# planted cohort (a new draw of a_bsvm_attr's planted flips per split)
FLIP_DRAWS = f"planted: {FLIP_FRACTION:.0%} far-side flips, a new draw per split"
REAL_FLIP_COHORTS = ("GSE7390 grade (poor vs rest)", "GSE7390 ER (negative vs positive)")
FLIPPED = f" {FLIP_FRACTION:.0%} far-side flips"
GRADE_ATTR_PAIRS = [
    *OVERLAP_PAIRS,
    tuple(name.replace("/", FLIPPED + "/") for name in OVERLAP_PAIRS[0]),
    *[(name.replace("/", FLIPPED + "/"), name) for name in OVERLAP_PAIRS[0]],
]
# run a_bsvm_link_attr: each OR-L model's label-free scores read out by each link refitted alone
LINK_READOUTS = {"BSVM": "BSVM/z", "probit": "probit/z"}  # link -> its BSVM_PLANTED model


def readout_name(model, link):
    """The model name of ``link`` refitted on the label-free scores of OR-L model ``model``."""
    return f"{model.split('/')[0]} scores + {link}/intensity"


_OR_BSVM, _OR_PROBIT = OVERLAP_PAIRS[0]
LINK_ATTR_PAIRS = [
    # the link on fixed scores
    *[(readout_name(m, "BSVM"), readout_name(m, "probit")) for m in OVERLAP_PAIRS[0]],
    # the scores under one link
    *[(readout_name(_OR_BSVM, link), readout_name(_OR_PROBIT, link)) for link in LINK_READOUTS],
    # the joint fit against its own link refitted on its label-free scores
    (_OR_BSVM, readout_name(_OR_BSVM, "BSVM")),
    (_OR_PROBIT, readout_name(_OR_PROBIT, "probit")),
]
NONLINEAR_PAIRS = [
    ("R-NL-BSVM/intensity", "R-L-BSVM/intensity"),
    ("R-NL-BSVM project VB/intensity", "R-L-BSVM project VB/intensity"),
]


def planted_flips(n_samples, n_genes, n_factors, flip_fraction, rng):
    """A factor cohort whose labels follow ``z_1 > 0``, with far-side flips.

    The ``round(flip_fraction * n_samples)`` samples with the largest ``z_1 + z_2`` (positives
    far from the rule's boundary, along a direction tilted from its normal) are labelled
    negative: a hinge loss grows linearly in their margin, a probit log likelihood
    quadratically. Returns ``x`` (n_samples, n_genes), ``z``, the true and the observed labels
    (0/1)."""
    z = rng.standard_normal((n_samples, n_factors))
    y_true = (z[:, 0] > 0).astype(int)
    y_seen = y_true.copy()
    y_seen[np.argsort(-(z[:, 0] + z[:, 1]))[: int(round(flip_fraction * n_samples))]] = 0
    return _genes(z, n_genes, rng), z, y_true, y_seen


def planted_subtypes(n_samples, n_genes, n_factors, separation, rng):
    """A factor cohort of two subtypes, each with its own linear rule through the origin.

    Subtype ``s`` (half the samples each) sits at ``z_1 = +-separation``; its label is
    ``z_2 > 0`` in one subtype and ``z_2 < 0`` in the other (XOR of subtype and ``z_2``), so
    no single linear rule on ``z`` beats chance and a mixture of two local linear ones separates
    the classes. Returns ``x``, ``z``, the labels (0/1, true and observed alike) twice."""
    z = rng.standard_normal((n_samples, n_factors))
    subtype = rng.permutation(np.arange(n_samples) % 2)
    z[:, 0] = np.where(subtype == 1, separation, -separation) + 0.5 * z[:, 0]
    y = ((z[:, 1] > 0) == (subtype == 1)).astype(int)
    return _genes(z, n_genes, rng), z, y, y


def planted_overlap(n_samples, n_genes, n_factors, wrong_side, rng):
    """A factor cohort of two overlapping classes and no label errors.

    Half the samples are positive; ``z_1`` is Gaussian with unit variance around ``+-mu``,
    ``mu`` set so that a share ``wrong_side`` of each class lies beyond the Bayes rule ``z_1 >
    0``: samples whose features look like the other class, most of them near the boundary.
    Returns ``x``, ``z``, the labels (0/1, true and observed alike) twice."""
    z = rng.standard_normal((n_samples, n_factors))
    y = rng.permutation(np.arange(n_samples) % 2)
    mu = stats.norm.isf(wrong_side)
    z[:, 0] += np.where(y == 1, mu, -mu)
    return _genes(z, n_genes, rng), z, y, y


def _genes(z, n_genes, rng):
    """``z A^T`` plus unit Gaussian noise, ``A`` standard normal (n_genes x n_factors)."""
    loadings = rng.standard_normal((n_genes, z.shape[1]))
    return z @ loadings.T + rng.standard_normal((len(z), n_genes))


def _estimator(spec, random_state):
    """``make_estimator``, and the Bayesian SVM that RankFactorClassifier's label block shares
    (not a workflow model class)."""
    if spec["class"] == "BayesianSVM":
        from omicsbayes.models.bsvm import BayesianSVM

        return BayesianSVM(random_state=int(random_state), verbose=False)
    return make_estimator(spec, random_state)


def _fit_metrics(model, X_train, y_train, depth=False):
    """``train_error``, ``far_side``, ``wrong_side_depth`` and ``wrong_side_tail`` (when
    ``depth``), ``train_auroc_gap``
    (linear factor models) and ``n_active``, ``top_weight`` (DP mixture) of a fitted model
    (module docstring)."""
    free = model.decision_function(X_train)
    signed = np.where(y_train == 1, free, -free)
    out = {
        "train_error": float(np.mean((free > 0) != (y_train == 1))),
        "far_side": float(np.mean(signed < -1.0)),
    }
    if depth:
        wrong, right = -signed[signed < 0], signed[signed > 0]
        out["wrong_side_depth"] = float(np.median(wrong)) if wrong.size else np.nan
        tail = np.quantile(wrong, 0.9) / np.median(right) if wrong.size and right.size else np.nan
        out["wrong_side_tail"] = float(tail)
    if getattr(model, "mixture", False):
        # the training samples' responsibilities (RankFactorClassifier keeps them privately)
        weights = model._means["R"].mean(axis=0)
        out["n_active"] = float(np.sum(weights >= ACTIVE_WEIGHT))
        out["top_weight"] = float(weights.max())
    elif hasattr(model, "scores_"):
        informed = model.scores_ @ model.coef_[0] + model.intercept_[0]
        out["train_auroc_gap"] = auroc(y_train, informed) - auroc(y_train, free)
    return out


def _diagnose(
    run,
    protocol,
    cohort,
    scales,
    y_seen,
    splits,
    specs,
    pairs,
    seed_tags,
    *,
    steps=(),
    y_true=None,
    depth=False,
):
    """Per-split rows of ``specs`` fitted on ``splits`` (a fold table) to the labels ``y_seen``:
    each model sees ``scales[suffix]`` (its name's suffix) after ``steps`` (transforms fitted on
    the training samples), fitted with seed ``derive_seed(*seed_tags, split)``; ``auroc``
    against ``y_true`` when given; ``heldout_spearman`` of each pair of ``pairs``;
    ``wrong_side_depth`` and ``wrong_side_tail`` when ``depth``."""
    rows = []
    for split, table in splits.groupby("split"):
        train = table.loc[table["role"] == "train", "sample"].to_numpy()
        test = table.loc[table["role"] == "test", "sample"].to_numpy()
        held_out = {}
        for name, spec in specs.items():
            X = scales[name.rsplit("/", 1)[1]]
            A, B = X[train], X[test]
            if steps:
                pipeline = build_pipeline(steps)
                A, B = pipeline.fit_transform(A), pipeline.transform(B)
            model = _estimator(spec, derive_seed(*seed_tags, split)).fit(A, y_seen[train])
            held_out[name] = np.asarray(model.decision_function(B), dtype=float)
            metrics = _fit_metrics(model, A, y_seen[train], depth)
            if y_true is not None:
                metrics["auroc"] = auroc(y_true[test], held_out[name])
            rows += [(run, protocol, cohort, name, m, split, v) for m, v in metrics.items()]
        for winner, rival in pairs:
            if winner in held_out and rival in held_out:
                rho = stats.spearmanr(held_out[winner], held_out[rival]).statistic
                rows.append((run, protocol, cohort, winner, "heldout_spearman", split, rho))
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def _planted(run, cohorts, specs, pairs, settings, seed, seed_runs=None, depth=False):
    """Rows of ``specs`` on planted ``cohorts`` (``{name: generator(rng)}``), each cohort's
    draw, splits and fits seeded by run ``seed_runs[cohort]`` (default ``run``)."""
    out = []
    for cohort, generate in cohorts.items():
        tags = (seed, (seed_runs or {}).get(cohort, run), cohort)
        x, z, y_true, y_seen = generate(np.random.default_rng(derive_seed(*tags)))
        splits = classification_splits(
            y_seen,
            "repeated_subsampling",
            random_state=derive_seed(*tags, "splits"),
            n_splits=settings["n_splits"],
        )
        scales = {"log": x, "intensity": np.exp2(x), "z": z}
        out.append(
            _diagnose(
                run,
                "default",
                cohort,
                scales,
                y_seen,
                splits,
                specs,
                pairs,
                tags,
                y_true=y_true,
                depth=depth,
            )
        )
    return out


def rank_run_splits(run, labels, positive, n_splits, seed, cohort):
    """The fold table, 0/1 labels and fit-seed tags of claim run ``run`` (``a_rank`` or
    ``a_rank_paper``) of :func:`benchmarks.fidelity.claim_a` on one cohort: ``a_rank`` splits
    the labels as given by 75/25 stratified subsampling, ``a_rank_paper`` by 10-fold
    cross-validation stratified by the task's two classes."""
    labels = pd.Series(np.asarray(labels, dtype=object)).reset_index(drop=True)
    y = labels.isin(positive).to_numpy().astype(int)
    if run == "a_rank_paper":
        stratify, protocol = np.where(y == 1, "positive", "rest"), "stratified_kfold"
    else:
        stratify, protocol = labels.to_numpy(), "repeated_subsampling"
    splits = classification_splits(
        stratify, protocol, random_state=derive_seed(seed, run, cohort), n_splits=n_splits
    )
    return splits, y, (seed, run, cohort)


def _real(claim_run, tasks, rank_models, wanted, pairs, settings, seed, zero_filter, depth=False):
    """Diagnostic rows of runs ``a_rank`` (protocol ``default``) and ``a_rank_paper``
    (``paper``, with ``zero_filter``) on ``tasks`` (:func:`benchmarks.fidelity._paper000_tasks`),
    the models ``wanted[run]`` of ``rank_models[run]`` (``MODELS`` of fidelity) refitted on that
    run's splits with its fit seeds (runs missing from ``wanted`` are skipped)."""
    out = []
    for run, protocol in (("a_rank", "default"), ("a_rank_paper", "paper")):
        if run not in wanted:
            continue
        specs = {name: rank_models[run][name] for name in wanted[run]}
        for cohort, (logs, inverse, labels, positive) in tasks.items():
            splits, y, tags = rank_run_splits(
                run, labels, positive, settings["n_splits"], seed, cohort
            )
            scales = {"log": logs, "intensity": inverse(logs)}
            steps = [zero_filter] if protocol == "paper" else []
            out.append(
                _diagnose(
                    claim_run,
                    protocol,
                    cohort,
                    scales,
                    y,
                    splits,
                    specs,
                    pairs,
                    tags,
                    steps=steps,
                    depth=depth,
                )
            )
    return out


def bsvm_runs(tasks, rank_models, settings, seed, zero_filter):
    """Run ``a_bsvm_attr``: the BSVM link against probit on :func:`planted_flips` (10 % flips)
    and without flips, inside the factor model (VB and Gibbs) and on the planted scores alone;
    on the real ``tasks``, the diagnostics of run ``a_rank``'s and ``a_rank_paper``'s G-L and
    OR-L pairs."""

    def flips(fraction):
        return lambda rng: planted_flips(**PLANTED, flip_fraction=fraction, rng=rng)

    cohorts = {
        f"planted: {FLIP_FRACTION:.0%} far-side flips": flips(FLIP_FRACTION),
        "planted: no flips": flips(0.0),
    }
    names = [name for pair in BSVM_PAIRS[:2] for name in pair]
    wanted = {"a_rank": names, "a_rank_paper": names}
    return pd.concat(
        _planted("a_bsvm_attr", cohorts, BSVM_PLANTED, BSVM_PAIRS, settings, seed)
        + _real("a_bsvm_attr", tasks, rank_models, wanted, BSVM_PAIRS, settings, seed, zero_filter),
        ignore_index=True,
    )


def nonlinear_runs(tasks, rank_models, settings, seed, zero_filter):
    """Run ``a_nonlinear_attr``: R-NL-BSVM against R-L-BSVM on :func:`planted_subtypes` and,
    as a control, on one linear rule (:func:`planted_flips` without flips); on the real
    ``tasks``, the mixture's weights and the two models' rank agreement in runs ``a_rank`` and
    ``a_rank_paper`` (the project's VB there, where R-L-BSVM does not collapse, and the mixture's
    weights under the paper's VB)."""

    def subtypes(rng):
        return planted_subtypes(**PLANTED, separation=SUBTYPE_SEPARATION, rng=rng)

    def one_rule(rng):
        return planted_flips(**PLANTED, flip_fraction=0.0, rng=rng)

    cohorts = {
        "planted: two subtypes, opposite rules": subtypes,
        "planted: one linear rule": one_rule,
    }
    wanted = {
        "a_rank": list(NONLINEAR_PAIRS[0]),
        "a_rank_paper": list(NONLINEAR_PAIRS[1]) + ["R-NL-BSVM/intensity"],
    }
    run, pairs = "a_nonlinear_attr", NONLINEAR_PAIRS
    return pd.concat(
        _planted(run, cohorts, NONLINEAR_PLANTED, pairs, settings, seed)
        + _real(run, tasks, rank_models, wanted, pairs, settings, seed, zero_filter),
        ignore_index=True,
    )


def overlap_runs(tasks, rank_models, settings, seed):
    """Run ``a_bsvm_overlap``: class overlap against far-side label errors as the cause of the
    OR-L pair's ties. The OR-L pair and the link alone on :func:`planted_overlap`
    (:data:`OVERLAP_WRONG_SIDE` of each class beyond the Bayes rule, no label flips) and on run
    ``a_bsvm_attr``'s planted flips (its draw, splits and fit seeds), and the OR-L pair of run
    ``a_rank`` on the real ``tasks``, each with ``wrong_side_depth`` and ``wrong_side_tail``."""
    flips = f"planted: {FLIP_FRACTION:.0%} far-side flips"
    overlap = f"planted: class overlap, {OVERLAP_WRONG_SIDE:.0%} beyond the Bayes rule"
    cohorts = {
        flips: lambda rng: planted_flips(**PLANTED, flip_fraction=FLIP_FRACTION, rng=rng),
        overlap: lambda rng: planted_overlap(**PLANTED, wrong_side=OVERLAP_WRONG_SIDE, rng=rng),
    }
    pairs = OVERLAP_PAIRS
    specs = {name: BSVM_PLANTED[name] for pair in pairs for name in pair}
    run = "a_bsvm_overlap"
    wanted = {"a_rank": list(pairs[0])}
    return pd.concat(
        _planted(run, cohorts, specs, pairs, settings, seed, {flips: "a_bsvm_attr"}, depth=True)
        + _real(run, tasks, rank_models, wanted, pairs, settings, seed, None, depth=True),
        ignore_index=True,
    )


def far_side_flips(decision, y, fraction):
    """The 0/1 labels ``y`` with ``round(fraction * len(y))`` of them flipped on the far side of
    the rule ``decision`` (one value per sample, larger for the positive class).

    Half the flips (the odd one too) relabel as negative the positives with the largest
    decision, the others relabel as positive the negatives with the smallest: each flipped
    label lies as deep on the wrong side as the rule allows, and the class counts move by at
    most one. ValueError when a class has fewer samples than its flips."""
    y = np.asarray(y)
    n_flip = int(round(fraction * len(y)))
    n_positive = (n_flip + 1) // 2
    positives, negatives = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    if n_positive > positives.size or n_flip - n_positive > negatives.size:
        raise ValueError(
            f"{n_flip} far-side flips need {n_positive} positives and {n_flip - n_positive}"
            f" negatives; the labels have {positives.size} and {negatives.size}"
        )
    flipped = y.copy()
    flipped[positives[np.argsort(-decision[positives], kind="stable")[:n_positive]]] = 0
    flipped[negatives[np.argsort(decision[negatives], kind="stable")[: n_flip - n_positive]]] = 1
    return flipped


def grade_attr_runs(tasks, rank_models, settings, seed):
    """Run ``a_bsvm_grade_attr``: whether the BSVM link discounts far-side label errors on the
    features of paper 000's real cohorts, and on :func:`planted_flips` drawn anew.

    Planted (cohort :data:`FLIP_DRAWS`): ``settings["n_planted"]`` draws of run
    ``a_bsvm_attr``'s planted flips, one 75/25 split each (the row's ``split`` is the draw),
    the OR-L pair and the link alone, as run ``a_bsvm_overlap`` measures them: whether the gain
    of that run's one draw is the generator's.

    Real: on run ``a_rank``'s splits of each of ``tasks`` (its split and fit seeds), the OR-L
    pair of ``rank_models["a_rank"]`` is fitted to the training labels as given (run
    ``a_rank``'s own fits) and, with the same fit seeds, to those labels with
    :data:`FLIP_FRACTION` of them flipped (:func:`far_side_flips`) on the far side of the
    pair's rule: the mean of the two unflipped fits' label-free training decisions, each
    standardised. Held-out AUROC against the test labels as given; the fit metrics
    (:func:`_fit_metrics`, with the wrong side's depth and tail) against the labels each fit
    saw. The flipped models' names carry :data:`FLIPPED`."""
    return pd.concat([_flip_draws(settings, seed), _real_flips(tasks, rank_models, settings, seed)],
                     ignore_index=True)  # fmt: skip


def _flip_draws(settings, seed):
    """The planted rows of :func:`grade_attr_runs`: draw ``k`` seeded by ``(seed, run,
    FLIP_DRAWS, k)``, its split and fits as :func:`_planted` seeds a cohort's."""
    specs = {name: BSVM_PLANTED[name] for pair in OVERLAP_PAIRS for name in pair}
    out = []
    for draw in range(settings["n_planted"]):
        tags = (seed, "a_bsvm_grade_attr", FLIP_DRAWS, draw)
        rng = np.random.default_rng(derive_seed(*tags))
        x, z, y_true, y_seen = planted_flips(**PLANTED, flip_fraction=FLIP_FRACTION, rng=rng)
        splits = classification_splits(
            y_seen, "repeated_subsampling", random_state=derive_seed(*tags, "splits"), n_splits=1
        )
        scales = {"log": x, "intensity": np.exp2(x), "z": z}
        rows = _diagnose("a_bsvm_grade_attr", "default", FLIP_DRAWS, scales, y_seen, splits, specs,
                         OVERLAP_PAIRS, tags, y_true=y_true, depth=True)  # fmt: skip
        out.append(rows.assign(split=draw))
    return pd.concat(out, ignore_index=True)


def _a_rank_trials(tasks, settings, seed):
    """Run ``a_rank``'s trials of ``tasks`` (:func:`benchmarks.fidelity._paper000_tasks`):
    ``cohort, X (the intensities), y (0/1), split, train, test, fit seed`` per split."""
    for cohort, (logs, inverse, labels, positive) in tasks.items():
        splits, y, tags = rank_run_splits(
            "a_rank", labels, positive, settings["n_splits"], seed, cohort
        )
        X = inverse(logs)
        for split, table in splits.groupby("split"):
            train = table.loc[table["role"] == "train", "sample"].to_numpy()
            test = table.loc[table["role"] == "test", "sample"].to_numpy()
            yield cohort, X, y, split, train, test, derive_seed(*tags, split)


def _real_flips(tasks, rank_models, settings, seed):
    """The real-cohort rows of :func:`grade_attr_runs`."""
    specs = {name: rank_models["a_rank"][name] for name in OVERLAP_PAIRS[0]}
    rows = []
    for cohort, X, y, split, train, test, state in _a_rank_trials(tasks, settings, seed):
        fits = {
            name: (_estimator(spec, state).fit(X[train], y[train]), y[train])
            for name, spec in specs.items()
        }
        rule = np.mean(
            [stats.zscore(model.decision_function(X[train])) for model, _ in fits.values()],
            axis=0,
        )
        y_flipped = far_side_flips(rule, y[train], FLIP_FRACTION)
        for name, spec in specs.items():
            flipped = _estimator(spec, state).fit(X[train], y_flipped)
            fits[name.replace("/", FLIPPED + "/")] = (flipped, y_flipped)
        for name, (model, seen) in fits.items():
            metrics = _fit_metrics(model, X[train], seen, depth=True)
            metrics["auroc"] = auroc(y[test], model.decision_function(X[test]))
            rows += [("a_bsvm_grade_attr", "default", cohort, name, m, split, v)
                     for m, v in metrics.items()]  # fmt: skip
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def link_attr_runs(tasks, rank_models, settings, seed):
    """Run ``a_bsvm_link_attr``: where the OR-L pair's difference lies, in the factor scores or
    in the label link.

    On run ``a_rank``'s splits of each of ``tasks`` (its split and fit seeds), run ``a_rank``'s
    OR-L pair (``rank_models["a_rank"]``) is fitted as run ``a_rank`` fits it (the same held-out
    AUROC). Each fit's label-free scores (``transform``: the posterior mean scores given the
    training ranks alone) of the training and the test samples are then read out by each link
    of :data:`LINK_READOUTS` fitted alone on the training scores and labels (the factor model's
    label block, and the Bayesian probit regression with margin 0), with the same fit seed:
    held-out AUROC per readout (:func:`readout_name`). :data:`LINK_ATTR_PAIRS` contrasts the
    links on the same scores, the two models' scores under the same link, and each joint fit
    against its own link refitted on its scores."""
    specs = {name: rank_models["a_rank"][name] for name in OVERLAP_PAIRS[0]}
    rows = []
    for cohort, X, y, split, train, test, state in _a_rank_trials(tasks, settings, seed):
        aurocs = {}
        for name, spec in specs.items():
            model = _estimator(spec, state).fit(X[train], y[train])
            aurocs[name] = auroc(y[test], model.decision_function(X[test]))
            scores_train, scores_test = model.transform(X[train]), model.transform(X[test])
            for link, planted in LINK_READOUTS.items():
                readout = _estimator(BSVM_PLANTED[planted], state).fit(scores_train, y[train])
                decision = readout.decision_function(scores_test)
                aurocs[readout_name(name, link)] = auroc(y[test], decision)
        rows += [("a_bsvm_link_attr", "default", cohort, name, "auroc", split, value)
                 for name, value in aurocs.items()]  # fmt: skip
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)
