"""Paper 004: objective (11) on factors, MV-GP = equation (1a), factored nuclear norm = dense
singular-value thresholding, and a planted low-rank problem with an informative row graph."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from omicsbayes.evaluate.ranking import ranking_curves
from omicsbayes.models.mvgp import KPMF, MVGP, PMF, ConstrainedMVGP, TraceGP
from omicsbayes.models.mvgp._problem import _Problem
from omicsbayes.models.mvgp._solver import _balanced, _factor_objective
from omicsbayes.models.mvgp.selection import grid_params
from omicsbayes.preprocess.graph import LowRankKernel, diffusion_kernel
from omicsbayes.protocols.disease_gene import averaged_scores, disease_gene_cv
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
    assert np.all(np.diff(model.lower_bound_) <= 1e-9)


def test_singular_kernel_matches_dense_proximal_gradient(tiny):
    """A rank-deficient row kernel (G singular) gives the dense solution's mean too."""
    rng, M, N, rows, cols, y, Km, Kn = tiny
    A = rng.standard_normal((M, 4))
    K_sing = A @ A.T / 4
    Gm, Gn = (LowRankKernel.from_dense(K).sqrt_matmat(np.eye(len(K))) for K in (K_sing, Kn))
    B = _dense_svt(Gm, Gn, rows, cols, y, 1.0, 0.5, 1.0)
    model = ConstrainedMVGP(lam=1.0, sigma2=0.5, tol=1e-12, max_rank=8, random_state=0)
    model.fit(rows, cols, y, (M, N), K_sing, Kn)
    assert model.converged_
    np.testing.assert_allclose(model.predict_rows(), Gm @ B @ Gn.T, atol=2e-5)


def test_singular_pair_search_retries_when_lanczos_does_not_converge(tiny, monkeypatch):
    """A cluster of leading singular values can keep ARPACK from 1e-10 (OMIM at lam = 31.6,
    sigma2 = 0.002); the search then retries at 1e-7 with more Lanczos vectors, same fit."""
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    from omicsbayes.models.mvgp import _solver

    rng, M, N, rows, cols, y, Km, Kn = tiny
    model = ConstrainedMVGP(lam=1.0, sigma2=0.5, tol=1e-9, max_rank=8, random_state=0)
    ref = clone(model).fit(rows, cols, y, (M, N), Km, Kn)
    tols = []

    def stalls_at_1e10(op, **kw):
        tols.append(kw["tol"])
        if kw["tol"] == 1e-10:
            raise ArpackNoConvergence("no convergence", np.zeros(0), np.zeros((op.shape[0], 0)))
        return eigsh(op, **kw)

    monkeypatch.setattr(_solver, "eigsh", stalls_at_1e10)
    got = clone(model).fit(rows, cols, y, (M, N), Km, Kn)
    assert 1e-7 in tols and got.converged_ and ref.converged_
    np.testing.assert_allclose(got.predict_rows(), ref.predict_rows(), atol=1e-6)


@pytest.mark.parametrize("cls", [ConstrainedMVGP, TraceGP])
def test_singular_pair_search_falls_back_to_subspace_iteration(tiny, cls, monkeypatch):
    """Where Lanczos converges at neither tolerance (Trace GP with the identity covariance on
    Orphanet: leading values repeated many times), subspace iteration gives the directions;
    the fit reaches the same (convex) optimum."""
    from scipy.sparse.linalg import ArpackNoConvergence

    from omicsbayes.models.mvgp import _solver

    rng, M, N, rows, cols, y, _, _ = tiny
    model = cls(lam=0.5, sigma2=0.5, tol=1e-10, max_rank=8, random_state=0)
    ref = clone(model).fit(rows, cols, y, (M, N))

    def never_converges(op, **kw):
        raise ArpackNoConvergence("no convergence", np.zeros(0), np.zeros((op.shape[0], 0)))

    monkeypatch.setattr(_solver, "eigsh", never_converges)
    got = clone(model).fit(rows, cols, y, (M, N))
    assert got.converged_ and ref.converged_
    np.testing.assert_allclose(got.predict_rows(), ref.predict_rows(), atol=1e-6)


def test_subspace_iteration_finds_a_repeated_leading_value():
    from scipy.sparse.linalg import aslinearoperator

    from omicsbayes.models.mvgp._solver import _subspace_top

    rng = np.random.default_rng(1)
    Q = np.linalg.qr(rng.standard_normal((60, 60)))[0]
    values = np.r_[np.full(8, 5.0), np.linspace(2.0, 0.0, 52)]  # 5 eight times: a cluster
    top, vectors = _subspace_top(aslinearoperator(Q * values @ Q.T), 60, 3, rng)
    np.testing.assert_allclose(top, 5.0, rtol=1e-10)
    np.testing.assert_allclose(Q * values @ Q.T @ vectors, 5.0 * vectors, atol=1e-8)


def test_rank_at_most_doubles_per_step_and_objective_never_rises():
    """The pairs above lam are added as many as the current rank (1, 1, 2, 4, ...), so
    a fit capped at rank 12 takes at most 5 growth steps, each lowering objective (11)."""
    M, N, rows, cols, K = _planted(4, M=40, N=60)
    y = np.ones(rows.size)
    model = ConstrainedMVGP(lam=0.01, sigma2=0.1, max_rank=12, tol=1e-8, random_state=0)
    model.fit(rows, cols, y, (M, N), K)
    assert model.rank_ == 12 and not model.converged_
    assert len(model.lower_bound_) <= 1 + 5  # the start and steps to ranks 1, 2, 4, 8, 12
    assert np.all(np.diff(model.lower_bound_) < 0)


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
    out = disease_gene_cv(
        ConstrainedMVGP(lam=[1e3, 1.0], sigma2=0.1, max_rank=4, tol=1e-3, random_state=0),
        rows,
        cols,
        (M, N),
        "new",
        row_kernel=K,
        n_splits=2,
        n_negative_sets=2,
        ks=[5],
    )
    assert (out["chosen_lam"] == 1.0).all() and (out["chosen_sigma2"] == 0.1).all()
    assert (out["selection_metric"] == "recall@20").all()


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
    # lam = 1e4: zero mean, the training mean only
    est.set_params(lam=[1e4, 1.0], selection_metric="rmse", random_state=0)
    sel = rating_cv(est, r, c, y, (M, N), "known", row_kernel=K, n_splits=2)
    assert (sel["chosen_lam"] == 1.0).all() and (sel["selection_metric"] == "rmse").all()


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
    assert k.lower_bound_[-1] == pytest.approx(direct, rel=1e-8)
    assert k.lower_bound_[-1] < k.lower_bound_[0]
    p = PMF(rank=3, sigma2=0.5, random_state=1).fit(rows, cols, y, (M, N), Km, Kn)
    q = KPMF(rank=3, sigma2=0.5, random_state=1).fit(rows, cols, y, (M, N))
    np.testing.assert_allclose(p.predict(rows, cols), q.predict(rows, cols))


def test_grid_params_is_the_estimators_own_selection():
    """The workflow's grid entry becomes lam / sigma2 of the estimator."""
    assert grid_params(ConstrainedMVGP(), "paper") == {"lam": "auto", "sigma2": "auto"}
    assert grid_params(PMF(), "paper") == {"sigma2": "auto"}
    grid = [{"lam": lam, "sigma2": s2} for s2 in (1.0, 0.1) for lam in (10, 1)]
    assert grid_params(ConstrainedMVGP(), grid) == {"lam": [1.0, 10.0], "sigma2": [0.1, 1.0]}
    assert grid_params(MVGP(), [{"sigma2": 0.1}]) == {"sigma2": [0.1]}
    with pytest.raises(ValueError, match="every combination"):
        grid_params(ConstrainedMVGP(), grid[:3])
    with pytest.raises(ValueError, match=r"grid sets \['lam'\]; KPMF searches only"):
        grid_params(KPMF(), [{"lam": 1.0}])
    with pytest.raises(ValueError, match="'paper' or a non-empty list"):
        grid_params(KPMF(), [])


def test_listed_values_are_searched_and_one_value_is_a_number(tiny):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    one = MVGP(sigma2=[0.5], random_state=0).fit(rows, cols, y, (M, N), Km, Kn)
    num = MVGP(sigma2=0.5, random_state=0).fit(rows, cols, y, (M, N), Km, Kn)
    assert one.selection_ is None and np.array_equal(one.predict_rows(), num.predict_rows())
    listed = MVGP(sigma2=[0.01, 100.0, 1.0], selection_metric="rmse", random_state=0)
    listed.fit(rows, cols, y, (M, N), Km, Kn)
    assert listed.selection_["sigma2"].tolist() == [100.0, 1.0, 0.01]  # the path: large first
    assert listed.sigma2_ == listed.selection_.loc[listed.selection_["rmse"].idxmin(), "sigma2"]
    with pytest.raises(ValueError, match="sigma2 must be 'auto', a number or a list"):
        MVGP(sigma2=[0.1, -1.0]).fit(rows, cols, y, (M, N))
    with pytest.raises(ValueError, match="lam must be 'auto', a number or a list"):
        TraceGP(lam=[0.0, 1.0]).fit(rows, cols, y, (M, N))


def test_averaged_scores_select_once_and_reuse_the_choice(small_grid):
    """With "auto" the first negative set's fit chooses; every other set is fitted with its
    choice as numbers (the scores equal that computation done by hand)."""
    from omicsbayes.evaluate.splitters import sample_negatives

    M, N, rows, cols, K = _planted(3, M=32, N=48)
    est = KPMF(rank=2, max_iter=50)
    scores, chosen = averaged_scores(
        est, rows, cols, (M, N), np.arange(M), K, n_negative_sets=3, random_state=5,
        return_params=True,
    )  # fmt: skip
    rng = np.random.default_rng(5)
    sets = sample_negatives(rows, cols, (M, N), 3, random_state=int(rng.integers(2**31)))
    total, first = 0.0, None
    for nr, nc in sets:
        model = clone(est).set_params(random_state=int(rng.integers(2**31)))
        if first is not None:
            model.set_params(sigma2=first.sigma2_)
        R, C = np.concatenate([rows, nr]), np.concatenate([cols, nc])
        y = np.concatenate([np.ones(rows.size), np.zeros(nr.size)])
        model.fit(R, C, y, (M, N), K)
        first = model if first is None else first
        total = total + model.predict_rows()
    assert first.selection_ is not None
    assert chosen == {"chosen_sigma2": first.sigma2_, "selection_metric": "recall@20"}
    np.testing.assert_allclose(scores, total / 3, rtol=1e-12)


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
    with pytest.raises(NotFittedError):
        m.predict(rows, cols)


def _entry_estimators():
    """Every registered model fitted on matrix entries (the registry, not a list kept here)."""
    from omicsbayes import models
    from omicsbayes.models._capabilities import models_with

    return [getattr(models, name) for name in sorted(models_with("matrix_completion"))]


def test_the_entry_estimators_are_the_mvgp_package():
    assert {cls.__name__ for cls in _entry_estimators()} >= {
        "ConstrainedMVGP",
        "TraceGP",
        "MVGP",
        "KPMF",
        "PMF",
    }
    assert all(cls.__module__.startswith("omicsbayes.models.mvgp.") for cls in _entry_estimators())


@pytest.mark.parametrize("cls", _entry_estimators(), ids=lambda cls: cls.__name__)
def test_every_estimator_sits_on_the_base_and_raises_not_fitted_error_before_fit(cls):
    """Each estimator fitted on matrix entries subclasses the library's estimator base
    (matrix_completion as its tag, entry_values beside it for every model but ProDiGe's
    classifier, parameters validated before fit) and raises scikit-learn's NotFittedError (not a
    plain ValueError) from both prediction methods."""
    from sklearn.utils import get_tags
    from sklearn.utils._param_validation import InvalidParameterError

    from omicsbayes.models._base import BaseOmicsEstimator

    assert issubclass(cls, BaseOmicsEstimator)
    expected = {"matrix_completion"} | ({"entry_values"} if cls.__name__ != "ProDiGe" else set())
    assert get_tags(cls()).capabilities == expected
    with pytest.raises(InvalidParameterError, match="max_iter"):
        cls(max_iter=0).fit([0, 1], [0, 1], [1.0, 0.0], (2, 2))
    model = cls()
    with pytest.raises(NotFittedError):
        model.predict([0], [0])
    with pytest.raises(NotFittedError):
        model.predict_rows([0])


def test_fit_takes_its_blas_threads_from_the_kernels_not_from_the_entries(tiny, monkeypatch):
    """The base's thread policy leaves MV-GP's fit to choose: one blas_limit, on the largest
    products of the problem (rows x kernel rank, rows x rank), none on the entry arrays."""
    import contextlib

    from omicsbayes.models import _threads
    from omicsbayes.models.mvgp import _estimator

    rng, M, N, rows, cols, y, Km, Kn = tiny
    calls = []

    def record(*shapes):
        calls.append(shapes)
        return contextlib.nullcontext()

    monkeypatch.setattr(_threads, "blas_limit", record)
    monkeypatch.setattr(_estimator, "blas_limit", record)
    model = ConstrainedMVGP(lam=1.0, sigma2=0.5, max_rank=2).fit(rows, cols, y, (M, N), Km, Kn)
    model.predict(rows, cols)
    assert calls == [((M, M), (M, 2))]  # a dense M x M kernel keeps all M eigenvectors


# ------------------------------------------------- lam="auto" / sigma2="auto"
def _planted_gaussian(seed=1, M=20, N=15, rank=2, n_obs=180, noise=0.5):
    """A rank-2 matrix, a random subset of its entries observed with Gaussian noise."""
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((M, rank)) @ rng.standard_normal((rank, N))
    flat = rng.choice(M * N, n_obs, replace=False)
    rows, cols = flat // N, flat % N
    return rows, cols, Y[rows, cols] + noise * rng.standard_normal(n_obs), (M, N)


@pytest.fixture
def small_grid(monkeypatch):
    """Every third sigma2 of section 5's grid (the lambda grid in full) to keep the tests fast."""
    from omicsbayes.models.mvgp import selection

    monkeypatch.setattr(selection, "SIGMA2_GRID", np.logspace(-3, 3, 20)[::3])
    return selection.LAMBDA_GRID, selection.SIGMA2_GRID


def test_auto_picks_the_brute_force_best_of_the_same_split(small_grid):
    """The warm-started path gives the cold fits' validation RMSE at every grid point where the
    rank cap is not reached (the problem is convex), so its choice is the brute-force choice
    (within one grid step)."""
    from omicsbayes.models.mvgp.selection import parse_metric, validation_score, validation_split

    lams, sigma2s = small_grid
    rows, cols, y, shape = _planted_gaussian()
    kw = dict(selection_metric="rmse", max_rank=10, tol=1e-5)
    auto = ConstrainedMVGP(random_state=0, **kw).fit(rows, cols, y, shape)
    table = auto.selection_
    assert len(table) == lams.size * sigma2s.size

    problem = _Problem(rows, cols, y, shape, None, None)
    is_val = validation_split(problem.y, np.random.default_rng(0).spawn(1)[0])
    inner = problem.subset(~is_val)
    brute = []
    for lam, s2 in table[["lam", "sigma2"]].itertuples(index=False):
        cold = ConstrainedMVGP(lam=lam, sigma2=s2, **kw)
        cold._fit_problem(inner, lam=lam, sigma2=s2, rng=np.random.default_rng(1))
        brute.append(validation_score(cold, *parse_metric("rmse"), problem, is_val))
    uncapped = table["rank"] < kw["max_rank"]  # capped fits depend on the path taken
    assert uncapped.mean() > 0.4
    np.testing.assert_allclose(table["rmse"][uncapped], np.array(brute)[uncapped], rtol=2e-2)

    best = table.iloc[int(np.argmin(brute))]
    step = lambda grid, v: int(np.argmin(np.abs(np.log(grid) - np.log(v))))  # noqa: E731
    assert abs(step(lams, auto.lam_) - step(lams, best["lam"])) <= 1
    assert abs(step(sigma2s, auto.sigma2_) - step(sigma2s, best["sigma2"])) <= 1
    # the choice is a real fit: validation RMSE clearly below predicting zero
    assert table["rmse"].min() < 0.8 * np.sqrt(np.mean(y[is_val] ** 2))


@pytest.mark.parametrize(
    "est",
    [
        ConstrainedMVGP(max_rank=8, tol=1e-4, random_state=0),
        TraceGP(max_rank=8, tol=1e-4, random_state=0),
        MVGP(random_state=0),
        KPMF(rank=3, random_state=0),
        PMF(rank=3, random_state=0),
    ],
    ids=lambda e: type(e).__name__,
)
def test_auto_refit_is_the_numeric_fit_bit_for_bit(small_grid, est):
    M, N, rows, cols, K = _planted(0, M=40, N=50)
    y = np.ones(rows.size)
    neg = np.random.default_rng(3).choice(M * N, rows.size, replace=False)
    keep = ~np.isin(neg, rows * N + cols)
    rows = np.concatenate([rows, neg[keep] // N])
    cols = np.concatenate([cols, neg[keep] % N])
    y = np.concatenate([y, np.zeros(int(keep.sum()))])
    auto = clone(est).fit(rows, cols, y, (M, N), K)
    chosen = {p: getattr(auto, f"{p}_") for p in ("lam", "sigma2") if p in est.get_params()}
    assert all(np.isin(v, np.concatenate(small_grid)) for v in chosen.values())
    numeric = clone(est).set_params(**chosen).fit(rows, cols, y, (M, N), K)
    assert numeric.selection_ is None
    assert np.array_equal(auto.predict_rows(), numeric.predict_rows())
    assert auto.selection_["recall@20"].max() == pytest.approx(
        auto.selection_.set_index(list(chosen)).loc[tuple(chosen.values()), "recall@20"]
    )


@pytest.mark.parametrize("metric", ["precision@5", "rmse", "log_likelihood"])
def test_selection_metrics(small_grid, metric):
    rows, cols, y, shape = _planted_gaussian()
    model = MVGP(selection_metric=metric, random_state=0).fit(rows, cols, y, shape)
    values = model.selection_[metric]
    assert np.all(np.isfinite(values))
    best = values.min() if metric == "rmse" else values.max()
    assert values[model.selection_["sigma2"] == model.sigma2_].item() == best


def test_bad_selection_metric_and_unsplittable_data(tiny):
    rng, M, N, rows, cols, y, Km, Kn = tiny
    with pytest.raises(ValueError, match="selection_metric must be"):
        PMF(selection_metric="recall@0").fit(rows, cols, y, (M, N))
    with pytest.raises(ValueError, match="positive entries"):
        PMF(selection_metric="recall@20").fit(rows, cols, -np.abs(y), (M, N))
    with pytest.raises(ValueError, match="give lam and sigma2 as numbers"):
        MVGP().fit(rows[:1], cols[:1], y[:1], (M, N))


def test_top_k_metric_is_ranking_curves():
    """The sort-free P@k / R@k of the selection equals ranking_curves, ties included."""
    from types import SimpleNamespace

    from omicsbayes.models.mvgp.selection import top_k_metric

    rng = np.random.default_rng(0)
    M, N, L = 30, 25, 300
    for _ in range(5):
        S = rng.integers(0, 3, (M, N)).astype(float)  # many ties
        flat = rng.choice(M * N, L, replace=False)
        rows, cols = flat // N, flat % N
        positive, is_val = rng.random(L) < 0.5, rng.random(L) < 0.3
        model = SimpleNamespace(shape_=(M, N), predict_rows=lambda r, S=S: S[r].copy())
        test, train = is_val & positive, ~is_val & positive
        score_rows = np.unique(rows[test])
        for kind in ("precision", "recall"):
            for k in (1, 3, 20):
                ref = ranking_curves(
                    dict(zip(score_rows.tolist(), S[score_rows])),
                    (rows[test], cols[test]),
                    (rows[train], cols[train]),
                    ks=[k],
                )[kind][0]
                got = top_k_metric(model, kind, k, rows, cols, positive, is_val)
                assert got == pytest.approx(ref)


@pytest.mark.parametrize("shape", [(10, 8), (8, 10), (6, 6)])
def test_balanced_factors_keep_the_product_when_rank_exceeds_a_side(shape):
    """Rank doubling can give more columns than min(M, N): the product must survive."""
    rng = np.random.default_rng(3)
    U, V = rng.normal(size=(shape[0], 12)), rng.normal(size=(shape[1], 12))
    Ub, Vb = _balanced(U, V)
    np.testing.assert_allclose(Ub @ Vb.T, U @ V.T, atol=1e-10)
    assert Ub.shape[1] == Vb.shape[1] <= min(shape)
    np.testing.assert_allclose(Ub.T @ Ub, Vb.T @ Vb, atol=1e-9)  # balanced: equal Gram matrices


@pytest.mark.parametrize(
    ("cls", "name"),
    [
        (MVGP, "MV-GP CG"),
        (KPMF, "KPMF"),
        (PMF, "PMF"),
        (ConstrainedMVGP, "Con. MV-GP"),
        (TraceGP, "Trace GP"),
    ],
)
def test_progress_is_on_by_default_through_the_shared_bars(tiny, cls, name, monkeypatch, capsys):
    from omicsbayes.inference import progress

    rng, M, N, rows, cols, y, Km, Kn = tiny
    monkeypatch.setattr(progress, "_interactive", lambda: True)  # as in a terminal
    monkeypatch.setenv("TQDM_DELAY", "0")
    model = cls(sigma2=0.5)
    assert model.verbose is True
    model.fit(rows, cols, y, (M, N), Km, Kn)
    err = capsys.readouterr().err
    assert f"{name}: " in err and "it/s]" in err  # a tqdm bar
    cls(sigma2=0.5, verbose=False).fit(rows, cols, y, (M, N), Km, Kn)
    assert capsys.readouterr().err == ""


def test_rows_without_entries_are_scored_through_the_row_kernel(tiny):
    """A row with no training entry (a new disease) gets the exact solution's scores, which
    reach it through the row covariance only, with a dense and with a low-rank diffusion kernel:
    MV-GP's closed form (1a), Con. MV-GP's and Trace GP's dense solution of (11) and KPMF's
    stationarity ``U = C_M R V / sigma2`` (R the residuals); PMF (identity) scores it 0."""
    rng, M, N, rows, cols, y, _, Kn = tiny
    keep = rows != 0  # row 0 is new
    rows, cols, y = rows[keep], cols[keep], y[keep]
    ring = np.roll(np.eye(M), 1, axis=1) + np.roll(np.eye(M), -1, axis=1)
    for Km in (diffusion_kernel(ring), diffusion_kernel(ring, rank=3)):
        Kd = Km.to_dense() if isinstance(Km, LowRankKernel) else Km
        C = np.kron(Kd, Kn)
        flat = rows * N + cols
        alpha = np.linalg.solve(C[np.ix_(flat, flat)] + 0.5 * np.eye(flat.size), y)
        gp = MVGP(sigma2=0.5, tol=1e-12).fit(rows, cols, y, (M, N), Km, Kn)
        np.testing.assert_allclose(gp.predict_rows([0])[0], (C[:, flat] @ alpha)[:N], atol=1e-8)
        assert np.abs(gp.predict_rows([0])).max() > 1e-3
        Gm = LowRankKernel.from_dense(Kd).sqrt_matmat(np.eye(M))
        Gn = LowRankKernel.from_dense(Kn).sqrt_matmat(np.eye(N))
        for cls, lam, frob in [(ConstrainedMVGP, 1.0, 1.0), (TraceGP, 2.0, 0.0)]:
            B = _dense_svt(Gm, Gn, rows, cols, y, lam, 0.5, frob)
            model = cls(lam=lam, sigma2=0.5, tol=1e-12, max_rank=8, random_state=0)
            model.fit(rows, cols, y, (M, N), Km, Kn)
            expected = (Gm @ B @ Gn.T)[0]
            assert np.abs(expected).max() > 1e-3
            np.testing.assert_allclose(model.predict_rows([0])[0], expected, atol=2e-5)
        kpmf = KPMF(rank=3, sigma2=0.5, tol=1e-14, max_iter=5000, random_state=0)
        kpmf.fit(rows, cols, y, (M, N), Km, Kn)
        U, V = kpmf.row_factors_, kpmf.col_factors_
        R = np.zeros((M, N))
        np.add.at(R, (rows, cols), y - kpmf.predict(rows, cols))
        assert np.abs(U[0]).max() > 1e-3
        np.testing.assert_allclose(U[0], (Kd @ R @ V / 0.5)[0], atol=1e-5)
    pmf = PMF(rank=3, sigma2=0.5, random_state=0).fit(rows, cols, y, (M, N), Kd, Kn)
    assert np.abs(pmf.predict_rows([0])).max() < 0.01
