"""Paper 004: objective (11) on factors, MV-GP = equation (1a), factored nuclear norm = dense
singular-value thresholding, and a planted low-rank problem with an informative row graph."""

import numpy as np
import pytest

from omicsbayes.evaluate.ranking import ranking_curves
from omicsbayes.models.mvgp import (
    KPMF,
    MVGP,
    PMF,
    ConstrainedMVGP,
    TraceGP,
    _factor_objective,
    _Problem,
)
from omicsbayes.preprocess.graph import LowRankKernel, diffusion_kernel
from omicsbayes.protocols.disease_gene import (
    averaged_scores,
    disease_gene_cv,
    hyperparameter_grid,
    select_hyperparameters,
)
from omicsbayes.protocols.rating import rating_cv


def _spd(n, rng):
    A = rng.standard_normal((n, n))
    return A @ A.T / n + 0.1 * np.eye(n)


@pytest.fixture
def tiny():
    rng = np.random.default_rng(0)
    M, N, L = 10, 8, 35
    flat = rng.choice(M * N, L, replace=False)
    rows, cols = flat // N, flat % N
    return rng, M, N, rows, cols, rng.standard_normal(L), _spd(M, rng), _spd(N, rng)


@pytest.mark.parametrize("frobenius", [True, False])
def test_factor_objective_gradient_matches_finite_differences(tiny, frobenius):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    Kn_lr = diffusion_kernel(np.ones((N, N)) - np.eye(N), rank=3)  # low-rank + tail form too
    for col_kernel in (Kn, Kn_lr):
        problem = _Problem(rows, cols, y, (M, N), Km, col_kernel)
        U, V = rng.standard_normal((M, 3)), rng.standard_normal((N, 3))
        _, gU, gV, _ = _factor_objective(U, V, problem, 0.7, 0.4, frobenius)
        h = 1e-6
        for X, g in ((U, gU), (V, gV)):
            for idx in [(0, 0), (3, 2), (M - 3, 1)]:
                X[idx] += h
                fp = _factor_objective(U, V, problem, 0.7, 0.4, frobenius)[0]
                X[idx] -= 2 * h
                fm = _factor_objective(U, V, problem, 0.7, 0.4, frobenius)[0]
                X[idx] += h
                assert g[idx] == pytest.approx((fp - fm) / (2 * h), rel=1e-6, abs=1e-7)


def test_mvgp_equals_closed_form_gp_posterior_mean(tiny):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    rows = np.append(rows, rows[0])  # a repeated observation of one entry
    cols = np.append(cols, cols[0])
    y = np.append(y, 0.3)
    sigma2 = 0.5
    model = MVGP(sigma2=sigma2, tol=1e-12).fit(rows, cols, y, (M, N), Km, Kn)
    # equation (1a) with the Kronecker covariance C((m,n),(m',n')) = Km[m,m'] Kn[n,n']
    C = np.kron(Km, Kn)  # row-major index m * N + n
    flat = rows * N + cols
    alpha = np.linalg.solve(C[np.ix_(flat, flat)] + sigma2 * np.eye(flat.size), y)
    expected = (C[:, flat] @ alpha).reshape(M, N)
    np.testing.assert_allclose(model.predict_rows(), expected, atol=1e-8)
    qr, qc = np.array([1, 9, 4]), np.array([0, 7, 3])
    np.testing.assert_allclose(model.predict(qr, qc), expected[qr, qc], atol=1e-8)


def _dense_svt(Gm, Gn, rows, cols, y, lam, sigma2, frobenius, n_iter=4000):
    """FISTA with singular-value thresholding on the dense B of equation (11)."""
    M, N = Gm.shape[1], Gn.shape[1]
    step = 1.0 / (np.linalg.norm(Gm, 2) ** 2 * np.linalg.norm(Gn, 2) ** 2 / sigma2 + frobenius)
    B = Z = np.zeros((M, N))
    t = 1.0
    for _ in range(n_iter):
        psi = Gm @ Z @ Gn.T
        S = np.zeros((Gm.shape[0], Gn.shape[0]))
        np.add.at(S, (rows, cols), (psi[rows, cols] - y) / sigma2)
        U, s, Vt = np.linalg.svd(Z - step * (Gm.T @ S @ Gn + frobenius * Z), full_matrices=False)
        B_new = (U * np.maximum(s - step * lam, 0.0)) @ Vt
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        Z = B_new + (t - 1) / t_new * (B_new - B)
        B, t = B_new, t_new
    return B


@pytest.mark.parametrize("cls, lam", [(ConstrainedMVGP, 1.0), (TraceGP, 2.0)])
def test_factored_solution_matches_dense_proximal_gradient(tiny, cls, lam):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    Gm = np.linalg.cholesky(Km)  # the paper's basis; the fit uses the symmetric square root
    Gn = np.linalg.cholesky(Kn)
    frob = 1.0 if cls is ConstrainedMVGP else 0.0
    B = _dense_svt(Gm, Gn, rows, cols, y, lam, 0.5, frob)
    model = cls(lam=lam, sigma2=0.5, tol=1e-12, max_rank=8, random_state=0)
    model.fit(rows, cols, y, (M, N), Km, Kn)
    assert model.converged_
    np.testing.assert_allclose(model.predict_rows(), Gm @ B @ Gn.T, atol=2e-5)
    sv = np.linalg.svd(B, compute_uv=False)
    assert model.rank_ == int((sv > 1e-6 * sv[0]).sum())
    assert model.nuclear_norm_ == pytest.approx(sv.sum(), rel=1e-4)
    assert np.all(np.diff(model.objective_) <= 1e-9)


def test_large_lambda_gives_zero_mean(tiny):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    # B = 0 is optimal iff ||G_M^T S G_N||_2 <= lam with S the sparse matrix of -y / sigma2
    Gm, Gn = (LowRankKernel.from_dense(K).sqrt_matmat(np.eye(len(K))) for K in (Km, Kn))
    S = np.zeros((M, N))
    np.add.at(S, (rows, cols), -y)
    s1 = np.linalg.norm(Gm @ S @ Gn, 2)
    model = ConstrainedMVGP(lam=1.01 * s1, sigma2=1.0, random_state=0)
    model.fit(rows, cols, y, (M, N), Km, Kn)
    assert model.rank_ == 0 and np.all(model.predict_rows() == 0)
    model.set_params(lam=0.9 * s1).fit(rows, cols, y, (M, N), Km, Kn)
    assert model.rank_ >= 1


def _planted(seed, M=80, N=150, n_clusters=4, n_causal=10, n_pos=4):
    """Rows in clusters sharing causal columns (a rank-4 block matrix); the row graph links
    rows of the same cluster far more often than rows of different clusters."""
    rng = np.random.default_rng(seed)
    cluster = np.repeat(np.arange(n_clusters), M // n_clusters)
    causal = rng.permutation(N)[: n_clusters * n_causal].reshape(n_clusters, n_causal)
    pos = np.array([rng.choice(causal[cluster[m]], n_pos, replace=False) for m in range(M)])
    p_edge = np.where(cluster[:, None] == cluster[None, :], 0.3, 0.01)
    A = np.triu(rng.random((M, M)) < p_edge, 1)
    A = (A | A.T).astype(float)
    rows = np.repeat(np.arange(M), n_pos)
    return M, N, rows, pos.ravel(), diffusion_kernel(A)


def test_planted_conmvgp_beats_pmf_and_new_rows_beat_popularity():
    M, N, rows, cols, K = _planted(0)
    train = np.tile([True, False, False, False], M)  # one known gene per disease
    scores = {}
    for name, est, kernel in [
        ("con", ConstrainedMVGP(lam=1.0, sigma2=0.1, max_rank=10, tol=1e-4), K),
        ("pmf", PMF(rank=5, sigma2=0.1), None),
    ]:
        s = averaged_scores(
            est, rows[train], cols[train], (M, N), np.arange(M), kernel, n_negative_sets=2
        )
        curve = ranking_curves(s, (rows[~train], cols[~train]), (rows[train], cols[train]), [10])
        scores[name] = curve["precision"][0]
    assert scores["con"] > scores["pmf"] + 0.05

    new = np.arange(0, M, 5)
    is_new = np.isin(rows, new)
    s = averaged_scores(
        ConstrainedMVGP(lam=1.0, sigma2=0.1, max_rank=10, tol=1e-4),
        rows[~is_new],
        cols[~is_new],
        (M, N),
        new,
        K,
        n_negative_sets=2,
        exclude_rows=new,
    )
    test, known = (rows[is_new], cols[is_new]), (rows[~is_new], cols[~is_new])
    model = ranking_curves(dict(zip(new.tolist(), s)), test, known, [10])
    popularity = np.bincount(cols[~is_new], minlength=N).astype(float)
    base = ranking_curves({m: popularity for m in new}, test, known, [10])
    assert model["precision"][0] > base["precision"][0] + 0.1


def test_disease_gene_cv_tables(tiny):
    M, N, rows, cols, K = _planted(1, M=40, N=60)
    for protocol in ("known", "new"):
        out = disease_gene_cv(
            ConstrainedMVGP(lam=1.0, sigma2=0.1, max_rank=4, tol=1e-3),
            rows,
            cols,
            (M, N),
            protocol,
            row_kernel=K,
            n_splits=2,
            n_negative_sets=1,
            ks=[1, 5],
        )
        assert list(out.columns) == ["split", "k", "precision", "recall", "n_rows", "n_excluded"]
        assert len(out) == 4 and out["recall"].between(0, 1).all()


def test_disease_gene_cv_inner_selection_avoids_useless_setting():
    M, N, rows, cols, K = _planted(2, M=40, N=60)
    # lam = 1e3 exceeds the gradient norm at B = 0: the mean is exactly zero, no ranking signal
    grid = [{"lam": 1e3}, {"lam": 1.0}]
    out = disease_gene_cv(
        ConstrainedMVGP(sigma2=0.1, max_rank=4, tol=1e-3),
        rows,
        cols,
        (M, N),
        "new",
        row_kernel=K,
        n_splits=2,
        n_negative_sets=1,
        ks=[5],
        grid=grid,
    )
    assert (out["params_precision"] == repr({"lam": 1.0})).all()
    assert (out["params_recall"] == repr({"lam": 1.0})).all()


def _planted_ratings(seed, M=60, N=50, n_clusters=3):
    """Ratings 1..5 from a rank-2 matrix whose user factors follow user clusters; the user
    graph links users of the same cluster."""
    rng = np.random.default_rng(seed)
    cluster = np.repeat(np.arange(n_clusters), M // n_clusters)
    U = rng.standard_normal((n_clusters, 2))[cluster] + 0.2 * rng.standard_normal((M, 2))
    Z = 3 + 1.5 * U @ rng.standard_normal((N, 2)).T
    r, c = np.nonzero(rng.random((M, N)) < 0.3)
    y = np.clip(np.round(Z[r, c] + 0.3 * rng.standard_normal(r.size)), 1, 5)
    A = (cluster[:, None] == cluster[None, :]) & (rng.random((M, M)) < 0.3)
    A = np.triu(A, 1)
    return M, N, r, c, y, diffusion_kernel((A | A.T).astype(float))


def test_rating_cv_new_users_beat_the_mean_and_selection_per_metric():
    M, N, r, c, y, K = _planted_ratings(0)
    est = ConstrainedMVGP(lam=1.0, sigma2=0.1, max_rank=6, tol=1e-3)
    out = rating_cv(est, r, c, y, (M, N), "new", row_kernel=K, n_splits=3)
    assert list(out.columns) == ["split", "rmse", "recall", "n_rows"]
    # the training mean alone, on the same folds (PMF cannot score new users: mean only)
    base = rating_cv(PMF(rank=2), r, c, y, (M, N), "new", n_splits=3)
    assert out["rmse"].mean() < 0.95 * base["rmse"].mean()
    grid = [{"lam": 1e4}, {"lam": 1.0}]  # lam = 1e4: zero mean, the training mean only
    sel = rating_cv(est, r, c, y, (M, N), "known", row_kernel=K, n_splits=2, grid=grid)
    assert (sel["params_rmse"] == repr({"lam": 1.0})).all()


def test_kpmf_objective_and_pmf_is_identity_kpmf(tiny):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    k = KPMF(rank=3, sigma2=0.5, random_state=1).fit(rows, cols, y, (M, N), Km, Kn)
    # objective (4) evaluated directly from the returned factors U, V
    U, V = k.row_factors_, k.col_factors_
    resid = y - np.einsum("lk,lk->l", U[rows], V[cols])
    direct = (
        resid @ resid / 0.5
        + np.trace(U.T @ np.linalg.solve(Km, U))
        + np.trace(V.T @ np.linalg.solve(Kn, V))
    )
    assert k.objective_[-1] == pytest.approx(direct, rel=1e-8)
    assert k.objective_[-1] < k.objective_[0]
    p = PMF(rank=3, sigma2=0.5, random_state=1).fit(rows, cols, y, (M, N), Km, Kn)
    q = KPMF(rank=3, sigma2=0.5, random_state=1).fit(rows, cols, y, (M, N))
    np.testing.assert_allclose(p.predict(rows, cols), q.predict(rows, cols))


def test_select_hyperparameters_per_metric(tiny):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    grid = hyperparameter_grid(ConstrainedMVGP())
    assert len(grid) == 100 and {g["lam"] for g in grid} == set(np.logspace(-3, 3, 5))
    assert len(hyperparameter_grid(MVGP())) == 20
    small = [{"sigma2": s} for s in (0.01, 1.0, 100.0)]

    def score(model):
        pred = model.predict(rows, cols)
        return {
            "neg_train_rmse": -np.sqrt(np.mean((pred - y) ** 2)),
            "small_norm": -np.abs(pred).sum(),
        }

    best, table = select_hyperparameters(
        MVGP(), dict(rows=rows, cols=cols, values=y, shape=(M, N)), score, grid=small
    )
    assert len(table) == 3
    assert best["neg_train_rmse"] == {"sigma2": 0.01}  # least noise fits training data best
    assert best["small_norm"] == {"sigma2": 100.0}  # most noise shrinks the mean most


@pytest.mark.parametrize(
    "est, match",
    [
        (ConstrainedMVGP(lam=-1), "lam"),
        (ConstrainedMVGP(sigma2=0), "sigma2"),
        (ConstrainedMVGP(max_rank=0), "max_rank"),
        (TraceGP(lam=0), "lam"),
        (KPMF(rank=0), "rank"),
        (MVGP(sigma2=-1), "sigma2"),
    ],
)
def test_bad_hyperparameters(tiny, est, match):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    with pytest.raises(ValueError, match=match):
        est.fit(rows, cols, y, (M, N))


def test_bad_inputs(tiny):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    m = ConstrainedMVGP()
    with pytest.raises(ValueError, match="outside"):
        m.fit(rows + M, cols, y, (M, N))
    with pytest.raises(ValueError, match="non-finite"):
        m.fit(rows, cols, np.where(np.arange(y.size) == 0, np.nan, y), (M, N))
    with pytest.raises(ValueError, match="row_kernel covers"):
        m.fit(rows, cols, y, (M, N), row_kernel=Kn)
    with pytest.raises(ValueError, match="one length"):
        m.fit(rows[:-1], cols, y, (M, N))
    with pytest.raises(ValueError, match="not fitted"):
        m.predict(rows, cols)
