"""Compiled (numba) kernels of the RFLVM sampler: the random Fourier feature map (vectorised
sin and cos) and the chain rule from d/dPhi to X and W (one pass each), and the sequential
collapsed row sweep of the Gaussian likelihood (see
:meth:`omicsbayes.models.rflvm._likelihoods.Gaussian.collapsed_sweep`)."""

import math

import numpy as np
from numba import njit

# sin and cos by Cody-Waite reduction modulo pi / 2 (pi / 2 split in three 33-bit parts, so
# k * part is exact for |k| < 2^20) and fdlibm's minimax polynomials on [-pi / 4, pi / 4]
# (__kernel_sin, __kernel_cos): at most 1.2e-16 from libm's, and a loop of them vectorises
# (libm's sin and cos are scalar calls); beyond |x| = _SINCOS_LIMIT libm's are used
_PIO2_1 = 1.57079632673412561417e00
_PIO2_2 = 6.07710050630396597660e-11
_PIO2_3 = 2.02226624871116645580e-21
_TWO_OVER_PI = 6.36619772367581382433e-01
_SINCOS_LIMIT = 1.0e6
_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10
_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11


@njit(inline="always")
def _sincos(x):
    """(sin x, cos x) for |x| <= _SINCOS_LIMIT, branch-free (see the constants above)."""
    k = math.floor(x * _TWO_OVER_PI + 0.5)
    r = ((x - k * _PIO2_1) - k * _PIO2_2) - k * _PIO2_3
    z = r * r
    s = r + r * z * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
    hz = 0.5 * z
    w = 1.0 - hz
    poly = _C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6))))
    c = w + (((1.0 - w) - hz) + z * z * poly)
    q = np.int64(k)
    odd = (q & 1) == 1
    sin = c if odd else s
    cos = s if odd else c
    sin = -sin if q & 2 else sin
    cos = -cos if (q + 1) & 2 else cos
    return sin, cos


@njit(cache=True)
def _sincos_into(x, s, c, scale):
    """s = scale * sin(x), c = scale * cos(x) for 1-d contiguous arrays (vectorised)."""
    for i in range(x.size):
        si, ci = _sincos(x[i])
        s[i] = si * scale
        c[i] = ci * scale
    for i in range(x.size):  # the rare large (or non-finite) arguments: libm
        if not abs(x[i]) <= _SINCOS_LIMIT:
            s[i] = math.sin(x[i]) * scale
            c[i] = math.cos(x[i]) * scale


@njit(cache=True)
def _rff_map(G):
    """[cos G, sin G] / sqrt(M) for G (N, M), both halves from one pass over G."""
    N, M = G.shape
    s = np.empty(N * M)
    c = np.empty(N * M)
    _sincos_into(np.ascontiguousarray(G).ravel(), s, c, 1.0 / math.sqrt(M))
    out = np.empty((N, 2 * M))
    out[:, :M] = c.reshape(N, M)
    out[:, M:] = s.reshape(N, M)
    return out


@njit(cache=True, fastmath={"reassoc", "contract"})
def _gauss_grad_rhs(L, C, yy, a_n, b0, J, rhs):
    """The right-hand side of the Gaussian HMC gradient d/dPhi = [Phi, Y] @ rhs (see
    :meth:`Gaussian.grad_phi`) from the lower Cholesky factor L of A = Phi^T Phi + I / c and
    C = Phi^T Y: A^-1 = L^-T L^-1 (the triangular inverse row by row, then its Gram matrix;
    LAPACK's potri is slow at this size), m = A^-1 C, s_j = a_n / (b0 + q_j / 2) with
    q_j = y_j^T y_j - c_j^T m_j, and rhs = [-(m S m^T + J A^-1); S m^T] written into ``rhs``."""
    p = L.shape[0]
    Li = np.zeros((p, p))
    for i in range(p):  # row i of L^-1: -(L[i, :i] @ Li[:i, :i]) / L[i, i]
        d = 1.0 / L[i, i]
        li = Li[i]
        for k in range(i):
            lik, lk = L[i, k], Li[k]
            for j in range(k + 1):
                li[j] += lik * lk[j]
        for j in range(i):
            li[j] *= -d
        li[i] = d
    Ainv = np.zeros((p, p))
    for k in range(p):  # lower triangle of sum_k Li[k]' Li[k]
        lk = Li[k]
        for a in range(k + 1):
            row, f = Ainv[a], lk[a]
            for b in range(a + 1):
                row[b] += f * lk[b]
    for a in range(p):
        for b in range(a):
            Ainv[b, a] = Ainv[a, b]
    Cc = np.ascontiguousarray(C)
    mean = Ainv @ Cc
    ms = np.empty_like(mean)
    for j in range(mean.shape[1]):
        q = yy[j]
        for a in range(p):
            q -= Cc[a, j] * mean[a, j]
        s = a_n / (b0 + 0.5 * max(q, 0.0))
        for a in range(p):
            ms[a, j] = mean[a, j] * s
    K = ms @ mean.T
    for a in range(p):
        for b in range(p):
            rhs[a, b] = -(K[a, b] + J * Ainv[a, b])
    for j in range(mean.shape[1]):
        for a in range(p):
            rhs[p + j, a] = ms[a, j]


# reassociation only (the sums over m vectorise); NaN and inf propagate as without fastmath
@njit(cache=True, fastmath={"reassoc", "contract"})
def _grad_latent(d_phi, Phi, X, Z, W, mu, chol_inv):
    """Gradient with respect to X and W of f(Phi) + log N(X; 0, I) + sum_m log N(w_m; mu_m,
    Sigma_m) from d_phi = df/dPhi, Phi = [cos G, sin G] / sqrt(M), G = (X * Z) W^T (one pass):
    dG = d_phi[:, M:] * Phi[:, :M] - d_phi[:, :M] * Phi[:, M:], d/dX = (dG W) * Z - X,
    d/dW = dG^T (X * Z) - Sigma_m^-1 (w_m - mu_m), Sigma_m^-1 = chol_inv_m^T chol_inv_m."""
    N, D = X.shape
    M = W.shape[0]
    Wt = np.ascontiguousarray(W.T)
    gwt = np.zeros((D, M))
    gx = np.empty((N, D))
    dg = np.empty(M)
    for i in range(N):
        dp, ph = d_phi[i], Phi[i]
        for m in range(M):
            dg[m] = dp[M + m] * ph[m] - dp[m] * ph[M + m]
        for d in range(D):
            if Z[i, d]:
                w, g = Wt[d], gwt[d]
                t = 0.0
                xd = X[i, d]
                for m in range(M):
                    t += dg[m] * w[m]
                    g[m] += dg[m] * xd
                gx[i, d] = t - X[i, d]
            else:
                gx[i, d] = -X[i, d]
    gw = np.ascontiguousarray(gwt.T)
    for m in range(M):
        white = chol_inv[m] @ (W[m] - mu[m])
        gw[m] -= chol_inv[m].T @ white
    return gx, gw


@njit(cache=True)
def _gauss_rows(psi, Y, obs, sigma2, const, rows):
    """Gaussian log likelihoods of the rows ``rows`` of Y (observed entries) given their
    linear predictors psi (len(rows), J): const_i - sum_j (y_ij - psi_j)^2 / (2 sigma_j^2)."""
    J = psi.shape[1]
    h = 0.5 / sigma2
    out = np.empty(rows.size)
    for r in range(rows.size):
        i = rows[r]
        t = 0.0
        for j in range(J):
            if obs[i, j]:
                e = Y[i, j] - psi[r, j]
                t += e * e * h[j]
        out[r] = const[i] - t
    return out


@njit(cache=True)
def _row_features(g, phi, M):
    """phi = [cos g, sin g] / sqrt(M) in place."""
    _sincos_into(g, phi[M:], phi[:M], 1.0 / np.sqrt(M))


@njit(cache=True)
def _axpy(a, x, y):
    """y += a x (1-d, in place)."""
    for j in range(x.size):
        y[j] += a * x[j]


@njit(cache=True)
def _axpy_prod(x, z, y):
    """y += x * z (1-d, in place)."""
    for j in range(x.size):
        y[j] += x[j] * z[j]


@njit(cache=True)
def _rank2_row(row, u, a, v, b):
    """row += a u + b v (1-d, in place): one row of a symmetric rank-two update."""
    for j in range(row.size):
        row[j] += a * u[j] + b * v[j]


@njit(cache=True)
def _add_outer(X, u, v, out):
    """out = X + u v' (out may be X)."""
    for a in range(X.shape[0]):
        o, x, ua = out[a], X[a], u[a]
        for j in range(v.size):
            o[j] = x[j] + ua * v[j]


@njit(cache=True)
def _collapsed_row_sweep(
    X, Z, W, Yf, Phi, Ainv, B, yy, pi, cand, gumb, unif, order, a0, b0, update_z
):
    """Sequential (numba) sweep over the rows with beta and sigma^2 integrated out; see
    :meth:`Gaussian.collapsed_sweep`. Row i's leave-one-out NIG posterior (``Ainv`` =
    (Phi^T Phi + I / c)^-1, ``B`` = Phi^T Yf, ``yy`` and ``Phi`` of all rows) is formed by a
    rank-one downdate (its mean from the all-rows mean by Sherman-Morrison, O(p^2 + p J)
    rather than O(p^2 J)) and row i is put back with its new features by an update. The entries of
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
    gk = np.empty(M)
    n_cand = K + 1 if update_z else K
    P = np.empty((n_cand, 2 * M))  # features of the candidates of one (i, k), one per row
    ll = np.empty(K)
    counts = np.zeros(D, np.int64)
    for i in range(N):
        for k in range(D):
            if Z[i, k]:
                counts[k] += 1
    m_all = Ainv @ B  # posterior means of all rows, kept up to date by rank-one updates
    m = np.empty_like(m_all)  # those of all rows but row i
    for i in range(N):
        y = Yf[i]
        phi_i = Phi[i].copy()
        # row i left out: A1 = Ainv + u u' / (1 - h) (never formed), B1 = B - phi_i y',
        # m = A1 B1 (Sherman-Morrison), sum(B1 * m) = sum(B * m) - y * (phi_i' m)
        u = Ainv @ phi_i
        h = phi_i @ u
        _add_outer(m_all, u / (1.0 - h), phi_i @ m_all - y, m)
        fit = np.zeros(J)  # sum(B * m, axis=0), row by row
        for a in range(2 * M):
            _axpy_prod(B[a], m[a], fit)
        fit -= y * (phi_i @ m)
        bn = b0 + 0.5 * np.maximum(yy - y * y - fit, 0.0)
        for kk in range(D):
            k = order[i, kk]
            if update_z or Z[i, k]:
                for mm in range(M):  # w_m' (x_i z_i) without dimension k
                    t = 0.0
                    for q in range(D):
                        if Z[i, q] and q != k:
                            t += W[mm, q] * X[i, q]
                    g[mm] = t
                # candidates: with update_z, row 0 is z_ik = 0, then the ensemble members
                # with z_ik = 1 (current x_ik first); all scored by two matrix products
                for c in range(n_cand):
                    cc = c - 1 if update_z else c
                    if cc < 0:
                        _row_features(g, P[c], M)
                    else:
                        xc = X[i, k] if cc == 0 else cand[cc - 1, i, k]
                        for mm in range(M):
                            gk[mm] = g[mm] + W[mm, k] * xc
                        _row_features(gk, P[c], M)
                PA = P @ Ainv
                Pu = P @ u
                means = P @ m
                # log predictive t_{2 a_n}(y_i; phi' m, (b_n / a_n)(1 + phi' A1 phi)) up to a
                # constant
                ll_off = 0.0
                for c in range(n_cand):
                    cc = c - 1 if update_z else c
                    v = 1.0 + PA[c] @ P[c] + Pu[c] * Pu[c] / (1.0 - h)
                    tot = 0.0
                    for j in range(J):
                        r = y[j] - means[c, j]
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
        # put row i back: Ainv = A1 - u2 u2' / (1 + h2) with u2 = A1 phi, B = B1 + phi y'
        u2 = Ainv @ phi + u * ((u @ phi) / (1.0 - h))
        h2 = phi @ u2
        s1, s2 = 1.0 / (1.0 - h), 1.0 / (1.0 + h2)
        for a in range(2 * M):
            _rank2_row(Ainv[a], u, u[a] * s1, u2, -u2[a] * s2)
            _axpy(phi[a] - phi_i[a], y, B[a])
        _add_outer(m, u2 / (1.0 + h2), y - phi @ m, m_all)


@njit(cache=True, nogil=True)  # in map_blocks' threads
def _chol_draw(L, r, eps):
    """x_j = L_j^-T (L_j^-1 r_j + eps_j) for stacked lower Cholesky factors L (J, p, p) and
    rows r, eps (J, p): with eps ~ N(0, I), a draw from N(P_j^-1 r_j, P_j^-1), P_j = L_j L_j^T.
    Forward and back substitution, p^2 each (LAPACK's batched solve factorises L again)."""
    J, p = r.shape
    out = np.empty((J, p))
    u = np.empty(p)
    for j in range(J):
        Lj = L[j]
        for a in range(p):
            t = r[j, a]
            for b in range(a):
                t -= Lj[a, b] * u[b]
            u[a] = t / Lj[a, a]
        for a in range(p):
            u[a] += eps[j, a]
        x = out[j]
        for a in range(p - 1, -1, -1):
            t = u[a]
            for b in range(a + 1, p):
                t -= Lj[b, a] * x[b]
            x[a] = t / Lj[a, a]
    return out


@njit(cache=True)
def _crt_counts(y, r, u, out):
    """out[i] = #{t < y[i] : u_k < r[i] / (r[i] + t)}, the uniforms ``u`` consumed in order
    (entry by entry, t increasing): the CRT(y_i, r_i) tables of :func:`sample_crt`."""
    k = 0
    for i in range(y.size):
        c = 0
        for t in range(y[i]):
            if u[k] < r[i] / (r[i] + t):
                c += 1
            k += 1
        out[i] = c
