"""Compiled (numba) kernels of the rank factor model: the batched Gaussian block of the A, Z and
beta updates, the latent max-margin half-sweep (eq. 7 augmentation) and its draws, the margin
moments of prediction, ranks and the placement of new values among training values."""

import math

import numpy as np
from numba import njit
from numpy.polynomial import chebyshev
from scipy import special

_CHUNK = 32  # matrices per vector step of the batched Gaussian block (working set in cache)


@njit(cache=True, error_model="numpy")
def _gaussian_chunks(S, G, scale, diagonal, rhs, eps, b, second):
    """Batched Gaussian moments, 32 matrices at a time with the batch innermost (vector steps).

    ``S`` (m, k, k, C) symmetric positive definite (lower triangle read) -- or, when S is empty,
    ``scale[r] G + diag(diagonal[:, r])`` (G k x k, ``scale`` (m C,), ``diagonal`` (k, m C),
    padded with 0 and 1 so that the padding matrices are identities; lower triangle) built one
    chunk at a time -- ``rhs`` (m, k, C), ``eps`` (m, k, C) or empty; the first ``b`` of the m C
    matrices are real, the rest padding (identities).
    With ``L L^T = S`` and ``Linv = L^-1``, ``cov = Linv^T Linv`` and ``x = cov rhs``, returns
    ``x`` (b, k), ``cov`` (b, k, k) -- or, with ``second``, the second moment ``E[x x^T] = cov +
    x x^T`` -- ``log det cov`` (b,) and whether every S was positive definite.  With eps, ``x =
    L^-T (L^-1 rhs + eps)`` is a draw, the second matrix ``x x^T`` with ``second`` (else none:
    shape (0, k, k)) and no log determinant (zeros): two triangular solves, without ``Linv``
    and ``cov`` (a third of the work).
    """
    m, k, C = rhs.shape
    draw = eps.shape[0] == m
    out = np.empty((b if second or not draw else 0, k, k))
    x_out = np.empty((b, k))
    logdet_out = np.empty(b)
    Sq = np.empty((k, k, C))
    cov = np.empty((k, k, C))
    mean = np.empty((k, C))
    logdet = np.empty(C)
    L = np.empty((k, k, C))
    Linv = np.zeros((k, k, C))
    acc = np.empty(C)
    for q in range(m):
        if S.shape[0] == m:
            Sq = S[q]
        else:
            _scaled_plus_diagonal(G, scale, diagonal, q * C, Sq)
        logdet[:] = 0.0
        for j in range(k):
            acc[:] = Sq[j, j]
            for p in range(j):
                for c in range(C):
                    acc[c] -= L[j, p, c] * L[j, p, c]
            for c in range(C):
                if not acc[c] > 0.0:
                    return x_out, out, logdet_out, False
                L[j, j, c] = np.sqrt(acc[c])
                Linv[j, j, c] = 1.0 / L[j, j, c]
            if not draw:
                for c in range(C):
                    logdet[c] -= 2.0 * np.log(L[j, j, c])
            for i in range(j + 1, k):
                acc[:] = Sq[i, j]
                for p in range(j):
                    for c in range(C):
                        acc[c] -= L[i, p, c] * L[j, p, c]
                for c in range(C):
                    L[i, j, c] = acc[c] / L[j, j, c]
        if draw:  # mean = L^-1 rhs, then x = L^-T (mean + eps), in place
            for a in range(k):
                acc[:] = rhs[q, a]
                for p in range(a):
                    for c in range(C):
                        acc[c] -= L[a, p, c] * mean[p, c]
                for c in range(C):
                    mean[a, c] = acc[c] * Linv[a, a, c]
            for a in range(k - 1, -1, -1):
                for c in range(C):
                    acc[c] = mean[a, c] + eps[q, a, c]
                for p in range(a + 1, k):
                    for c in range(C):
                        acc[c] -= L[p, a, c] * mean[p, c]
                for c in range(C):
                    mean[a, c] = acc[c] * Linv[a, a, c]
            if second:
                for a in range(k):
                    for bb in range(k):
                        for c in range(C):
                            cov[a, bb, c] = mean[a, c] * mean[bb, c]
            _chunk_out(q, b, C, k, mean, cov, logdet, x_out, out, logdet_out)
            continue
        for j in range(k):
            for i in range(j + 1, k):
                acc[:] = 0.0
                for p in range(j, i):
                    for c in range(C):
                        acc[c] += L[i, p, c] * Linv[p, j, c]
                for c in range(C):
                    Linv[i, j, c] = -acc[c] / L[i, i, c]
        for a in range(k):
            for bb in range(a + 1):
                acc[:] = 0.0
                for p in range(a, k):
                    for c in range(C):
                        acc[c] += Linv[p, a, c] * Linv[p, bb, c]
                cov[a, bb] = acc
                cov[bb, a] = acc
        for a in range(k):
            mean[a] = 0.0
            for bb in range(k):
                for c in range(C):
                    mean[a, c] += cov[a, bb, c] * rhs[q, bb, c]
        if second:
            for a in range(k):
                for bb in range(k):
                    for c in range(C):
                        cov[a, bb, c] += mean[a, c] * mean[bb, c]
        _chunk_out(q, b, C, k, mean, cov, logdet, x_out, out, logdet_out)
    return x_out, out, logdet_out, True


@njit(cache=True, inline="always")
def _chunk_out(q, b, C, k, mean, cov, logdet, x_out, out, logdet_out):
    """The real matrices of chunk q of :func:`_gaussian_chunks`, in (b, ...) layout (``out``
    only when it has rows)."""
    for c in range(min(C, b - q * C)):
        row = q * C + c
        logdet_out[row] = logdet[c]
        for a in range(k):
            x_out[row, a] = mean[a, c]
        if out.shape[0]:
            for a in range(k):
                for bb in range(k):
                    out[row, a, bb] = cov[a, bb, c]


@njit(cache=True, inline="always")
def _scaled_plus_diagonal(G, scale, diagonal, first, Sq):
    """The lower triangles of the precisions ``scale[r] G + diag(diagonal[:, r])`` of rows
    ``first, first + 1, ...`` into ``Sq`` (k, k, C), the layout of :func:`_gaussian_chunks`
    (rows innermost: vector steps)."""
    k, C = G.shape[0], Sq.shape[2]
    for i in range(k):
        for j in range(i + 1):
            g = G[i, j]
            for c in range(C):
                Sq[i, j, c] = scale[first + c] * g
        for c in range(C):
            Sq[i, i, c] += diagonal[i, first + c]


@njit(cache=True)
def _add_outer(acc, a):
    """``acc[i] += a[i] a[i]^T`` for every row i of ``a`` (d, k), in place (acc (d, k, k))."""
    d, k = a.shape
    for i in range(d):
        for p in range(k):
            ap = a[i, p]
            for q in range(k):
                acc[i, p, q] += ap * a[i, q]


def _to_chunks(a, fill):
    """(b, ...) -> (ceil(b / C), ..., C), padding the batch with ``fill``."""
    b = a.shape[0]
    m = -(-b // _CHUNK)
    padded = np.empty((m * _CHUNK,) + a.shape[1:])
    padded[:b] = a
    padded[b:] = fill
    return np.ascontiguousarray(np.moveaxis(padded.reshape((m, _CHUNK) + a.shape[1:]), 1, -1))


def _gaussian_block(precision, rhs, rng=None, second=False):
    """Batched N(prec^-1 rhs, prec^-1) over the leading axes: ``(mean, cov, logdet cov)``, or a
    draw instead of the mean when ``rng`` is given (``mean + L^-T eps``, ``L L^T = prec``).
    With ``second`` the second matrix is ``E[x x^T]``.  A draw returns ``(x, x x^T, None)``
    with ``second``, else ``(x, None, None)`` (a Gibbs sweep needs no log determinant).
    ``precision`` may also be a tuple ``(G, scale, diagonal)`` for ``scale[q] G +
    diag(diagonal[q])`` (leading axes then those of ``diagonal``), which is never formed."""
    if isinstance(precision, tuple):
        G, scale, diagonal = precision
        lead, k = diagonal.shape[:-1], diagonal.shape[-1]
        b = int(np.prod(lead))
        padded = -(-b // _CHUNK) * _CHUNK  # padding rows: 0 G + diag(1)
        scale_p = np.zeros(padded)
        scale_p[:b] = np.broadcast_to(scale, lead).reshape(b)
        diagonal_p = np.ones((k, padded))
        diagonal_p[:, :b] = diagonal.reshape(b, k).T
        parts = (np.empty((0, 0, 0, 0)), np.ascontiguousarray(G, dtype=float), scale_p, diagonal_p)
    else:
        lead, k = precision.shape[:-2], precision.shape[-1]
        b = int(np.prod(lead))
        chunks = _to_chunks(precision.reshape(b, k, k), np.eye(k))
        parts = (chunks, np.empty((0, 0)), np.empty(0), np.empty((0, 0)))
    eps = np.empty((0, 0, 0))
    if rng is not None:
        eps = _to_chunks(rng.standard_normal(rhs.shape).reshape(b, k), 0.0)
    mean, cov, logdet, ok = _gaussian_chunks(
        *parts, _to_chunks(rhs.reshape(b, k), 0.0), eps, b, second
    )
    if not ok:
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    if rng is not None:
        return mean.reshape(*lead, k), cov.reshape(*lead, k, k) if second else None, None
    return mean.reshape(*lead, k), cov.reshape(*lead, k, k), logdet.reshape(lead)


def _mills_table(width=0.125, top=16.0, degree=8):
    """Coefficients of :func:`_mills_ratio` on ``[0, top)``: per interval of ``width``, the
    polynomial in ``x - centre`` that interpolates scipy's ``erfcx`` at Chebyshev points
    (relative error below 5e-15, tested)."""
    half = 0.5 * width
    nodes = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))
    table = np.empty((int(round(top / width)), degree + 1))
    for i in range(len(table)):
        x = (i + 0.5) * width + half * nodes
        fit = chebyshev.chebfit(nodes, _SQRT_HALF_PI * special.erfcx(x / np.sqrt(2.0)), degree)
        table[i] = chebyshev.cheb2poly(fit) / half ** np.arange(degree + 1)
    return table


_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)
_SQRT_HALF_PI = np.sqrt(0.5 * np.pi)
_MILLS = _mills_table()
_MILLS_STEP = 8.0  # intervals per unit of x
_MILLS_TOP = len(_MILLS) / _MILLS_STEP
# asymptotic series above _MILLS_TOP: R(x) = sum_k (-1)^k (2k - 1)!! / x^(2k + 1)
_MILLS_SERIES = np.cumprod([1.0] + [-(2.0 * k - 1.0) for k in range(1, 11)])


@njit(cache=True, inline="always")
def _mills_ratio(x):
    """Mills ratio ``R(x) = Phi(-x) / phi(x)`` for ``x >= 0`` (0 at +inf): a table of
    polynomials of degree 8 below 16, the asymptotic series (11 terms, relative error below
    1e-16) above; no exp or erfc."""
    if x < _MILLS_TOP:
        i = int(x * _MILLS_STEP)
        u = x - (i + 0.5) / _MILLS_STEP
        c = _MILLS[i]
        out = c[8]
        for k in range(7, -1, -1):
            out = out * u + c[k]
        return out
    v = 1.0 / (x * x)
    out = _MILLS_SERIES[10]
    for k in range(9, -1, -1):
        out = out * v + _MILLS_SERIES[k]
    return out / x


@njit(cache=True, error_model="numpy", nogil=True)  # on the worker threads (map_blocks)
def _margin_moments(mu, lower, upper, rows, eps, mean, var):
    """Mean and variance of :func:`margin_conditional_moments`' density, elementwise into
    ``mean`` and ``var`` (2-D arrays), for means ``mu[r]`` and neighbours ``lower[rows[r]]``,
    ``upper[rows[r]]``; returns the sum of its log normaliser over each row.

    In ``t = w - mu`` the density is ``phi(t) exp(-2 max(0, al - t) - 2 max(0, t - be))``,
    ``al = w^l + eps - mu``, ``be = w^u - eps - mu`` (eq. 6 and 7): with ``a = min(al, be)``,
    ``b = max(al, be)`` and ``pen = -2 max(0, al - be)`` it is ``e^pen`` times ``e^{2 - 2a}
    phi(t - 2)`` below a, ``phi(t)`` between, ``e^{2 + 2b} phi(t + 2)`` above b, with masses
    ``P1 = phi(a) R(2 - a)``, ``P2 = Phi(b) - Phi(a)``, ``P3 = phi(b) R(b + 2)`` (R the Mills
    ratio, :func:`_mills_ratio`), first moment ``2 P1 - 2 P3`` and second moment ``5 P1 + P2 +
    5 P3 - 2 phi(a) - 2 phi(b)``.  Reflecting ``t -> -t`` (``(a, b) -> (-b, -a)``) makes ``a +
    b >= 0``, so every R is taken at a non-negative argument; for ``a > 2`` (w far below both
    margins) the masses are scaled by ``e^{2a - 2}``, with ``P1 = Phi(a - 2)``.  Their sum is
    then in [0.08, 1], so a row's log normaliser takes one log per 64 entries.  Per entry two
    exp and four Mills ratios (one exp and two ratios with one neighbour).
    """
    n_rows, n_cols = mu.shape
    log_z = np.zeros(n_rows)
    for row in range(n_rows):
        total_log_z = 0.0
        product = 1.0  # of the masses' sums, each in [0.08, 1]: one log per 64 entries
        for col in range(n_cols):
            m = mu[row, col]
            al = lower[rows[row], col] + eps - m
            be = upper[rows[row], col] - eps - m
            a, b = min(al, be), max(al, be)
            pen = -2.0 * (al - be) if al > be else 0.0
            sign = 1.0
            if a + b < 0.0:  # reflect: t -> -t
                a, b, sign = -b, -a, -1.0
            if a > 2.0:  # the masses relative to e^{2 - 2a}
                scale = 2.0 - 2.0 * a
                pa = _INV_SQRT_2PI * np.exp(-0.5 * (a - 2.0) ** 2)
                pb = pa * np.exp(-0.5 * (b - a) * (b + a)) if b < np.inf else 0.0
                p1 = 1.0 - pa * _mills_ratio(a - 2.0)
            else:
                scale = 0.0
                pa = _INV_SQRT_2PI * np.exp(-0.5 * a * a) if a > -np.inf else 0.0
                pb = _INV_SQRT_2PI * np.exp(-0.5 * b * b) if b < np.inf else 0.0
                p1 = pa * _mills_ratio(2.0 - a) if a > -np.inf else 0.0
            if b < np.inf:
                tail_b = pb * _mills_ratio(b)
                p3 = pb * _mills_ratio(b + 2.0)
            else:
                tail_b = p3 = 0.0
            if a >= 0.0:
                p2 = pa * _mills_ratio(a) - tail_b
            elif a > -np.inf:
                p2 = 1.0 - pa * _mills_ratio(-a) - tail_b
            else:
                p2 = 1.0 - tail_b
            total = p1 + max(p2, 0.0) + p3
            shift = (2.0 * p1 - 2.0 * p3) / total
            second = (5.0 * (p1 + p3) + max(p2, 0.0) - 2.0 * (pa + pb)) / total
            mean[row, col] = m + sign * shift
            var[row, col] = max(second - shift * shift, 1e-12)
            total_log_z += pen + scale
            product *= total
            if col % 64 == 63:
                total_log_z += np.log(product)
                product = 1.0
        log_z[row] = total_log_z + np.log(product)
    return log_z


# Counter-based random numbers: output ``c`` of the stream ``key`` is the SplitMix64 output
# (Steele, Lea & Flood 2014) after ``c`` steps, i.e. the mix of ``key + c * gamma``, so any entry's
# numbers are a function of (key, entry) alone, whatever the threads or the order of the work.
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_U1, _U8, _U11, _U27, _U30, _U31 = (np.uint64(b) for b in (1, 8, 11, 27, 30, 31))
_LOW8, _LOW52 = np.uint64(0xFF), np.uint64((1 << 52) - 1)
_ENTRY_SHIFT = np.uint64(16)  # each entry owns 2^16 consecutive counters (it uses 5 or a few more)


def _ziggurat_tables(layers=256, r=3.6541528853610088, v=4.92867323399e-3):
    """Marsaglia & Tsang's (2000) ziggurat for N(0, 1) with 52-bit integers, as numpy's: the
    acceptance bounds ``k`` (int64: 52-bit values), the widths ``w`` and the density at the
    layer edges ``f``."""
    m = 2.0**52
    k, w, f = np.zeros(layers, np.int64), np.zeros(layers), np.zeros(layers)
    dn = tn = r
    q = v / math.exp(-0.5 * dn * dn)
    k[0], k[1] = int(dn / q * m), 0
    w[0], w[-1] = q / m, dn / m
    f[0], f[-1] = 1.0, math.exp(-0.5 * dn * dn)
    for i in range(layers - 2, 0, -1):
        dn = math.sqrt(-2.0 * math.log(v / dn + math.exp(-0.5 * dn * dn)))
        k[i + 1] = int(dn / tn * m)
        tn = dn
        f[i] = math.exp(-0.5 * dn * dn)
        w[i] = dn / m
    return k, w, f, r


_ZIG_K, _ZIG_W, _ZIG_F, _ZIG_R = _ziggurat_tables()


@njit(cache=True, inline="always")
def _bits(key, counter):
    z = key + counter * _GAMMA
    z = (z ^ (z >> _U30)) * _MIX1
    z = (z ^ (z >> _U27)) * _MIX2
    return z ^ (z >> _U31)


@njit(cache=True, inline="always")
def _uniform(key, counter):
    """U(0, 1), open at both ends, from the top 53 bits of output ``counter``."""
    return (float(np.int64(_bits(key, counter) >> _U11)) + 0.5) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def _candidate(b):
    """The ziggurat's candidate from one 64-bit output (numpy's layout: layer from the low 8
    bits, sign from the next, 52-bit abscissa, converted as int64, exact below 2^52): ``(x,
    layer, accepted without a further test)``."""
    idx = np.int64(b & _LOW8)
    b >>= _U8
    rabs = np.int64((b >> _U1) & _LOW52)
    x = float(rabs) * _ZIG_W[idx]
    if (b & _U1) == _U1:
        x = -x
    return x, idx, rabs < _ZIG_K[idx]


@njit(cache=True)
def _normal_rest(key, x, idx, counter):
    """The rest of Marsaglia & Tsang's (2000) ziggurat for a candidate ``x`` in layer ``idx``
    that failed the fast test: the exact tail beyond r (Marsaglia 1964) in layer 0, else the
    wedge test with a uniform, and on rejection new candidates; further outputs from
    ``counter`` on.  Returns the N(0, 1) draw."""
    while True:
        if idx == 0:  # x beyond r: the tail (x != 0 here, so its sign is the candidate's)
            while True:
                xx = -np.log1p(-_uniform(key, counter)) / _ZIG_R
                yy = -np.log1p(-_uniform(key, counter + _U1))
                counter += _U1 + _U1
                if yy + yy > xx * xx:
                    return -(_ZIG_R + xx) if x < 0.0 else _ZIG_R + xx
        u = _uniform(key, counter)
        counter += _U1
        if (_ZIG_F[idx - 1] - _ZIG_F[idx]) * u + _ZIG_F[idx] < np.exp(-0.5 * x * x):
            return x
        x, idx, fast = _candidate(_bits(key, counter))
        counter += _U1
        if fast:
            return x


_RETRY_SHIFT = np.uint64(14)  # normal c of an entry continues at counter (c + 1) 2^14 of it


@njit(cache=True)
def _entry_randoms(key, j0, m, out, slow):
    """The random numbers of entries ``j0, ..., j0 + m - 1`` of a half-sweep into the first m
    columns of ``out`` (5, at least m; ``slow``: a bool work array as long): two chi^2_1
    (squared normals) and two uniforms for the inverse-Gaussian draws of 1/lam^l, 1/lam^u,
    and one N(0, 1) for the draw of w.  Entry j owns the counters ``j 2^16 ... j 2^16 + 2^16
    - 1``: the uniforms are outputs 0 and 1, normal c's ziggurat candidate output 2 + c.  A
    first pass without branches (vectorised) takes every candidate and marks the entries where
    one fails the ziggurat's fast test (1.5 % per normal, 4.4 % of entries); a second pass
    finishes those normals with :func:`_normal_rest`, normal c from the entry's counter (c + 1)
    2^14 on.  Every number is exact and a function of (key, entry) only.  (Whole arrays and a
    count, not slices: the loop over a slice of ``out`` is not vectorised.)"""
    for s in range(m):
        base = np.uint64(j0 + s) << _ENTRY_SHIFT
        out[2, s] = _uniform(key, base)
        out[3, s] = _uniform(key, base + _U1)
        x0, _, ok0 = _candidate(_bits(key, base + np.uint64(2)))
        x1, _, ok1 = _candidate(_bits(key, base + np.uint64(3)))
        x2, _, ok2 = _candidate(_bits(key, base + np.uint64(4)))
        out[0, s] = x0 * x0
        out[1, s] = x1 * x1
        out[4, s] = x2
        slow[s] = not (ok0 and ok1 and ok2)
    for s in range(m):
        if slow[s]:
            base = np.uint64(j0 + s) << _ENTRY_SHIFT
            for c in range(3):
                x, idx, ok = _candidate(_bits(key, base + np.uint64(2 + c)))
                if not ok:
                    x = _normal_rest(key, x, idx, base + (np.uint64(c + 1) << _RETRY_SHIFT))
                    if c < 2:
                        out[c, s] = x * x
                    else:
                        out[4, s] = x


@njit(cache=True)
def _inv_gauss(mu, chi2, uniform):
    """IG(mu, 1) draw from one chi^2_1 and one uniform (Michael, Schucany & Haas 1976): the
    roots of the quadratic are ``mu / D`` and ``mu D``, ``D = 1 + a + sqrt(a (2 + a))``, ``a = mu
    chi2 / 2`` (the cancellation-free form), and the smaller is taken when ``U (mu + mu / D) <=
    mu``, i.e. ``U (D + 1) <= D``: one division instead of three."""
    a = 0.5 * mu * chi2
    big = 1.0 + a + np.sqrt(a * (2.0 + a))
    return mu * big if uniform * (big + 1.0) > big else mu / big


@njit(cache=True, error_model="numpy")
def _margin_draws(t, w, lo, up, mu, eps, key, j0, r, slow, new, ll_lo, ll_up):
    """Draws of :func:`_margin_sweep` for entries ``j0, ..., j0 + t - 1`` of the half-sweep (the
    first t of each array) with current value ``w``, neighbours ``lo`` / ``up`` (+-inf: none) and
    mean ``mu = a^T z``: 1/lam^l, 1/lam^u ~ IG(1/|u|, 1), then ``new = m + N(0, 1) / sqrt(p)`` (eq.
    7), with the random numbers of :func:`_entry_randoms` (into ``r`` and ``slow``), drawn first so
    that this loop is branch-free (vectorised); and the hinge terms of eq. 6 of each side."""
    _entry_randoms(key, j0, t, r, slow)
    for s in range(t):
        has_l = lo[s] > -np.inf
        has_u = up[s] < np.inf
        u = lo[s] + eps - w[s]
        il = _inv_gauss(1.0 / max(abs(u), 1e-6), r[0, s], r[2, s])
        ll_lo[s] = 2.0 * max(u, 0.0) if has_l else 0.0
        prec = 1.0 + il if has_l else 1.0
        lin = mu[s] + (il * (lo[s] + eps) + 1.0) if has_l else mu[s]
        u = w[s] + eps - up[s]
        iu = _inv_gauss(1.0 / max(abs(u), 1e-6), r[1, s], r[3, s])
        ll_up[s] = 2.0 * max(u, 0.0) if has_u else 0.0
        prec = prec + iu if has_u else prec
        lin = lin + (iu * (up[s] - eps) - 1.0) if has_u else lin
        sd = 1.0 / np.sqrt(prec)
        new[s] = (lin * sd + r[4, s]) * sd


_SWEEP_BLOCK = 64  # features per work item of the sweep (its buffers are allocated once)


@njit(cache=True, error_model="numpy", nogil=True)  # on the worker threads (map_blocks)
def _margin_sweep(ew, wbar, h, order, new_group, offset, parities, eps, keys, rho):
    """Half-sweeps of the latent max-margin w (eq. 7 augmentation), feature by feature, and the
    Robbins-Monro average of ``_Engine._maxmargin_latent``.

    ``ew`` and ``wbar`` (a^T z) are (n_features, n_samples); ``order[i]`` lists the samples of
    feature i in increasing x and ``new_group[i, p]`` is True where sorted position p starts a
    new tie group.  For each parity in ``parities`` in turn (0, 1: a full sweep), the entries of
    tie groups whose rank has that parity are drawn given the rest: w^l / w^u are the maximum /
    minimum of the current w over the groups below / above (section 2, ERRATA), 1/lam ~
    IG(1/|u|, 1) (section 7, item 3), and w ~ N(m, 1/p) as in ``_Engine._maxmargin_latent``.
    The random numbers are those of the stream ``keys[parity]`` (uint64s the caller draws from
    its Generator) at the entry's number (entries of a parity numbered feature by feature in
    sorted order from ``offset[parity, i]`` on), so the result does not depend on how features
    are spread over threads or blocks.  Per feature, w is gathered into sorted order once; per
    parity a backward and a forward pass collect each entry's neighbours, then one pass draws
    them; w is scattered back once, and when ``h`` has the shape of ``ew`` it becomes ``(1 -
    rho) h + rho w`` in the same pass.  Features go in blocks of 64 (buffers allocated once a
    block); the caller spreads groups of features over threads (``_threads.map_blocks``; compiled
    ``nogil``).  Returns the log pseudo-likelihood (eq. 6) at the w before each half-sweep,
    ``sum w^2``, ``sum h wbar`` (0 without h) and ``sum (w - wbar)^2``, w the final draw.
    """
    d, n = ew.shape
    average = h.shape[0] == d
    ll = sq = cross = resid2 = 0.0
    for blk in range(-(-d // _SWEEP_BLOCK)):
        ws = np.empty(n)
        ms = np.empty(n)
        above = np.empty(n)
        pos = np.empty(n, np.int64)  # the entries of this parity: sorted place, w, w^l, w^u, mean
        cur = np.empty(n)
        lo = np.empty(n)
        up = np.empty(n)
        mu = np.empty(n)
        new = np.empty(n)
        ll_lo = np.empty(n)
        ll_up = np.empty(n)
        r = np.empty((5, n))
        slow = np.empty(n, np.bool_)
        for i in range(blk * _SWEEP_BLOCK, min(d, (blk + 1) * _SWEEP_BLOCK)):
            for p in range(n):
                ws[p] = ew[i, order[i, p]]
                ms[p] = wbar[i, order[i, p]]
            for parity in parities:
                # backward: above[p] = min of w after the end of p's tie group (a select, not
                # a branch: 5 % faster sweeps at 334 x 4,732 without ties, bit for bit the same)
                above[n - 1] = np.inf
                run = ws[n - 1]
                after_group = np.inf
                for p in range(n - 2, -1, -1):
                    after_group = run if new_group[i, p + 1] else after_group
                    above[p] = after_group
                    run = min(run, ws[p])
                # forward: below = max of w before the start of the current tie group; the
                # entries of this parity are collected without a branch (every position is
                # written, the count advances only for this parity: ties make parity irregular)
                t = 0
                run = -np.inf
                below = -np.inf
                odd = 1
                for p in range(n):
                    if new_group[i, p]:
                        below = run
                        odd ^= 1
                    pos[t] = p
                    mu[t] = ms[p]
                    cur[t] = ws[p]
                    lo[t] = below
                    up[t] = above[p]
                    t += odd == parity
                    run = max(run, ws[p])
                _margin_draws(
                    t,
                    cur,
                    lo,
                    up,
                    mu,
                    eps,
                    keys[parity],
                    offset[parity, i],
                    r,
                    slow,
                    new,
                    ll_lo,
                    ll_up,
                )
                for s in range(t):
                    ws[pos[s]] = new[s]
                    ll -= ll_lo[s] + ll_up[s]
            for p in range(n):
                j = order[i, p]
                e = ws[p]
                ew[i, j] = e
                sq += e * e
                diff = e - ms[p]
                resid2 += diff * diff
                if average:
                    v = (1.0 - rho) * h[i, j] + rho * e
                    h[i, j] = v
                    cross += v * ms[p]
    return ll, sq, cross, resid2


@njit(cache=True)
def _rank_fractions(order, new_group):
    """Average ranks over n + 1, (n_features, n_samples), from the sorted order and tie groups
    of :class:`_RankIndex`."""
    d, n = order.shape
    out = np.empty((d, n))
    for i in range(d):
        start = 0
        while start < n:
            end = start
            while end + 1 < n and not new_group[i, end + 1]:
                end += 1
            rank = (0.5 * (start + end) + 1.0) / (n + 1)
            for p in range(start, end + 1):
                out[i, order[i, p]] = rank
            start = end + 1
    return out


@njit(cache=True, inline="always")
def _count_below(row, x):
    """Number of values of the sorted, non-empty ``row`` below ``x`` (``np.searchsorted(row,
    x)``): 0 at once at or below the smallest (the zeros of counts), else a binary search
    whose halving steps are arithmetic rather than branches."""
    if x <= row[0]:
        return 0
    base = 0
    length = len(row)
    while length > 1:
        half = length >> 1
        base += half * (row[base + half - 1] < x)
        length -= half
    return base + (row[base] < x)


_TILE = 8  # features whose new values are placed through a buffer: 64 bytes of a sample row


@njit(cache=True, nogil=True)  # on the worker threads (new_neighbours)
def _place(sorted_x, order, w, xnew, lo, up, typical, adjacent):
    """Neighbours of new values among the training values, feature by feature (paper 000,
    section 3, predictions): for ``xnew[m, i]``, ``lo[m, i]`` is the maximum of the training
    ``w[i]`` over strictly smaller training x and ``up[m, i]`` the minimum over strictly larger
    (+-inf when there is none); with ``adjacent``, ``lo`` is instead the mean training w of the
    nearest tie group below (the largest smaller x) and ``up`` that of the nearest group above
    (each tie group stands as one element, the paper's "two elements closest to x_* from above
    and below"); ``typical[m, i]`` is the mean training w of the tie group of
    equal x, or between two groups the mean of their means (the start of prediction's Newton
    steps).  ``xnew`` and the outputs are (samples, features), ``w``, ``sorted_x`` (each
    feature's training values in increasing order) and ``order`` (their samples) are
    (features, training samples).  Each feature's tie groups are summarised first (value,
    mean w, maximum of w up to the group, minimum from it), and the new values are searched
    among the groups; they and the outputs pass through a buffer of ``_TILE`` features."""
    d, n = sorted_x.shape
    m = xnew.shape[0]
    tile = np.empty((4, _TILE, m))  # new values and the three outputs of _TILE features
    value = np.empty(n)
    mean = np.empty(n)
    upto = np.empty(n)
    down = np.empty(n)
    for i in range(d):
        row = sorted_x[i]
        groups = 0
        high = -np.inf
        p = 0
        while p < n:  # one tie group per pass: its value, mean w and the running maximum
            x = row[p]
            total = 0.0
            size = 0
            low = np.inf
            while p < n and row[p] == x:
                wp = w[i, order[i, p]]
                total += wp
                high = max(high, wp)
                low = min(low, wp)
                size += 1
                p += 1
            value[groups] = x
            mean[groups] = total / size
            upto[groups] = high
            down[groups] = low
            groups += 1
        for g in range(groups - 2, -1, -1):  # running minimum from each group on
            down[g] = min(down[g], down[g + 1])
        values = value[:groups]
        b = i % _TILE
        if b == 0:  # the next tile of features, read a cache line of each sample at a time
            for j in range(m):
                for c in range(min(_TILE, d - i)):
                    tile[0, c, j] = xnew[j, i + c]
        for j in range(m):
            x = tile[0, b, j]
            g = _count_below(values, x)  # groups below x
            tie = g < groups and value[g] == x
            above = g + 1 if tie else g
            if adjacent:
                tile[1, b, j] = mean[g - 1] if g > 0 else -np.inf
                tile[2, b, j] = mean[above] if above < groups else np.inf
            else:
                tile[1, b, j] = upto[g - 1] if g > 0 else -np.inf
                tile[2, b, j] = down[above] if above < groups else np.inf
            if tie:
                tile[3, b, j] = mean[g]
            elif g == 0:
                tile[3, b, j] = mean[0]
            elif g == groups:
                tile[3, b, j] = mean[groups - 1]
            else:
                tile[3, b, j] = 0.5 * (mean[g - 1] + mean[g])
        if b == _TILE - 1 or i == d - 1:  # write the tile back the same way
            i0 = i - b
            for j in range(m):
                for c in range(b + 1):
                    lo[j, i0 + c] = tile[1, c, j]
                    up[j, i0 + c] = tile[2, c, j]
                    typical[j, i0 + c] = tile[3, c, j]
