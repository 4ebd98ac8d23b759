"""Ranking metrics of paper 004, section 5.1: precision and recall at k per row (disease).

For each row the columns (genes) are ranked by decreasing score after removing every column that
is a training positive of that row; ``G_m`` is the number of test positives of row m that are not
training positives. ``P@k = hits(k) / k`` and ``R@k = hits(k) / G_m``, averaged over the rows
with ``G_m > 0``; rows with no test positive are excluded and counted. Ties in score are broken
by column index (the lower index ranks first), so results are deterministic.
"""

import numpy as np
import pandas as pd
import scipy.sparse as sp


def _top_hits(scores, relevant, exclude, kmax):
    """Boolean (n_rows, kmax): whether the column at rank j of each row is relevant."""
    s = np.array(scores, dtype=float)
    if exclude is not None:
        s[exclude.nonzero()] = -np.inf
    s[np.isnan(s)] = -np.inf
    order = np.argsort(-s, axis=1, kind="stable")[:, :kmax]
    rel = relevant.toarray().astype(bool)
    hits = np.take_along_axis(rel, order, axis=1)
    ranked = np.take_along_axis(s, order, axis=1) > -np.inf
    out = np.zeros((s.shape[0], kmax), dtype=bool)  # k beyond the list length: no more hits
    out[:, : order.shape[1]] = hits & ranked
    return out


def _as_index_set(pairs, shape, name):
    """A boolean sparse (n_rows, n_cols) matrix from (rows, cols) pairs or a row -> cols mapping."""
    if isinstance(pairs, dict):
        rows = np.concatenate([np.full(len(v), k) for k, v in pairs.items()] or [[]])
        cols = np.concatenate([np.asarray(list(v)) for v in pairs.values()] or [[]])
        rows, cols = rows.astype(np.int64), cols.astype(np.int64)
    else:
        if len(pairs) != 2:
            raise ValueError(f"{name} must be a (rows, cols) pair of arrays or a dict row -> cols")
        rows, cols = (np.asarray(a, dtype=np.int64) for a in pairs)
        if rows.shape != cols.shape:
            raise ValueError(f"{name}: rows and cols differ in length")
    if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
        raise ValueError(f"{name} has row indices outside [0, {shape[0]})")
    if cols.size and (cols.min() < 0 or cols.max() >= shape[1]):
        raise ValueError(f"{name} has column indices outside [0, {shape[1]})")
    m = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=shape)
    m.data[:] = 1.0
    return m


def _as_matrix(scores_by_row):
    if isinstance(scores_by_row, dict):
        keys = np.asarray(sorted(scores_by_row), dtype=np.int64)
        return keys, np.vstack([np.asarray(scores_by_row[k], dtype=float) for k in keys])
    s = np.asarray(scores_by_row, dtype=float)
    if s.ndim != 2:
        raise ValueError(f"scores_by_row must be 2-D (rows x columns); got shape {s.shape}")
    return np.arange(s.shape[0]), s


def _per_row(scores, relevant, exclude, k):
    rel = relevant.multiply(relevant - exclude > 0) if exclude is not None else relevant
    G = np.asarray(rel.sum(axis=1)).ravel()
    hits = _top_hits(scores, rel, exclude, k).sum(axis=1)
    return hits, G


def precision_at_k(scores, relevant, k, exclude=None):
    """P@k of one row: relevant columns among the top k after removing ``exclude``.

    Parameters
    ----------
    scores : array_like, shape (n_cols,)
    relevant, exclude : array_like of int
        Column indices of the test positives and of the training positives.
    k : int
    """
    hits, _ = _one_row(scores, relevant, exclude, k)
    return hits / k


def recall_at_k(scores, relevant, k, exclude=None):
    """R@k of one row: the fraction of its test positives (not in ``exclude``) in the top k.

    Returns NaN when the row has no test positive left.
    """
    hits, G = _one_row(scores, relevant, exclude, k)
    return hits / G if G else np.nan


def _one_row(scores, relevant, exclude, k):
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    s = np.asarray(scores, dtype=float)[None, :]
    shape = s.shape
    rel = _as_index_set((np.zeros(len(relevant)), relevant), shape, "relevant")
    exc = None
    if exclude is not None:
        exc = _as_index_set((np.zeros(len(exclude)), exclude), shape, "exclude")
    hits, G = _per_row(s, rel, exc, int(k))
    return int(hits[0]), int(G[0])


def ranking_curves(scores_by_row, test_positives, train_positives, ks=range(1, 21), chunk=2048):
    """P@k and R@k for k in ``ks``, per row then averaged over rows (paper 004, Figure 3).

    Parameters
    ----------
    scores_by_row : ndarray (n_rows, n_cols) or dict row -> 1-D array of column scores
        A 2-D array's row i is row id i; a dict scores only its keys.
    test_positives, train_positives : (rows, cols) arrays or dict row -> iterable of columns
        Held-out positives and every training positive (removed from each row's ranking).
    ks : iterable of int
    chunk : int
        Rows ranked at a time (bounds memory).

    Returns
    -------
    pandas.DataFrame
        Columns ``k``, ``precision``, ``recall`` (means over the rows with a test positive),
        ``n_rows`` (rows averaged over) and ``n_excluded`` (scored rows without a test positive).
    """
    ks = np.asarray(list(ks), dtype=np.int64)
    if ks.size == 0 or ks.min() < 1:
        raise ValueError("ks must be a non-empty list of positive integers")
    row_ids, S = _as_matrix(scores_by_row)
    n_all = int(row_ids.max()) + 1 if row_ids.size else 0
    test = _as_index_set_any(test_positives, S.shape[1], "test_positives")
    train = _as_index_set_any(train_positives, S.shape[1], "train_positives")
    n_all = max(n_all, test.shape[0], train.shape[0])
    test = _pad(test, n_all)[row_ids]
    train = _pad(train, n_all)[row_ids]
    kmax = int(ks.max())
    hits_all, G_all = [], []
    for start in range(0, S.shape[0], chunk):
        sl = slice(start, start + chunk)
        rel = test[sl].multiply(test[sl] - train[sl] > 0).tocsr()
        G = np.asarray(rel.sum(axis=1)).ravel()
        hits_all.append(np.cumsum(_top_hits(S[sl], rel, train[sl], kmax), axis=1))
        G_all.append(G)
    cum = np.vstack(hits_all) if hits_all else np.zeros((0, kmax))
    G = np.concatenate(G_all) if G_all else np.zeros(0)
    use = G > 0
    at_k = cum[use][:, ks - 1]
    n_rows = int(use.sum())
    precision = at_k.mean(axis=0) / ks if n_rows else np.full(ks.size, np.nan)
    recall = (at_k / G[use][:, None]).mean(axis=0) if n_rows else np.full(ks.size, np.nan)
    return pd.DataFrame(
        {
            "k": ks,
            "precision": precision,
            "recall": recall,
            "n_rows": n_rows,
            "n_excluded": int((~use).sum()),
        }
    )


def _as_index_set_any(pairs, n_cols, name):
    if isinstance(pairs, dict):
        n_rows = max(pairs, default=-1) + 1
    else:
        n_rows = int(np.max(pairs[0], initial=-1)) + 1
    return _as_index_set(pairs, (n_rows, n_cols), name)


def _pad(m, n_rows):
    if m.shape[0] == n_rows:
        return m.tocsr()
    return sp.vstack([m, sp.csr_matrix((n_rows - m.shape[0], m.shape[1]))]).tocsr()
