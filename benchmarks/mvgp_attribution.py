"""Why Trace GP trails MV-GP on known diseases (claim ``e_mvgp``): the model, its selection of
``lam`` and ``sigma2``, or its rank cap, tested by fitting the whole family of its fits.

Trace GP's objective, equation (11) without the Frobenius term, ``sum (y - psi)^2 / (2 sigma2) +
lam ||B||_*``, has the minimiser of ``sum (y - psi)^2 / 2 + lam sigma2 ||B||_*``: one free
quantity, ``t = lam * sigma2``. :func:`path_rows` fits Trace GP at ``sigma2 = 1`` and ``lam = t``
over :data:`PATH` on claim ``e_mvgp``'s folds, on the first negative set and with the fit seed of
the claim's Trace GP rows (Con. MV-GP's, as the claim draws them), and keeps the fit whose
held-out R@20 is highest (model :data:`BEST`: an oracle choice, made on the test associations
themselves), once at the estimator's rank cap and once at a cap no fit of the path reaches (the
two models of :data:`CAPS`). MV-GP is refitted as the claim fits it (its rows are the claim's
own). If the oracle at the raised cap stays behind MV-GP, the shortfall is neither the inner
validation's choice of ``t`` nor the rank cap (reported: the best fit's rank and whether it
stopped at the cap) but the model's, the nuclear norm without the Hilbert-norm term.

Run ``e_mvgp_new_trace_attr`` does the same on claim ``e_mvgp_new``'s folds over the diseases
and fit seeds (new diseases, scored through the disease kernel alone), at the raised cap only.

Run ``OMP_NUM_THREADS=1 python -m benchmarks.fidelity --only e_mvgp_trace_attr`` (or
``e_mvgp_new_trace_attr``; ``--cohorts``, ``--folds``).
"""

import numpy as np
import pandas as pd

from omicsbayes._seed import derive_seed

# claim -> the run that reuses its folds, negative sets and fit seeds
RUNS = {"e_mvgp": "e_mvgp_trace_attr", "e_mvgp_new": "e_mvgp_new_trace_attr"}
BEST = "TraceGP-D best t"
# t = lam * sigma2; above 10 the fits are near rank 0, and as t falls their rank grows (into the
# hundreds below 0.03), so the path starts at 0.03 and goes lower only where it must (FLOOR)
PATH = np.logspace(-1.5, 1, 6)
FLOOR = 1e-2  # the path is extended down to this t while its best fit is at its lowest t
# the path's best fit at TraceGP's default rank cap, and at a cap that it does not reach
CAPS = {BEST: 50, f"{BEST}, rank cap 400": 400}
NEW_CAPS = dict(list(CAPS.items())[1:])  # new diseases: the raised cap only
# descriptive metrics of the best fit: log10 t, its fitted rank, 1 when it stopped at the cap
METRICS = ("log10_t", "fitted_rank", "at_rank_cap")


def trace_gp_path(
    adata, table, protocol_type, kernel, fit_seed, path=PATH, max_rank=50, floor=FLOOR
):
    """One row per ``t``: ``t``, held-out ``recall@20`` and ``precision@20``, fitted ``rank``
    and ``converged`` (False: stopped at ``max_rank``), of Trace GP fitted at ``lam = t,
    sigma2 = 1`` on fold ``table`` of ``protocol_type``, on the first negative set that
    :func:`~omicsbayes.protocols.disease_gene.running_averaged_scores` draws with
    ``random_state=fit_seed`` and with the fit seed it draws next. The ``t`` are ``path``
    (increasing, log-spaced) and, while the highest R@20 is at the lowest ``t``, that ``t``
    divided by the path's ratio, down to ``floor``."""
    from omicsbayes.evaluate.ranking import ranking_curves
    from omicsbayes.evaluate.splitters import sample_negatives
    from omicsbayes.models.mvgp import TraceGP
    from omicsbayes.protocols.entries import fold_of, matrix_entries

    rows, cols, _ = matrix_entries(adata.X)
    fold = fold_of(protocol_type, table, rows)
    train = (rows[~fold.is_test], cols[~fold.is_test])
    test = (rows[fold.is_test], cols[fold.is_test])
    rng = np.random.default_rng(fit_seed)  # drawn in running_averaged_scores' order
    sets = sample_negatives(
        *train, adata.shape, 1, random_state=int(rng.integers(2**31)), exclude_rows=fold.new_rows
    )
    (neg_rows, neg_cols), model_seed = sets[0], int(rng.integers(2**31))
    fit_rows, fit_cols = np.concatenate([train[0], neg_rows]), np.concatenate([train[1], neg_cols])
    values = np.concatenate([np.ones(train[0].size), np.zeros(neg_rows.size)])
    records = []

    def fit(t):
        model = TraceGP(
            lam=float(t), sigma2=1.0, max_rank=max_rank, random_state=model_seed, verbose=False
        )
        model.fit(fit_rows, fit_cols, values, adata.shape, row_kernel=kernel)
        scores = model.predict_rows(fold.score_rows)
        scored = dict(zip(fold.score_rows.tolist(), scores))
        curves = ranking_curves(scored, test, train, ks=list(range(1, 21)))
        records.append(
            {
                "t": float(t),
                "recall@20": float(curves["recall"].iloc[-1]),
                "precision@20": float(curves["precision"].iloc[-1]),
                "rank": int(model.rank_),
                "converged": bool(model.converged_),
            }
        )

    for t in path:
        fit(t)
    ratio = path[1] / path[0] if len(path) > 1 else 10.0
    while True:
        fits = pd.DataFrame(records).sort_values("t", ignore_index=True)
        lowest = fits["t"].iloc[0]
        if fits["recall@20"].idxmax() != 0 or lowest / ratio < floor * (1 - 1e-9):
            return fits
        fit(lowest / ratio)


def path_rows(settings, seed, path=PATH, caps=CAPS, claim="e_mvgp"):
    """Per-split rows (``SPLIT_COLUMNS`` of :mod:`benchmarks.fidelity`) of run ``RUNS[claim]``,
    protocol ``default``: R@20 and P@20 of MV-GP as claim ``claim`` fits it and, for each model
    and rank cap of ``caps``, of the path's fit with the highest held-out R@20 (its P@20 at the
    same ``t``), with that fit's :data:`METRICS`. Folds and fit seeds are the claim's: of
    ``e_mvgp`` ``derive_seed(seed, "e_mvgp", *tags, "ConMVGP-D", fold)`` (the samples of both
    models), of ``e_mvgp_new`` ``derive_seed(seed, "e_mvgp_new", *tags, fold)``."""
    from benchmarks import fidelity
    from omicsbayes.protocols.disease_gene import ranking_fold_curves
    from omicsbayes.protocols.entries import matrix_entries

    run = RUNS[claim]
    protocol_type, _ = fidelity.DISEASE_GENE_RUNS[claim]
    spec = fidelity.MODELS[claim]["default"]["MVGP-D"]
    rows = []
    for key, cohort, adata, tags, kernel in fidelity.disease_gene_cohorts(settings, claim):
        entry_rows, entry_cols, _ = matrix_entries(adata.X)
        split_seed = derive_seed(seed, claim, *tags)
        if protocol_type == "new_rows":
            splits = fidelity.row_kfold_splits(adata.n_obs, 5, random_state=split_seed)
        else:
            splits = fidelity.entry_kfold_splits(entry_rows, entry_cols, 5, random_state=split_seed)
        for split in fidelity._folds(settings, sorted(splits["split"].unique()), run):
            table = splits[splits["split"] == split]
            if protocol_type == "new_rows":
                fit_seed = derive_seed(seed, claim, *tags, split)
            else:
                fit_seed = derive_seed(seed, claim, *tags, fidelity._SAMPLES_OF["MVGP-D"], split)
            curves = ranking_fold_curves(
                adata.X,
                table,
                protocol_type,
                spec,
                row_kernel=kernel,
                n_negative_sets=(1,),
                random_state=fit_seed,
            )
            part = [("MVGP-D", m, v) for m, v in fidelity._at_20(curves[1]).items()]
            for name, cap in caps.items():
                fits = trace_gp_path(adata, table, protocol_type, kernel, fit_seed, path, cap)
                best = fits.loc[fits["recall@20"].idxmax()]
                part += [(name, m, float(best[m])) for m in ("recall@20", "precision@20")]
                part += [
                    (name, "log10_t", float(np.log10(best["t"]))),
                    (name, "fitted_rank", float(best["rank"])),
                    (name, "at_rank_cap", float(not best["converged"])),
                ]
                print(f"  {run} {key} fold {split} {name}:\n{fits}", flush=True)
            rows += [(cohort, name, split, m, v) for name, m, v in part]
    frame = pd.DataFrame(rows, columns=["cohort", "model", "split", "metric", "value"])
    frame = frame.assign(claim=run, protocol="default")
    return frame[fidelity.SPLIT_COLUMNS]


def new_path_rows(settings, seed):
    """:func:`path_rows` of claim ``e_mvgp_new`` (run ``e_mvgp_new_trace_attr``) at
    :data:`NEW_CAPS`."""
    return path_rows(settings, seed, caps=NEW_CAPS, claim="e_mvgp_new")
