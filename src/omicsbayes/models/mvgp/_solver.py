"""The shared solver of the paper-004 estimators: objective (11) on factors ``B = U V^T`` and its
gradient, the leading singular pairs of its gradient (Lanczos), and balanced factors."""

import numpy as np
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh


def _factor_objective(U, V, problem, lam, sigma2, frobenius):
    """Objective (11) on factors B = U V^T and its gradient.

    ``f = sum_l (psi_l - y_l)^2 / (2 sigma2) + [frobenius] ||U V^T||_F^2 / 2
    + lam (||U||_F^2 + ||V||_F^2) / 2`` with ``psi_l = (G_M U)_{m_l} . (G_N V)_{n_l}``.

    Returns
    -------
    f : float
    gU, gV : ndarray
        Gradients with respect to U and V.
    e : ndarray
        Residuals ``psi_l - y_l`` at the observed entries.
    """
    P = problem.Km.sqrt_matmat(U)
    Q = problem.Kn.sqrt_matmat(V)
    Pl, Ql = P[problem.rows], Q[problem.cols]
    e = np.einsum("lk,lk->l", Pl, Ql) - problem.y
    w = e / sigma2
    f = 0.5 * e @ w + 0.5 * lam * (np.sum(U * U) + np.sum(V * V))
    gU = problem.Km.sqrt_matmat(problem.Rm @ (w[:, None] * Ql)) + lam * U
    gV = problem.Kn.sqrt_matmat(problem.Rn @ (w[:, None] * Pl)) + lam * V
    if frobenius:
        UtU, VtV = U.T @ U, V.T @ V
        f += 0.5 * np.sum(UtU * VtV)
        gU += U @ VtV
        gV += V @ UtU
    return f, gU, gV, e


def _leading_singular_pairs(problem, U, V, e, sigma2, frobenius, rng, k):
    """The ``k`` leading singular triples ``(s, u, v)`` (largest first; ``u``, ``v`` with ``k``
    columns) of the gradient ``X = G_M S G_N + [frobenius] U V^T`` of (11), S the sparse
    residual matrix: Lanczos on the Gram matrix of the smaller side."""
    S = problem.sparse(e / sigma2)
    if not frobenius:
        U, V = U[:, :0], V[:, :0]
    k = min(k, min(problem.shape) - 1)
    if problem.shape[0] >= problem.shape[1]:
        s, v, u = _top_of_gram(S, problem.Km, problem.Kn, U, V, rng, k)
    else:  # X^T = G_N S^T G_M + V U^T
        s, u, v = _top_of_gram(S.T.tocsr(), problem.Kn, problem.Km, V, U, rng, k)
    return s, u, v


def _top_of_gram(S, Ka, Kb, U, V, rng, k):
    """``(s, v, u)``: the ``k`` leading eigenpairs ``(s^2, v)`` of ``X^T X`` for
    ``X = G_a S G_b + U V^T`` (largest first) and ``u = X v / s``.

    ``X^T X x = G_b [S^T K_a S y + S^T P (V^T x)] + V [P^T S y + U^T U V^T x]`` with ``y = G_b x``
    and ``P = G_a U``; ``K_a = G_a^2 = W diag(d - t_w) W^T + diag(t)`` enters through
    ``B = W^T S`` (q x N, never larger than W), formed once, so no Lanczos step multiplies by
    the M x q eigenvectors (those products were the fit's hot spot).
    """
    W, t = Ka.eigvecs, Ka.tail
    dd = Ka.eigvals - Ka._t_w  # K_a = W diag(d - t_w) W^T + diag(t): t = t_w where W != 0
    St = S.T.tocsr()
    B = (St @ W).T
    SP = St @ Ka.sqrt_matmat(U)
    UtU = U.T @ U

    def gram(x):
        x = np.ravel(x)
        y = Kb.sqrt_matmat(x)
        z = B.T @ (dd * (B @ y)) + St @ (t * (S @ y))
        if not U.shape[1]:
            return Kb.sqrt_matmat(z)
        vx = V.T @ x
        return Kb.sqrt_matmat(z + SP @ vx) + V @ (SP.T @ y + UtU @ vx)

    n = S.shape[1]
    v0 = rng.standard_normal(n)
    op = LinearOperator((n, n), matvec=gram, dtype=float)
    try:
        top, vec = eigsh(op, k=k, which="LA", v0=v0, tol=1e-10, maxiter=300)
    except ArpackNoConvergence:
        # a tight cluster of leading values (OMIM at small sigma2: many rows with one or two
        # entries of alike residuals): any vectors of the cluster are directions as good, and
        # values to 1e-7 are far within the stopping rule's tol; a larger Krylov space
        ncv = min(n, max(4 * k, 40))
        try:
            top, vec = eigsh(op, k=k, which="LA", v0=v0, tol=1e-7, ncv=ncv, maxiter=2000)
        except ArpackNoConvergence:
            # leading values repeated beyond Lanczos' reach (an identity covariance: many rows
            # with one entry of equal residuals): a block that spans part of the cluster
            top, vec = _subspace_top(op, n, k, rng)
    order = np.argsort(-top)
    v = vec[:, order]
    u = Ka.sqrt_matmat(S @ Kb.sqrt_matmat(v)) + U @ (V.T @ v)
    norm = np.linalg.norm(u, axis=0)
    return np.sqrt(np.maximum(top[order], 0.0)), v, u / np.where(norm > 0, norm, 1.0)


def _subspace_top(op, n, k, rng, n_iter=50):
    """The ``k`` leading eigenpairs of the symmetric positive semidefinite operator ``op``
    (``n x n``): subspace iteration on ``min(n, 2 k + 10)`` random columns, then Rayleigh-Ritz.
    The power method the paper names for this step (section 4); its values need not be exact."""
    Q = np.linalg.qr(rng.standard_normal((n, min(n, 2 * k + 10))))[0]
    for _ in range(n_iter):
        Q = np.linalg.qr(op.matmat(Q))[0]
    T = Q.T @ op.matmat(Q)
    values, vectors = np.linalg.eigh((T + T.T) / 2)
    return values[-k:], Q @ vectors[:, -k:]


def _balanced(U, V, rel=1e-8):
    """Factors of the same ``U V^T`` with orthogonal columns scaled by ``sqrt`` of its singular
    values (so ``(||U||^2 + ||V||^2) / 2`` equals the nuclear norm), singular values below
    ``rel`` times the largest dropped. Uses thin QR of both factors: O((M + N) r^2)."""
    Qu, Ru = np.linalg.qr(U)
    Qv, Rv = np.linalg.qr(V)
    X, s, Yt = np.linalg.svd(Ru @ Rv.T, full_matrices=False)  # r may exceed min(M, N)
    keep = s > rel * s[0] if s.size and s[0] > 0 else np.zeros(s.size, dtype=bool)
    root = np.sqrt(s[keep])
    return Qu @ (X[:, keep] * root), Qv @ (Yt[keep].T * root)
