"""Fit files: every estimator round-trips with identical outputs; crafted, corrupt, truncated or
padded files and other major versions are refused with one message, and nothing in them runs."""

import io
import json
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import arviz as az
import numpy as np
import pytest
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import make_pipeline

from omicsbayes import models
from omicsbayes.io import FitFileError, load_fit, read_header, save_draws, save_fit
from omicsbayes.io import fits as fits_module
from omicsbayes.preprocess import STEPS, EmpiricalKernelMap, TopGenes, ZScore

FIXTURES = Path(__file__).parent / "fixtures" / "fits"
RNG = np.random.default_rng(0)
X_TRAIN, X_NEW = RNG.normal(size=(30, 6)), RNG.normal(size=(7, 6))
Y_TRAIN = (X_TRAIN[:, 0] + 0.3 * RNG.normal(size=30) > 0).astype(int)
Y3 = np.arange(30) % 3
COUNTS, COUNTS_NEW = RNG.poisson(3.0, size=(30, 6)), RNG.poisson(3.0, size=(7, 6))
MASK = RNG.uniform(size=(30, 6)) < 0.15
ENTRIES = (RNG.integers(0, 12, 40), RNG.integers(0, 9, 40), RNG.normal(size=40), (12, 9))
Q_ROWS, Q_COLS = np.array([0, 3, 11]), np.array([8, 1, 4])


def _x_calls(*methods):
    return [(m, (X_NEW,)) for m in methods]


# name -> (estimator, fit arguments, [(method, arguments)] compared before and after saving)
CASES = {
    "RankFactorClassifier": (
        models.RankFactorClassifier(n_factors=2, max_iter=15, random_state=0),
        (X_TRAIN, Y3),
        _x_calls("decision_function", "predict", "transform"),
    ),
    "PoissonFactorAnalysis": (
        models.PoissonFactorAnalysis(n_factors=3, n_iter=12, burn_in=6, random_state=0),
        (np.where(MASK, np.nan, COUNTS),),
        [
            ("transform", (COUNTS_NEW,)),
            ("log_likelihood", (COUNTS, MASK)),
            ("perplexity", (COUNTS, MASK)),
        ],
    ),
    "PFAClassifier": (
        models.PFAClassifier(n_factors=3, n_iter=12, burn_in=6, svm_max_iter=20, random_state=0),
        (COUNTS, Y_TRAIN),
        [("decision_function", (COUNTS_NEW,)), ("predict", (COUNTS_NEW,))],
    ),
    "BayesianProbitClassifier": (
        models.BayesianProbitClassifier(max_iter=20, random_state=0),
        (X_TRAIN, Y_TRAIN),
        _x_calls("decision_function", "predict", "predict_proba"),
    ),
    "BAMClassifier": (
        models.BAMClassifier(ranking="pairwise", max_iter=20, random_state=0),
        (X_TRAIN, Y_TRAIN),
        _x_calls("decision_function", "predict"),
    ),
    "RFLVM": (
        models.RFLVM(n_iter=8, burn_in=4, n_random_features=4, hmc_leapfrog=4, random_state=0),
        (np.where(MASK, np.nan, X_TRAIN),),
        [("log_likelihood", (X_TRAIN, MASK))],
    ),
    "IBPFactorModel": (
        models.IBPFactorModel(n_iter=10, burn_in=5, random_state=0),
        (np.where(MASK, np.nan, X_TRAIN),),
        [("log_likelihood", (X_TRAIN, MASK))],
    ),
    "BM2PCAClassifier": (
        models.BM2PCAClassifier(n_components=2, max_iter=20, random_state=0),
        (X_TRAIN, Y3),
        _x_calls("decision_function", "predict", "transform"),
    ),
    "BM2PCARegressor": (
        models.BM2PCARegressor(n_components=2, max_iter=20, random_state=0),
        (X_TRAIN, X_TRAIN[:, 0]),
        _x_calls("predict", "transform"),
    ),
}
for _name, _est in (
    ("ConstrainedMVGP", models.ConstrainedMVGP(lam=0.1, max_rank=3, random_state=0)),
    ("TraceGP", models.TraceGP(lam=0.1, max_rank=3, random_state=0)),
    ("MVGP", models.MVGP(sigma2=0.5)),
    ("KPMF", models.KPMF(rank=2, max_iter=50, random_state=0)),
    ("PMF", models.PMF(rank=2, max_iter=50, random_state=0)),
    ("ProDiGe", models.ProDiGe(C=1.0)),
):
    CASES[_name] = (_est, ENTRIES, [("predict", (Q_ROWS, Q_COLS)), ("predict_rows", ())])
for _name, _est in (
    ("LogisticBaseline", models.LogisticBaseline()),
    ("LinearSVMBaseline", models.LinearSVMBaseline()),
    ("FullSVM", models.FullSVM()),
    ("PCASVM", models.PCASVM(n_components=2)),
    ("LDASVM", models.LDASVM()),
):
    CASES[_name] = (_est, (X_TRAIN, Y3), _x_calls("decision_function", "predict"))


# the composites tl.bam returns, with omicsbayes preprocessing steps in front
CASES["Pipeline"] = (
    make_pipeline(ZScore(), TopGenes(n=4, by="variance"), models.BAMClassifier(max_iter=10)),
    (X_TRAIN, Y_TRAIN),
    _x_calls("decision_function", "predict"),
)
CASES["OneVsRestClassifier"] = (
    OneVsRestClassifier(
        make_pipeline(EmpiricalKernelMap("gaussian"), models.BAMClassifier(max_iter=10))
    ),
    (X_TRAIN, Y3),
    _x_calls("decision_function", "predict"),
)


def test_every_estimator_a_fit_file_can_hold_has_a_round_trip_case():
    assert set(models.__all__) <= {name.rsplit(".", 1)[1] for name in fits_module.ESTIMATORS}
    assert set(CASES) == {name.rsplit(".", 1)[1] for name in fits_module.ESTIMATORS}


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip_gives_identical_outputs(name, tmp_path):
    estimator, fit_args, calls = CASES[name]
    estimator.fit(*fit_args)
    before = {method: getattr(estimator, method)(*args) for method, args in calls}
    path = save_fit(estimator, tmp_path / f"{name}.obfit")
    loaded = load_fit(path)
    assert type(loaded) is type(estimator)
    assert str(loaded.get_params()) == str(estimator.get_params())
    for method, args in calls:
        after = getattr(loaded, method)(*args)
        np.testing.assert_array_equal(np.asarray(after), np.asarray(before[method]), err_msg=method)


# parameters a step needs on the 6-gene test matrix; every other step takes its defaults
STEP_PARAMS = {"top_genes": {"n": 4}}
POSITIVE, POSITIVE_NEW = COUNTS + 1, COUNTS_NEW + 1  # median of ratios needs positive genes


@pytest.mark.parametrize("step", sorted(STEPS))
def test_every_preprocessing_step_round_trips_in_a_pipeline(step, tmp_path):
    pipeline = make_pipeline(STEPS[step](**STEP_PARAMS.get(step, {})), models.LogisticBaseline())
    pipeline.fit(POSITIVE, Y_TRAIN)
    loaded = load_fit(save_fit(pipeline, tmp_path / f"{step}.obfit"))
    assert type(loaded[0]) is STEPS[step]
    np.testing.assert_array_equal(
        loaded[0].transform(POSITIVE_NEW), pipeline[0].transform(POSITIVE_NEW)
    )
    np.testing.assert_array_equal(
        loaded.decision_function(POSITIVE_NEW), pipeline.decision_function(POSITIVE_NEW)
    )


class _Halve(ZScore):
    """A step the tests register: z-scores halved."""

    def transform(self, X):
        return super().transform(X) / 2


def test_a_step_registered_in_steps_is_trusted_and_one_outside_is_refused(monkeypatch, tmp_path):
    from sklearn.preprocessing import MinMaxScaler

    def pipeline(step):
        return make_pipeline(step, models.LogisticBaseline()).fit(X_TRAIN, Y_TRAIN)

    with pytest.raises(TypeError, match=r"Pipeline\.steps\[0\]\[1\] holds a .*\._Halve, which"):
        save_fit(pipeline(_Halve()), tmp_path / "unregistered.obfit")
    with pytest.raises(TypeError, match=r"holds a sklearn\.preprocessing\._data\.MinMaxScaler"):
        save_fit(pipeline(MinMaxScaler()), tmp_path / "minmax.obfit")

    monkeypatch.setitem(STEPS, "halve", _Halve)
    assert fits_module.trusted_classes()["omicsbayes.preprocess._Halve"] is _Halve
    fitted = pipeline(_Halve())
    loaded = load_fit(save_fit(fitted, tmp_path / "halve.obfit"))
    np.testing.assert_array_equal(loaded.decision_function(X_NEW), fitted.decision_function(X_NEW))
    monkeypatch.delitem(STEPS, "halve")
    with pytest.raises(FitFileError, match=r"class 'omicsbayes\.preprocess\._Halve' is not one"):
        load_fit(tmp_path / "halve.obfit")


def test_draws_go_to_netcdf(tmp_path):
    est = models.IBPFactorModel(n_iter=10, burn_in=5, random_state=0).fit(X_TRAIN)
    path = save_draws(est, tmp_path / "draws.nc")
    back = az.from_netcdf(path)
    np.testing.assert_array_equal(back.posterior["alpha"], est.idata_.posterior["alpha"])
    with pytest.raises(ValueError, match="BAMClassifier keeps no MCMC draws"):
        save_draws(models.BAMClassifier(max_iter=5).fit(X_TRAIN, Y_TRAIN), tmp_path / "x.nc")


def _rewrite(path, out, replace=None, drop=(), add=None, document=None):
    """Copy the fit file ``path`` to ``out`` with members replaced, dropped or added."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename in drop:
                continue
            data = (replace or {}).get(info.filename, src.read(info.filename))
            if info.filename == "fit.json" and document is not None:
                data = json.dumps(document(json.loads(data)))
            dst.writestr(info.filename, data)
        for name, data in (add or {}).items():
            dst.writestr(name, data)
    return out


def _with_attribute(path, out, node):
    """A copy of the fit file whose estimator has one attribute ``x``, the JSON ``node``."""

    def document(d):
        return dict(d, estimator=dict(d["estimator"], attributes={"x": node}))

    return _rewrite(path, out, document=document)


class _Touch:
    """Unpickling this creates ``path``: the marker a malicious pickle would leave."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


@pytest.fixture(scope="module")
def bam_fit(tmp_path_factory):
    est = models.BAMClassifier(max_iter=5).fit(X_TRAIN, Y_TRAIN)
    return est, save_fit(est, tmp_path_factory.mktemp("fits") / "bam.obfit")


def test_the_file_is_json_and_arrays_only(bam_fit):
    est, path = bam_fit
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        document = json.loads(archive.read("fit.json"))
    assert names[0] == "fit.json" and all(n.endswith(".npy") for n in names[1:])
    assert document["class"] == "omicsbayes.models.BAMClassifier"
    assert document["params"]["max_iter"] == 5 and document["n_features_in"] == 6
    header = read_header(path)
    assert header["omicsbayes"] == fits_module.__version__ and "estimator" not in header
    again = save_fit(est, path.with_name("again.obfit"))
    assert again.read_bytes() == path.read_bytes()  # the same fit, the same bytes


def test_a_crafted_file_runs_nothing_and_is_refused(bam_fit, tmp_path):
    _, path = bam_fit
    marker = tmp_path / "marker"
    evil = io.BytesIO()
    np.save(evil, np.array([_Touch(marker)], dtype=object), allow_pickle=True)
    crafted = {
        "pickled array": _rewrite(
            path, tmp_path / "a.obfit", replace={"arrays/0.npy": evil.getvalue()}
        ),
        "class outside the list": _with_attribute(
            path, tmp_path / "b.obfit", {"$": "object", "class": "posix.system", "attributes": {}}
        ),
        "unhashable key": _with_attribute(
            path,
            tmp_path / "d.obfit",
            {"$": "dict", "items": [[{"$": "tuple", "items": [[1]]}, 2]]},
        ),
        "bad scalar": _with_attribute(
            path, tmp_path / "e.obfit", {"$": "scalar", "dtype": "<f8", "value": "abc"}
        ),
        "unknown kind": _with_attribute(path, tmp_path / "f.obfit", {"$": "eval", "value": "1"}),
        "extra member": _rewrite(
            path, tmp_path / "c.obfit", add={"payload.pkl": pickle.dumps(_Touch(marker))}
        ),
    }
    old = tmp_path / "old.joblib"  # the pickle format omicsbayes wrote before format 2
    old.write_bytes(pickle.dumps({"format": "omicsbayes-fit"}) + pickle.dumps(_Touch(marker)))
    crafted["old pickle format"] = old
    for what, file in crafted.items():
        with pytest.raises(
            FitFileError, match=rf"{file.name}: not a valid omicsbayes fit file"
        ) as err:
            load_fit(file)
        assert "Nothing from it was run" in str(err.value), what
    assert not marker.exists()
    pickle.loads(pickle.dumps(_Touch(marker)))  # the payload works: loading it would have run it
    assert marker.exists()


def test_corrupt_truncated_and_padded_files_are_refused_naming_the_file(bam_fit, tmp_path):
    _, path = bam_fit
    data = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("arrays/0.npy")
    middle = info.header_offset + 60  # inside the first array's compressed bytes
    flipped = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
    files = {
        "truncated": data[: len(data) // 2],
        "junk after the end": data + pickle.dumps([1, 2, 3]),
        "junk before": b"junk" + data,
        "corrupt": flipped,
        "empty": b"",
        "text": b"a\tb\n1\t2\n",
    }
    for what, content in files.items():
        file = tmp_path / f"{what.replace(' ', '_')}.obfit"
        file.write_bytes(content)
        with pytest.raises(FitFileError, match=rf"{file.name}: not a valid omicsbayes fit file"):
            load_fit(file)
    with pytest.raises(FitFileError, match="cannot read the fit file"):
        load_fit(tmp_path / "missing.obfit")
    dropped = _rewrite(path, tmp_path / "dropped.obfit", drop={"arrays/0.npy"})
    with pytest.raises(FitFileError, match="arrays/0.npy"):
        load_fit(dropped)


def test_same_major_loads_another_major_or_newer_format_is_refused(bam_fit, tmp_path):
    est, path = bam_fit
    later = _rewrite(path, tmp_path / "later.obfit", document=lambda d: dict(d, omicsbayes="0.9.3"))
    np.testing.assert_array_equal(
        load_fit(later).decision_function(X_NEW), est.decision_function(X_NEW)
    )
    major = _rewrite(path, tmp_path / "major.obfit", document=lambda d: dict(d, omicsbayes="1.0.0"))
    with pytest.raises(FitFileError, match=r"saved by omicsbayes 1\.0\.0 .*this is omicsbayes 0\."):
        load_fit(major)
    newer = _rewrite(path, tmp_path / "newer.obfit", document=lambda d: dict(d, format_version=99))
    with pytest.raises(FitFileError, match=r"fit file format 99\); this is .*\(format 3\)"):
        load_fit(newer)


def test_a_fit_file_of_this_release_keeps_loading():
    """The file in tests/fixtures/fits was written by omicsbayes 0.1.0; every 0.x must read it
    and predict the decision values stored beside it."""
    est = load_fit(FIXTURES / "rank_factor_0.1.0.obfit")
    expected = np.load(FIXTURES / "rank_factor_0.1.0.decision.npy")
    np.testing.assert_array_equal(est.decision_function(X_NEW[:, :5]), expected)
    assert read_header(FIXTURES / "rank_factor_0.1.0.obfit")["feature_names"] == [
        f"g{j}" for j in range(5)
    ]


def test_a_pfa_fit_saved_with_the_gibbs_transform_loads_and_transforms():
    """tests/fixtures/fits/make_pfa.py saved a PoissonFactorAnalysis whose transform was a
    per-sample Gibbs fold-in (the file holds its seed, ``_transform_seed``, which the VB fold-in
    does not read); it loads, and its scores of new samples agree with that transform's 4000
    sweeps: each within 5 % (mean-field VB's gap and Monte Carlo error), the totals within 1 %."""
    rng = np.random.default_rng(0)  # the draws of make_pfa.py
    phi = rng.dirichlet(np.full(8, 0.3), size=2).T
    rng.poisson(rng.gamma(2.0, 15.0, size=(24, 2)) @ phi.T)
    new = rng.poisson(rng.gamma(2.0, 15.0, size=(5, 2)) @ phi.T).astype(float)
    new[1, 3] = np.nan
    est = load_fit(FIXTURES / "pfa_gibbs_transform_0.1.0.obfit")
    gibbs = np.load(FIXTURES / "pfa_gibbs_transform_0.1.0.gibbs_scores.npy")
    assert hasattr(est, "_transform_seed")
    scores = est.transform(new)
    np.testing.assert_allclose(scores, gibbs, rtol=0.05)
    np.testing.assert_allclose(scores.sum(1), gibbs.sum(1), rtol=0.01)
    np.testing.assert_array_equal(est.transform(new), scores)


def test_draws_come_back_identical(tmp_path):
    est = models.PoissonFactorAnalysis(n_factors=2, n_iter=8, burn_in=4, random_state=0).fit(COUNTS)
    back = load_fit(save_fit(est, tmp_path / "pfa.obfit"))
    for group in est.idata_.groups():
        assert getattr(back.idata_, group).identical(getattr(est.idata_, group)), group


def test_refuses_what_it_cannot_save(tmp_path):
    with pytest.raises(ValueError, match="not fitted"):
        save_fit(models.BAMClassifier(), tmp_path / "unfitted.obfit")
    from sklearn.linear_model import Ridge

    with pytest.raises(TypeError, match="Ridge is not an estimator a fit file can hold"):
        save_fit(Ridge().fit(X_TRAIN, Y_TRAIN), tmp_path / "ridge.obfit")
    est = models.BAMClassifier(max_iter=5).fit(X_TRAIN, Y_TRAIN)
    est.extra_ = lambda: None
    with pytest.raises(TypeError, match=r"BAMClassifier\.extra_ holds a builtins\.function"):
        save_fit(est, tmp_path / "lambda.obfit")
    assert not (tmp_path / "lambda.obfit").exists()


@pytest.mark.workflow
def test_workflow_saves_the_whole_cohort_fit_draws_and_diagnostics(tmp_path, snakemake_run):
    import anndata as ad
    import pandas as pd

    config = {
        "seed": 3,
        "cohorts": {
            "digits": {
                "format": "demo",
                "name": "digits",
                "label": "digit",
                "keep_labels": ["3", "5", "8"],
            }
        },
        "transforms": {"zscore": {"steps": ["zscore"]}},
        "protocols": {"cv3": {"type": "stratified_kfold", "n_splits": 3}},
        "models": {
            "R-L-BSVM": {
                "class": "RankFactorClassifier",
                "variant": "R-L-BSVM",
                "params": {
                    "n_factors": 3,
                    "inference": "gibbs",
                    "n_samples": 20,
                    "burn_in": 10,
                    "max_iter": 5,
                },
            },
        },
        "experiments": {
            "digits_ovr": {
                "cohort": "digits",
                "task": {"kind": "one_vs_rest"},
                "transforms": ["zscore"],
                "models": ["R-L-BSVM"],
                "protocol": "cv3",
                "figures": ["R-L-BSVM"],
            }
        },
    }
    folder = "results/digits_ovr/model_figures/R-L-BSVM"
    targets = [f"{folder}/trace.png", f"{folder}/draws.nc", "results/digits_ovr/diagnostics.tsv"]
    result = snakemake_run(tmp_path, "--cores", "2", *targets, config=config)
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "results/digits_ovr/model_figures/R-L-BSVM"
    fitted = ad.read_h5ad(out / "fit.h5ad")
    assert fitted.obsm["X_rank_factor"].shape == (539, 3)
    decision = fitted.obs[[f"rank_factor_decision_task:{d}" for d in "358"]].to_numpy()
    np.testing.assert_allclose(load_fit(out / "fit.obfit").decision_function(fitted.X), decision)
    draws = az.from_netcdf(out / "draws.nc")
    assert draws.posterior.sizes["draw"] == 20 and "train_decision" in draws.posterior
    table = pd.read_csv(tmp_path / "results/digits_ovr/diagnostics.tsv", sep="\t")
    assert set(table["variable"]) >= {"train_decision", "log_pseudo_likelihood"}
    assert (table["model"] == "R-L-BSVM").all() and (table["n_draws"] == 20).all()
    assert table["r_hat"].notna().all()  # one chain: split R-hat within the chain
    assert (out / "trace.png").stat().st_size > 5000


def test_fit_files_sit_below_tl():
    """io.fits reads and writes fits without importing omicsbayes.tl (tl imports io, not back)."""
    code = (
        "import sys, omicsbayes.io as io; "
        "io.load_fit(sys.argv[1]); "
        "assert not [m for m in sys.modules if m.startswith('omicsbayes.tl')]"
    )
    fit = FIXTURES / "rank_factor_0.1.0.obfit"
    result = subprocess.run([sys.executable, "-c", code, str(fit)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_format_2_ibp_file_loads_with_loadings_as_genes_by_features(tmp_path):
    """Format 2 stored IBPFactorModel.loadings_ as latent features x genes; loading such a file
    gives the genes x features layout of this format, the other attributes unchanged."""
    from omicsbayes.models import IBPFactorModel

    Y = np.random.default_rng(0).normal(size=(20, 7))
    est = IBPFactorModel(n_iter=6, random_state=0, verbose=False).fit(Y)
    assert est.loadings_.shape[0] == Y.shape[1]
    path = save_fit(est, tmp_path / "ibp.obfit")
    with zipfile.ZipFile(path) as archive:
        entry = json.loads(archive.read("fit.json"))["estimator"]["attributes"]["loadings_"][
            "entry"
        ]
    old = io.BytesIO()
    np.save(old, est.loadings_.T, allow_pickle=False)
    format_2 = _rewrite(
        path,
        tmp_path / "ibp_format2.obfit",
        replace={entry: old.getvalue()},
        document=lambda d: dict(d, format_version=2),
    )
    loaded = load_fit(format_2)
    np.testing.assert_array_equal(loaded.loadings_, est.loadings_)
    np.testing.assert_array_equal(loaded.latent_, est.latent_)
    np.testing.assert_array_equal(load_fit(path).loadings_, est.loadings_)
