"""The bad-input corpus (tests/bad_inputs/): each case has one fault and gives one clear error.

A case directory holds files in real formats and ``case.yaml``:

- ``target: reader``: ``cohort`` is a config cohort entry read with ``read_cohort``; the error is a
  ``CohortError`` whose message names the file and contains every ``expect`` substring.
- ``target: call``: ``function`` of :mod:`omicsbayes.io` called with ``kwargs`` (paths relative to
  the case); the same ``CohortError`` checks as a reader case.
- ``target: workflow``: ``config.yaml`` (and its data files) for the workflow. ``stage: config``
  cases are faults of the config alone: the workflow's own checks (the JSON schema, then
  ``omicsbayes.config.check_config``) run in process and raise one error naming every
  ``expect``. ``stage: run`` cases are faults in the data that only a job can find: the config
  passes those checks, and the real snakemake exits non-zero before any fit output exists, its
  log or console naming every ``expect``. A few config cases (:data:`WHOLE_RUN`) also go
  through the real snakemake, to show the run stops on them before any job.
- ``target: legal``: an input that looks odd but is legal; the workflow completes on it.
"""

import shutil
import time
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import yaml

import omicsbayes.io
from omicsbayes import tl
from omicsbayes.config import ConfigError
from omicsbayes.io import CohortError, read_cohort
from omicsbayes.tl import _checks as tl_checks

CORPUS = Path(__file__).with_name("bad_inputs")
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "case.yaml").exists())
WHOLE_RUN = ("misspelled_config_key", "unknown_model_parameter")  # one schema, one check_config


def _case(name):
    return yaml.safe_load((CORPUS / name / "case.yaml").read_text())


def test_corpus_is_large_enough():
    assert len(CASES) >= 25


def _read(case, folder):
    if case["target"] == "reader":
        return read_cohort(case["cohort"], base_dir=folder)
    kwargs = dict(case["kwargs"], path=folder / case["kwargs"]["path"])
    return getattr(omicsbayes.io, case["function"])(**kwargs)


@pytest.mark.parametrize("name", [c for c in CASES if _case(c)["target"] in ("reader", "call")])
def test_reader_case(name, tmp_path):
    case = _case(name)
    shutil.copytree(CORPUS / name, tmp_path, dirs_exist_ok=True)
    before = set(tmp_path.iterdir())
    with pytest.raises(CohortError) as err:
        _read(case, tmp_path)
    message = str(err.value)
    assert "\n" not in message.strip(), "one message, one line"
    for expected in case["expect"]:
        assert expected in message, f"{expected!r} not in {message!r}"
    assert set(tmp_path.iterdir()) == before  # nothing written


def _workflow_cases(stage):
    return [c for c in CASES if _case(c)["target"] == "workflow" and _case(c)["stage"] == stage]


def test_every_workflow_case_has_a_stage():
    for name in CASES:
        case = _case(name)
        if case["target"] == "workflow":
            assert case.get("stage") in ("config", "run"), name


@pytest.mark.parametrize("name", _workflow_cases("config"))
def test_config_case_in_process(name, workflow_checks):
    config = yaml.safe_load((CORPUS / name / "config.yaml").read_text())
    with pytest.raises(ConfigError) as err:
        workflow_checks(config)
    for expected in _case(name)["expect"]:
        assert expected in str(err.value), f"{expected!r} not in {err.value}"


@pytest.mark.parametrize("name", _workflow_cases("run"))
def test_run_case_config_passes_the_checks(name, workflow_checks):
    """The fault of a ``stage: run`` case is in its data: its config alone is fine."""
    workflow_checks(yaml.safe_load((CORPUS / name / "config.yaml").read_text()))


@pytest.mark.workflow
@pytest.mark.parametrize("name", [*_workflow_cases("run"), *WHOLE_RUN])
def test_workflow_case(name, tmp_path, snakemake_run):
    case = _case(name)
    shutil.copytree(CORPUS / name, tmp_path, dirs_exist_ok=True)
    (tmp_path / "config").mkdir(exist_ok=True)
    shutil.move(tmp_path / "config.yaml", tmp_path / "config" / "config.yaml")
    result = snakemake_run(tmp_path, "--cores", "2")
    assert result.returncode != 0
    logs = (
        "".join(p.read_text() for p in (tmp_path / "logs").rglob("*.log"))
        if (tmp_path / "logs").exists()
        else ""
    )
    text = result.stdout + result.stderr + logs
    for expected in case["expect"]:
        assert expected in text, f"{expected!r} not in the run's output"
    assert not list(tmp_path.glob("results/*/fits/**/*.tsv")), "no fit output may remain"
    assert not list(tmp_path.glob("results/*/metrics.tsv"))


@pytest.mark.workflow
@pytest.mark.parametrize("name", [c for c in CASES if _case(c)["target"] == "legal"])
def test_legal_odd_input_works(name, tmp_path, snakemake_run):
    shutil.copytree(CORPUS / name, tmp_path, dirs_exist_ok=True)
    (tmp_path / "config").mkdir(exist_ok=True)
    shutil.move(tmp_path / "config.yaml", tmp_path / "config" / "config.yaml")
    result = snakemake_run(tmp_path, "--cores", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(tmp_path.glob("results/*/metrics.tsv"))


# ------------------------------------------------------------------------------------------------
# The library counterpart: every tl function checks its inputs (omicsbayes.tl._checks) before it
# fits, with one ValueError naming the column, matrix or parameter, and writes nothing.

FITS = {
    "rank_factor": lambda a, **kw: tl.rank_factor(
        a, kw.pop("label_key", "group"), variant="G-L-BSVM", n_factors=2, max_iter=3, **kw
    ),
    "bam": lambda a, **kw: tl.bam(a, kw.pop("label_key", "group"), max_iter=3, **kw),
    "bm2pca": lambda a, **kw: tl.bm2pca(a, kw.pop("label_key", "group"), n_components=2, **kw),
    "pfa": lambda a, **kw: tl.pfa(
        a, label_key=kw.pop("label_key", "group"), n_factors=2, n_iter=4, **kw
    ),
    "ibp_factor": lambda a, **kw: tl.ibp_factor(a, n_iter=4, **kw),
    "rflvm": lambda a, **kw: tl.rflvm(a, n_iter=4, n_latent=2, n_random_features=8, **kw),
}
LABELLED = ("rank_factor", "bam", "bm2pca", "pfa")


def planted(n=24, d=8, seed=0):
    """Two classes shifting the first three genes; counts in layers["counts"]."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = rng.normal(size=(n, d))
    X[:, :3] += 2.0 * y[:, None]
    obs = pd.DataFrame(
        {"group": pd.Categorical([f"g{c}" for c in y])}, index=[f"s{i}" for i in range(n)]
    )
    adata = ad.AnnData(X, obs=obs, var=pd.DataFrame(index=[f"gene{j}" for j in range(d)]))
    adata.layers["counts"] = rng.poisson(np.exp(1.0 + 0.3 * X)).astype(float)
    return adata


def refused(fit, adata, *expected, **kwargs):
    """``fit(adata)`` raises one one-line ValueError holding every ``expected`` and leaves
    ``adata`` as it was (nothing half-written)."""
    obs, uns, obsm = list(adata.obs.columns), set(adata.uns), set(adata.obsm)
    with pytest.raises(ValueError) as err:
        fit(adata, **kwargs)
    message = str(err.value)
    assert "\n" not in message, message
    for text in expected:
        assert text in message, f"{text!r} not in {message!r}"
    assert list(adata.obs.columns) == obs and set(adata.uns) == uns and set(adata.obsm) == obsm
    return message


def _constant(adata):
    adata.X[:] = 1.5
    adata.layers["counts"][:] = 3.0
    return adata


def _infinite(adata):
    adata.X[2, 3] = np.inf
    adata.layers["counts"][2, 3] = -np.inf
    return adata


MATRIX_CASES = {
    "infinite_value": (_infinite, ["1 infinite value(s)", "sample 's2', gene 'gene3'"]),
    "zero_genes": (lambda a: a[:, :0].copy(), ["0 genes"]),
    "zero_samples": (lambda a: a[:0].copy(), ["0 sample(s)", "at least 2"]),
    "one_sample": (lambda a: a[:1].copy(), ["1 sample(s)", "at least 2"]),
    "constant_X": (_constant, ["is constant", "vary across samples"]),
}


@pytest.mark.parametrize("case", sorted(MATRIX_CASES))
@pytest.mark.parametrize("name", sorted(FITS))
def test_tl_refuses_a_matrix_it_cannot_fit(name, case):
    make, expected = MATRIX_CASES[case]
    source = "adata.layers['counts']" if name == "pfa" else "adata.X"
    refused(FITS[name], make(planted()), f"tl.{name}", source, *expected)


@pytest.mark.parametrize("name", sorted(FITS))
def test_tl_refuses_a_matrix_where_an_anndata_belongs(name):
    X = planted().X
    with pytest.raises(TypeError, match=rf"tl\.{name}: adata is a numpy\.ndarray; expected an"):
        FITS[name](X)


def test_tl_mvgp_refuses_a_negative_ratio_that_is_not_a_positive_number():
    known = ad.AnnData(sp.csr_matrix(np.eye(6, 5) + np.eye(6, 5, k=1)))
    for ratio in (-1, 0, "2", True):
        refused(
            lambda a: tl.mvgp(a, model="PMF", negative_ratio=ratio),  # noqa: B023
            known,
            f"tl.mvgp: negative_ratio={ratio!r}; expected a number > 0",
        )


def test_mcmc_diagnostics_refuses_what_is_not_inference_data():
    from omicsbayes.models import IBPFactorModel

    model = IBPFactorModel(n_iter=4, random_state=0).fit(planted().X)
    with pytest.raises(TypeError, match="idata is a IBPFactorModel; expected an ArviZ"):
        tl.mcmc_diagnostics(model)  # the estimator, not its idata_
    assert tl.mcmc_diagnostics(None).empty


def test_tl_constant_x_message_says_how_it_is_constant():
    adata = planted()
    adata.X[:] = np.arange(adata.n_vars, dtype=float)  # each gene its own constant
    refused(FITS["bam"], adata.copy(), "each of its 8 genes has a single value")
    adata.X[:] = np.nan
    refused(FITS["ibp_factor"], adata, "every entry is NaN")


def test_tl_constant_genes_among_varying_ones_are_legal():
    adata = planted()
    adata.X[:, 0] = 4.0
    FITS["rank_factor"](adata)
    assert "rank_factor" in adata.uns


def test_tl_mvgp_refuses_an_empty_association_matrix():
    fit = lambda a: tl.mvgp(a, model="PMF")  # noqa: E731
    refused(fit, ad.AnnData(np.full((0, 5), np.nan)), "tl.mvgp", "shape (0, 5)", "at least 2 rows")
    refused(fit, ad.AnnData(np.full((4, 5), np.nan)), "tl.mvgp", "adata.X has no observed entry")


@pytest.fixture(scope="module")
def pbmc():
    """scanpy's bundled pbmc68k_reduced (700 cells x 765 genes; no network), counts as
    rint(expm1(.raw.X)) in layers["counts"]."""
    sc = pytest.importorskip("scanpy")
    adata = sc.datasets.pbmc68k_reduced()
    adata.layers["counts"] = np.rint(np.expm1(adata.raw.X.toarray()))
    return adata


@pytest.mark.parametrize("name", LABELLED)
def test_tl_refuses_a_continuous_label_column_before_fitting(pbmc, name):
    adata = pbmc.copy()
    start = time.perf_counter()
    refused(
        FITS[name],
        adata,
        ".obs['percent_mito'] looks continuous",
        "696 distinct values among 700",
        "allow_many_classes=True",
        label_key="percent_mito",
    )
    assert time.perf_counter() - start < 5  # the 462-task fit took 84 s


def test_tl_refuses_a_mostly_unique_integer_column(pbmc):
    refused(FITS["bam"], pbmc.copy(), ".obs['n_genes'] is mostly unique", label_key="n_genes")


def test_tl_allow_many_classes_lifts_the_continuity_check_only(pbmc):
    """Asked for explicitly, a continuous column passes the continuity check; its one-sample
    classes are still refused."""
    refused(
        FITS["rank_factor"],
        pbmc.copy(),
        "class(es) with fewer than 2 labelled samples",
        label_key="percent_mito",
        allow_many_classes=True,
    )
    adata = planted(n=24)
    adata.obs["dose"] = np.repeat(np.linspace(0.25, 3.0, 12), 2)  # 12 doses, 2 samples each
    refused(FITS["rank_factor"], adata.copy(), "looks continuous", label_key="dose")
    est = FITS["rank_factor"](adata, label_key="dose", allow_many_classes=True)
    assert est.n_tasks_ == 12


@pytest.mark.parametrize("name", LABELLED)
def test_tl_refuses_a_class_with_one_sample(name):
    adata = planted()
    adata.obs["group"] = adata.obs["group"].cat.add_categories("lone")
    adata.obs.iloc[0, 0] = "lone"
    refused(FITS[name], adata, ".obs['group']", "'lone' (1)", "at least 2")


def test_tl_refuses_a_binary_task_column_with_one_positive():
    adata = planted()
    adata.obs["task"] = np.where(np.arange(adata.n_obs) == 3, 1.0, 0.0)
    refused(FITS["rank_factor"], adata, ".obs['task']", "'1.0' (1)", label_key=["task"])


def test_tl_nan_strings_are_missing_labels_like_nan(pbmc):
    """Labels from astype(str) ("nan", "None", "") are unlabelled samples, exactly as NaN: the
    fit is the same and no task is named "nan"; the models that need every label refuse them."""
    adata = pbmc[:, :40].copy()
    adata.obs["cell"] = adata.obs["bulk_labels"].astype(object)
    adata.obs.iloc[:30, adata.obs.columns.get_loc("cell")] = np.nan
    adata.obs["cell_str"] = adata.obs["cell"].astype(str)  # NaN -> "nan"
    adata.obs.iloc[:3, adata.obs.columns.get_loc("cell_str")] = "None"
    adata.obs.iloc[3:6, adata.obs.columns.get_loc("cell_str")] = ""
    with pytest.warns(UserWarning, match=r"\.obs\['cell_str'\] has 30 labels that are strings"):
        by_string = FITS["rank_factor"](adata, label_key="cell_str", key_added="by_string")
    by_nan = FITS["rank_factor"](adata, label_key="cell", key_added="by_nan")
    assert "nan" not in list(adata.uns["by_string"]["tasks"])
    assert list(adata.uns["by_string"]["tasks"]) == list(adata.uns["by_nan"]["tasks"])
    np.testing.assert_array_equal(by_string.coef_, by_nan.coef_)
    with pytest.warns(UserWarning, match="strings meaning missing"):
        refused(FITS["bam"], adata, ".obs['cell_str'] has 30 missing labels", label_key="cell_str")


@pytest.fixture
def small_machine(monkeypatch):
    """A machine with 4 GiB of memory, 2 GiB available."""
    monkeypatch.setattr(tl_checks, "machine_memory", lambda: (4 * 2**30, 2 * 2**30))


MEMORY_CASES = {
    "rank_factor": (dict(n_factors=10**6), "n_factors=1000000"),
    "pfa": (dict(n_factors=10**6), "n_factors=1000000"),
    "rflvm": (dict(n_latent=10**6), "n_latent=1000000"),
    "ibp_factor": (dict(n_init_features=10**6), "n_init_features=1000000"),
}


@pytest.mark.parametrize("name", sorted(MEMORY_CASES))
def test_tl_refuses_a_factor_count_beyond_memory_before_allocating(pbmc, name, small_machine):
    params, cause = MEMORY_CASES[name]
    adata = pbmc.copy()
    fit = {
        "rank_factor": lambda a: tl.rank_factor(a, "bulk_labels", variant="G-L-BSVM", **params),
        "pfa": lambda a: tl.pfa(a, label_key=None, **params),
        "rflvm": lambda a: tl.rflvm(a, **params),
        "ibp_factor": lambda a: tl.ibp_factor(a, **params),
    }[name]
    start = time.perf_counter()
    refused(fit, adata, f"tl.{name}", cause, "needs at least", "has 4.0 GiB, 2.0 GiB available")
    assert time.perf_counter() - start < 5


def test_tl_bam_and_mvgp_refuse_what_their_square_matrices_would_take(small_machine):
    adata = planted(n=20_000, d=3)  # the kernel map alone: 20,000^2 x 8 bytes = 3 GiB
    refused(FITS["bam"], adata, "tl.bam", "20000 x 20000", "fit on fewer samples")
    entries = np.arange(50)
    M = sp.csr_matrix((np.ones(50), (entries, entries)), shape=(30_000, 20_000))
    refused(lambda a: tl.mvgp(a, model="PMF"), ad.AnnData(M), "30000 rows x 20000 columns")


def test_memory_estimates_of_default_fits_are_modest(pbmc):
    """The lower bounds leave ordinary fits alone: the defaults on pbmc68k stay under 100 MB."""
    from omicsbayes import models

    for cls in ("RankFactorClassifier", "PoissonFactorAnalysis", "RFLVM", "IBPFactorModel"):
        n_bytes, _, _ = tl_checks.fit_bytes(getattr(models, cls)(), *pbmc.shape)
        assert 0 < n_bytes < 100e6, cls
    total, available = tl_checks.machine_memory()
    assert 0 < available <= total


def test_bm2pca_warns_when_it_caps_the_components():
    adata = planted(d=5)
    with pytest.warns(UserWarning, match=r"n_components=20 is more than the 5 features"):
        est = tl.bm2pca(adata, "group", n_components=20, max_iter=3)
    assert est.n_components_ == 5
