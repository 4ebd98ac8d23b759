"""Compiled (numba) kernels of the rank factor model: the batched Gaussian block of the A, Z and
beta updates, the latent max-margin half-sweep (eq. 7 augmentation) and its draws, the margin
moments of prediction, ranks and the placement of new values among training values."""

import math
import types

import numpy as np
from numba import njit, prange

from .._base import SMALL_PROBLEM

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


def _serial_and_threaded(py_func):
    """Compile ``py_func`` twice, serial and threaded over its ``prange``, and pick by size as
    for BLAS (``_base.SMALL_PROBLEM``): threads pay off only on large matrices (their start-up
    costs milliseconds, and on a busy machine a thread that waits for a core stalls the rest).
    The threaded copy gets its own name, so that numba's on-disk cache (keyed by the
    function's name) keeps the two apart."""
    serial = njit(cache=True, error_model="numpy")(py_func)
    clone = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_threads")
    clone.__qualname__ = py_func.__qualname__ + "_threads"
    threaded = njit(cache=True, parallel=True, error_model="numpy")(clone)

    def dispatch(first, *args):
        return (threaded if first.size >= SMALL_PROBLEM else serial)(first, *args)

    dispatch.__doc__ = f":func:`{py_func.__name__}`, compiled, threaded for large matrices."
    dispatch.serial, dispatch.threaded = serial, threaded
    return dispatch


_SQRT2 = np.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


@njit(cache=True, inline="always")
def _mills(a):
    """``Phi(a) exp(a^2 / 2)`` for ``a <= 0`` (in (0, 1/2]): erfc above -25, the asymptotic
    series (relative error below 1e-13) below, where erfc would underflow."""
    if a > -25.0:
        return 0.5 * math.erfc(-a / _SQRT2) * np.exp(0.5 * a * a)
    x2 = 1.0 / (a * a)
    series = 1.0 - x2 * (1.0 - 3.0 * x2 * (1.0 - 5.0 * x2 * (1.0 - 7.0 * x2 * (1.0 - 9.0 * x2))))
    return series * _INV_SQRT_2PI / -a


@njit(cache=True, inline="always")
def _side_piece(k, a):
    """A mass ``e^k Phi(a)`` as ``e^g f`` with ``f`` in (0, 1], no overflow; returns ``(g, f)``
    and ``k - a^2 / 2 - g`` (0 when ``a < 0``), for the density term at the boundary."""
    if a < 0.0:
        return k - 0.5 * a * a, _mills(a), 0.0
    return k, 1.0 - 0.5 * math.erfc(a / _SQRT2), -0.5 * a * a


def _margin_moments_py(mu, lower, upper, rows, eps, mean, var):
    """Mean and variance of :func:`margin_conditional_moments`' density, elementwise into
    ``mean`` and ``var`` (2-D arrays, rows in parallel in the threaded version), for means
    ``mu[r]`` and neighbours ``lower[rows[r]]``, ``upper[rows[r]]``; returns the sum of its log
    normaliser over each row.

    With ``l' = w^l + eps``, ``u' = w^u - eps``, ``m1 = min(l', u')``, ``m2 = max(l', u')``, the
    density is ``e^{k1} N(mu + 2, 1)`` below m1, ``e^{pen} N(mu, 1)`` between and ``e^{k3}
    N(mu - 2, 1)`` above m2 (``k1 = 2 mu + 2 - 2 l'``, ``k3 = -2 mu + 2 + 2 u'``, ``pen = -2
    (l' - u')`` when the margins overlap).  Each piece N(mu + c, 1) on (a, b) adds, relative to
    mu, mass ``e Z``, first moment ``e (c Z + phi(a) - phi(b))`` and second moment ``e ((c^2 + 1)
    Z + (2 c + a) phi(a) - (2 c + b) phi(b))`` (standardised bounds); the density being
    continuous, the phi terms reduce to ``-2 phi`` at each boundary in the second moment.  Each
    mass is ``e^g f`` with ``f`` in (0, 1] from Mills ratios (:func:`_mills`), all scaled by the
    largest ``e^g``: one erfc and one or two exp per piece, one log per entry.
    """
    n_rows, n_cols = mu.shape
    log_z = np.zeros(n_rows)
    for row in prange(n_rows):
        total_log_z = 0.0
        for col in range(n_cols):
            m = mu[row, col]
            lo = lower[rows[row], col]
            up = upper[rows[row], col]
            has_l = lo > -np.inf
            has_u = up < np.inf
            lp = lo + eps
            upp = up - eps
            m1 = min(lp, upp) if has_l else -np.inf
            m2 = max(lp, upp) if has_u else np.inf
            if has_l and not has_u:
                m1 = lp
            if has_u and not has_l:
                m2 = upp
            pen = -2.0 * (lp - upp) if has_l and has_u and upp < lp else 0.0
            b1 = m1 - m
            b2 = m2 - m
            g1 = g2 = g3 = -np.inf
            f1 = f2 = f3 = d1 = d3 = 0.0
            a1 = b1 - 2.0  # piece 1: N(mu + 2, 1) below m1
            a3 = b2 + 2.0  # piece 3: N(mu - 2, 1) above m2
            if has_l:
                g1, f1, d1 = _side_piece(2.0 * m + 2.0 - 2.0 * lp, a1)
            if has_u:
                g3, f3, d3 = _side_piece(-2.0 * m + 2.0 + 2.0 * upp, -a3)
            if b2 > b1:  # Phi(b2) - Phi(b1), relative to the larger density at a bound
                if b1 >= 0.0:
                    g2 = pen - 0.5 * b1 * b1
                    f2 = _mills(-b1)
                    if b2 < np.inf:
                        f2 -= np.exp(0.5 * (b1 - b2) * (b1 + b2)) * _mills(-b2)
                elif b2 <= 0.0:
                    g2 = pen - 0.5 * b2 * b2
                    f2 = _mills(b2)
                    if b1 > -np.inf:
                        f2 -= np.exp(0.5 * (b2 - b1) * (b2 + b1)) * _mills(b1)
                else:
                    g2 = pen
                    f2 = 1.0 - 0.5 * (math.erfc(b2 / _SQRT2) + math.erfc(-b1 / _SQRT2))
                f2 = max(f2, 0.0)
            top = max(g1, max(g2, g3))
            s1 = np.exp(g1 - top)
            s3 = np.exp(g3 - top)
            e1 = f1 * s1
            e2 = f2 * np.exp(g2 - top)
            e3 = f3 * s3
            s0 = e1 + e2 + e3
            shift = (2.0 * e1 - 2.0 * e3) / s0
            s2 = 5.0 * (e1 + e3) + e2
            # the density is continuous at m1 and m2: the phi terms of the two pieces meeting
            # there cancel in the first moment and leave -2 phi in the second (the standardised
            # bounds differ by 2 across a boundary)
            if has_l:
                s2 -= 2.0 * _INV_SQRT_2PI * (s1 if d1 == 0.0 else np.exp(g1 + d1 - top))
            if has_u:
                s2 -= 2.0 * _INV_SQRT_2PI * (s3 if d3 == 0.0 else np.exp(g3 + d3 - top))
            mean[row, col] = m + shift
            var[row, col] = max(s2 / s0 - shift * shift, 1e-12)
            total_log_z += top + np.log(s0)
        log_z[row] = total_log_z
    return log_z


_margin_moments = _serial_and_threaded(_margin_moments_py)


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
    """Draws of :func:`_margin_sweep_py` for entries ``j0, ..., j0 + t - 1`` of the half-sweep (the
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


def _margin_sweep_py(ew, wbar, h, order, new_group, offset, parities, eps, keys, rho):
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
    rho) h + rho w`` in the same pass.  Features go in blocks of 64 (threads take blocks).
    Returns the log pseudo-likelihood (eq. 6) at the w before each half-sweep, ``sum w^2``,
    ``sum h wbar`` (0 without h) and ``sum (w - wbar)^2``, w the final draw.
    """
    d, n = ew.shape
    average = h.shape[0] == d
    n_blocks = -(-d // _SWEEP_BLOCK)
    sums = np.zeros((n_blocks, 4))
    for blk in prange(n_blocks):
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
        ll = sq = cross = resid2 = 0.0
        for i in range(blk * _SWEEP_BLOCK, min(d, (blk + 1) * _SWEEP_BLOCK)):
            for p in range(n):
                ws[p] = ew[i, order[i, p]]
                ms[p] = wbar[i, order[i, p]]
            for parity in parities:
                # backward: above[p] = min of w after the end of p's tie group
                run = np.inf
                after_group = np.inf
                for p in range(n - 1, -1, -1):
                    if p == n - 1 or new_group[i, p + 1]:
                        after_group = run
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
        sums[blk, 0] = ll
        sums[blk, 1] = sq
        sums[blk, 2] = cross
        sums[blk, 3] = resid2
    total = np.zeros(4)  # a plain loop: the threaded copy would split a sum over threads
    for blk in range(n_blocks):
        for c in range(4):
            total[c] += sums[blk, c]
    return total[0], total[1], total[2], total[3]


_margin_sweep = _serial_and_threaded(_margin_sweep_py)


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


@njit(cache=True)
def _place(sorted_x, order, w, xnew, lo, up, typical):
    """Neighbours of new values among the training values, feature by feature (paper 000,
    section 3, predictions): for ``xnew[i, m]``, ``lo[i, m]`` is the maximum of the training
    ``w[i]`` over strictly smaller training x and ``up[i, m]`` the minimum over strictly larger
    (+-inf when there is none); ``typical[i, m]`` is the mean training w of the tie group of
    equal x, or between two groups the mean of their means (the start of prediction's Newton
    steps).  All arrays are (n_features, samples); ``sorted_x[i]`` holds feature i's training
    values in increasing order, ``order[i]`` their samples."""
    d, n = sorted_x.shape
    cmax = np.empty(n)
    cmin = np.empty(n)
    gmean = np.empty(n)
    gend = np.empty(n, np.int64)
    for i in range(d):
        m = -np.inf
        for p in range(n):
            m = max(m, w[i, order[i, p]])
            cmax[p] = m
        m = np.inf
        for p in range(n - 1, -1, -1):
            m = min(m, w[i, order[i, p]])
            cmin[p] = m
        row = sorted_x[i]
        start = 0
        while start < n:  # gmean[p], gend[p]: mean w and end of the tie group at position p
            end = start
            total = w[i, order[i, start]]
            while end + 1 < n and row[end + 1] == row[start]:
                end += 1
                total += w[i, order[i, end]]
            for p in range(start, end + 1):
                gmean[p] = total / (end - start + 1)
                gend[p] = end + 1
            start = end + 1
        for j in range(xnew.shape[1]):
            x = xnew[i, j]
            n_lt = np.searchsorted(row, x, side="left")
            n_le = gend[n_lt] if n_lt < n and row[n_lt] == x else n_lt
            lo[i, j] = cmax[n_lt - 1] if n_lt > 0 else -np.inf
            up[i, j] = cmin[n_le] if n_le < n else np.inf
            if n_le > n_lt:
                typical[i, j] = gmean[n_lt]
            elif n_lt == 0:
                typical[i, j] = gmean[0]
            elif n_lt == n:
                typical[i, j] = gmean[n - 1]
            else:
                typical[i, j] = 0.5 * (gmean[n_lt - 1] + gmean[n_lt])
