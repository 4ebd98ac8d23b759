"""Compiled (numba) kernels of the RFLVM sampler: the sequential collapsed row sweep of the
Gaussian likelihood (see :meth:`omicsbayes.models.rflvm._chain._Chain._collapsed_sweep`)."""

import numpy as np
from numba import njit


@njit(cache=True)
def _row_features(g, phi, M):
    """phi = [cos g, sin g] / sqrt(M) in place."""
    sq = 1.0 / np.sqrt(M)
    for m in range(M):
        phi[m] = np.cos(g[m]) * sq
        phi[M + m] = np.sin(g[m]) * sq


@njit(cache=True)
def _collapsed_row_sweep(
    X, Z, W, Yf, Phi, Ainv, B, yy, pi, cand, gumb, unif, order, a0, b0, update_z
):
    """Sequential (numba) sweep over the rows with beta and sigma^2 integrated out; see
    :meth:`_Chain._collapsed_sweep`. Row i's leave-one-out NIG posterior (``Ainv`` =
    (Phi^T Phi + I / c)^-1, ``B`` = Phi^T Yf, ``yy`` and ``Phi`` of all rows) is formed by a
    rank-one downdate and row i is put back with its new features by an update. The entries of
    row i are visited in the order ``order[i]``; each (z_ik, x_ik) (``update_z``) or each active
    x_ik is drawn over the ensemble {X[i, k], cand[:, i, k]}; ``gumb`` (Gumbel) and ``unif``
    are the random numbers of the choices. ``pi`` are the stick weights (``update_z`` only).
    Updates X, Z, Phi, Ainv and B in place."""
    N, D = X.shape
    M = W.shape[0]
    J = Yf.shape[1]
    K = cand.shape[0] + 1
    a_n = a0 + 0.5 * (N - 1)
    phi = np.empty(2 * M)
    g = np.empty(M)
    ll = np.empty(K)
    counts = np.zeros(D, np.int64)
    for i in range(N):
        for k in range(D):
            if Z[i, k]:
                counts[k] += 1
    for i in range(N):
        y = Yf[i]
        u = Ainv @ Phi[i]
        A1 = Ainv + np.outer(u, u) / (1.0 - Phi[i] @ u)
        B1 = B - np.outer(Phi[i], y)
        m = A1 @ B1
        bn = b0 + 0.5 * np.maximum(yy - y * y - np.sum(B1 * m, axis=0), 0.0)
        for kk in range(D):
            k = order[i, kk]
            if update_z or Z[i, k]:
                for mm in range(M):  # w_m' (x_i z_i) without dimension k
                    t = 0.0
                    for q in range(D):
                        if Z[i, q] and q != k:
                            t += W[mm, q] * X[i, q]
                    g[mm] = t
                # log predictive t_{2 a_n}(y_i; phi' m, (b_n / a_n)(1 + phi' A1 phi)) up to a
                # constant: c = 0 is z_ik = 0, c = 1.. the ensemble members with z_ik = 1
                ll_off = 0.0
                for c in range(K + 1 if update_z else K):
                    cc = c - 1 if update_z else c
                    if cc < 0:
                        _row_features(g, phi, M)
                    else:
                        xc = X[i, k] if cc == 0 else cand[cc - 1, i, k]
                        _row_features(g + W[:, k] * xc, phi, M)
                    v = 1.0 + phi @ (A1 @ phi)
                    mean = phi @ m
                    tot = 0.0
                    for j in range(J):
                        r = y[j] - mean[j]
                        tot += np.log1p(r * r / (2.0 * bn[j] * v))
                    val = -0.5 * J * np.log(v) - (a_n + 0.5) * tot
                    if cc < 0:
                        ll_off = val
                    else:
                        ll[cc] = val
            z_new = Z[i, k]
            if update_z:
                # eq. (17): prior pi_k^z (1 - pi_k)^(1 - z), the ensemble mean of the predictive
                # for z = 1, and the slice factor 1 / pi*(Z), which differs between z = 0 and
                # z = 1 only when z_ik is the only 1 of its column
                mx = ll.max()
                w_on = np.log(pi[k]) + mx + np.log(np.mean(np.exp(ll - mx)))
                w_off = np.log1p(-pi[k]) + ll_off
                if counts[k] == (1 if Z[i, k] else 0):
                    rest = 1.0
                    for q in range(D):
                        if q != k and counts[q] > 0 and pi[q] < rest:
                            rest = pi[q]
                    w_off -= np.log(rest)
                    w_on -= np.log(min(rest, pi[k]))
                z_new = unif[i, k] < 1.0 / (1.0 + np.exp(w_off - w_on))
            best, top = 0, -np.inf
            for c in range(K):  # proportional to the predictive if z_ik = 1, else uniform
                val = gumb[i, k, c] + (ll[c] if z_new else 0.0)
                if val > top:
                    best, top = c, val
            if best > 0:
                X[i, k] = cand[best - 1, i, k]
            if z_new != Z[i, k]:
                counts[k] += 1 if z_new else -1
                Z[i, k] = z_new
        for mm in range(M):
            t = 0.0
            for q in range(D):
                if Z[i, q]:
                    t += W[mm, q] * X[i, q]
            g[mm] = t
        _row_features(g, phi, M)
        Phi[i] = phi
        u = A1 @ phi
        Ainv[:, :] = A1 - np.outer(u, u) / (1.0 + phi @ u)
        B[:, :] = B1 + np.outer(phi, y)
