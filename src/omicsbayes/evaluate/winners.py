"""Which model won each experiment, by how much, and whether it is ahead of the runner-up.

The report's summary page (``results/winners.tsv``) is built from the per-split metric tables of
the experiments (``results/{experiment}/metrics.tsv``). Each experiment is judged on one metric,
the one its paper reports, which its experiment kind names (``primary_metric``): AUROC for binary
and one-vs-rest tasks (paper 000's Tables 2-5, paper 001's Figure 3), accuracy for multiclass tasks
(paper 003's Tables 2-4), the held-out log likelihood per entry (paper 002's Table 1), R@k at the
largest k (paper 004's Tables 1-2), RMSE for ratings (paper 004's Table 3). Every model and
transform of the experiment saw the same splits, so the margin of the winner over the runner-up
gets the standard error of the paired per-split differences. The winner is *ahead* when its margin
exceeds :data:`AHEAD_SE` (two) such standard errors, the rule the report's captions and the docs
use too.
"""

import numpy as np
import pandas as pd

AHEAD_SE = 2
"""A margin counts as ahead when it exceeds this many standard errors of the paired differences."""

COLUMNS = [
    "paper",
    "experiment",
    "metric",
    "winner",
    "winner_mean",
    "runner_up",
    "runner_up_mean",
    "margin",
    "margin_se",
    "n_splits",
    "ahead",
    "statement",
]


def primary_metric(experiment):
    """The metric an experiment is judged on and whether higher is better (its experiment
    kind's ``primary_metric``, :mod:`omicsbayes.protocols`).

    Parameters
    ----------
    experiment : dict
        The experiment's config entry (keys ``kind``, ``task``).

    Returns
    -------
    (str, bool)
    """
    from .. import protocols

    return protocols.get(protocols.kind_of(experiment)).primary_metric(experiment)


def per_split_scores(metrics, metric):
    """One value per candidate (model, or ``model (transform)`` when there are several
    transforms) and split: ``metric`` averaged over tasks, at the largest ``k`` where the table
    has one. Returns a splits x candidates frame and the model of each candidate."""
    table = metrics
    if "k" in table:
        table = table[table["k"] == table["k"].max()]
    several = table["transform"].nunique() > 1
    candidate = table["model"] + (" (" + table["transform"] + ")" if several else "")
    table = table.assign(candidate=candidate)
    scores = table.pivot_table(
        index="split", columns="candidate", values=metric, aggfunc="mean", sort=False
    )
    return scores, dict(zip(table["candidate"], table["model"]))


def _number(x):
    """``x`` with three decimals, or one significant digit where three decimals would read 0."""
    return f"{x:.3f}" if abs(x) >= 5e-4 else f"{x:.1g}"


def is_ahead(margin, se):
    """Whether a paired margin is ahead: larger than :data:`AHEAD_SE` standard errors ``se``
    (never with a NaN ``se``, i.e. fewer than two splits)."""
    return bool(margin > AHEAD_SE * se)


def _statement(winner, runner_up, metric, winner_mean, runner_up_mean, diff, se):
    """One sentence on the winner against the runner-up from the paired per-split differences
    ``diff`` and their standard error ``se``: a zero mean difference is a tie, a margin of at
    most :data:`AHEAD_SE` standard errors (or on one split) is not clearly ahead."""
    n, margin = len(diff), diff.mean()
    if abs(margin) <= 1e-12:
        how = "identical on every split" if np.all(np.abs(diff) <= 1e-12) else f"se {_number(se)}"
        return f"{winner} tied with {runner_up} at {_number(winner_mean)} {metric} ({how}, n = {n})"
    means = f"{_number(winner_mean)} against {_number(runner_up_mean)}"
    if not is_ahead(margin, se):
        how = (
            f"on one split, no standard error ({means})"
            if n == 1
            else f"within {AHEAD_SE} standard errors ({means}; se {_number(se)}, {n} splits)"
        )
        return f"{winner} not clearly ahead of {runner_up}: {_number(margin)} {metric} {how}"
    if se <= 1e-12:
        how = f"the same margin on all {n} splits"
    else:
        how = f"{margin / se:.1f} se over {n} splits"
    return f"{winner} ahead of {runner_up} by {_number(margin)} {metric} ({means}; {how})"


def experiment_winner(metrics, experiment):
    """The winner of one experiment against its runner-up.

    Parameters
    ----------
    metrics : pandas.DataFrame
        The experiment's per-split metric table (columns ``transform``, ``model``, ``split``,
        optionally ``task`` or ``k``, and the metric columns).
    experiment : dict
        Its config entry.

    Returns
    -------
    dict
        The :data:`COLUMNS` except ``paper`` and ``experiment``. The runner-up is the best
        candidate of another model (the same model on another transform is no rival: a rank
        model gives the same numbers on every monotone transform). ``margin`` is how far the
        winner's mean is ahead (positive whichever direction is better), ``margin_se`` the
        standard error of the paired per-split differences (splits where either is NaN left
        out; NaN with fewer than two splits), ``ahead`` whether ``margin`` exceeds
        :data:`AHEAD_SE` times ``margin_se`` (:func:`is_ahead`).
    """
    metric, higher = primary_metric(experiment)
    scores, model_of = per_split_scores(metrics, metric)
    means = scores.mean().sort_values(ascending=not higher, kind="stable")
    if means.empty:  # e.g. every test split held one class: AUROC undefined throughout
        row = {**dict.fromkeys(COLUMNS[3:], np.nan), "metric": metric, "n_splits": 0}
        return {**row, "ahead": False, "statement": f"no {metric} values"}
    winner = means.index[0]
    rivals = means[[model_of[c] != model_of[winner] for c in means.index]]
    row = {"metric": metric, "winner": winner, "winner_mean": means.iloc[0]}
    row.update(runner_up=np.nan, runner_up_mean=np.nan, margin=np.nan, margin_se=np.nan)
    row.update(n_splits=int(scores[winner].notna().sum()), ahead=False)
    if rivals.empty:
        return {**row, "statement": f"{winner}: {metric} {means.iloc[0]:.3f} (no rival)"}
    runner_up = rivals.index[0]
    diff = (scores[winner] - scores[runner_up]).dropna() * (1 if higher else -1)
    se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.nan
    row.update(runner_up=runner_up, runner_up_mean=rivals.iloc[0], margin=diff.mean())
    row.update(margin_se=se, n_splits=len(diff), ahead=is_ahead(diff.mean(), se))
    row["statement"] = _statement(
        winner, runner_up, metric, means.iloc[0], rivals.iloc[0], diff, se
    )
    return row


def winners(metric_tables, experiments):
    """One row per experiment: its paper, winner, runner-up and margin (:data:`COLUMNS`).

    Parameters
    ----------
    metric_tables : dict
        Experiment name -> its per-split metric table.
    experiments : dict
        Experiment name -> config entry; the optional ``paper`` key names the paper whose claim
        the experiment measures (empty when absent).

    Returns
    -------
    pandas.DataFrame
        Sorted by paper, then experiment.
    """
    rows = [
        {
            "paper": str(experiments[name].get("paper", "")),
            "experiment": name,
            **experiment_winner(table, experiments[name]),
        }
        for name, table in metric_tables.items()
    ]
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["paper", "experiment"], kind="stable")
