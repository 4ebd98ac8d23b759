"""The omicsbayes command: help, fit on small files (log lines or a bar), predict on a new cohort
from a fit file, every command-line fault as one line before any fit, run on a tiny config."""

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import anndata as ad
import arviz as az
import numpy as np
import pandas as pd
import pytest
import yaml

from omicsbayes import cli, jobs
from omicsbayes.io import load_fit

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def omicsbayes(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "omicsbayes.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=ENV,
        timeout=600,
    )


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    rng = np.random.default_rng(0)
    y = np.arange(40) % 2
    X = rng.normal(size=(40, 12)) + 1.5 * y[:, None] * (np.arange(12) < 4)
    adata = ad.AnnData(
        X,
        obs=pd.DataFrame(
            {"disease": np.where(y, "case", "control")}, index=[f"s{i}" for i in range(40)]
        ),
        var=pd.DataFrame(index=[f"g{j}" for j in range(12)]),
    )
    adata.layers["counts"] = rng.poisson(np.exp(1 + 0.4 * X))
    adata.var["hv"] = np.arange(12) % 4 != 3
    path = tmp_path_factory.mktemp("cli") / "cohort.h5ad"
    adata.write_h5ad(path)
    return path


def test_help_lists_every_model_and_the_formats():
    result = omicsbayes("--help")
    assert result.returncode == 0
    for name in cli.models():
        assert name in result.stdout
    for fmt in ("*.h5ad", "demo:NAME", "--save-fit", "--draws"):
        assert fmt in result.stdout


def test_fit_writes_the_cohort_and_a_fit_that_reloads(cohort, tmp_path):
    out, fit = tmp_path / "fit.h5ad", tmp_path / "fit.obfit"
    result = omicsbayes(
        "fit",
        cohort,
        "--model",
        "G-L-BSVM",
        "--label",
        "disease",
        "--param",
        "n_factors=2",
        "--param",
        "max_iter=20",
        "-o",
        out,
        "--save-fit",
        fit,
    )
    assert result.returncode == 0, result.stderr
    assert "INFO omicsbayes: RankFactorClassifier VB iteration" in result.stderr  # log lines
    adata = ad.read_h5ad(out)
    assert adata.obsm["X_rank_factor"].shape == (40, 2)
    assert adata.uns["rank_factor"]["params"]["n_factors"] == 2
    np.testing.assert_allclose(
        load_fit(fit).decision_function(adata.X), adata.obs["rank_factor_decision"]
    )


def test_fit_on_a_layer_with_draws(cohort, tmp_path):
    result = omicsbayes(
        "fit",
        cohort,
        "--model",
        "PFA",
        "--layer",
        "counts",
        "--param",
        "n_factors=2",
        "--param",
        "n_iter=10",
        "--param",
        "burn_in=5",
        "-o",
        tmp_path / "pfa.h5ad",
        "--draws",
        tmp_path / "draws.nc",
    )
    assert result.returncode == 0, result.stderr
    draws = az.from_netcdf(tmp_path / "draws.nc")
    assert draws.posterior.sizes["draw"] == 5
    assert "diagnostics" in ad.read_h5ad(tmp_path / "pfa.h5ad").uns["pfa"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--model", "BAM_L", "--label", "diseas"], "label column 'diseas' is not in"),
        (["--model", "BAM_L"], "--model BAM_L needs --label COLUMN"),
        (["--model", "PFA", "--label", "disease"], "--model PFA takes no labels"),
        (["--model", "BAM", "--label", "disease"], "invalid choice: 'BAM'"),
        (["--model", "BAM_L", "--label", "disease", "--param", "x"], "expected KEY=VALUE"),
        (
            ["--model", "BAM_L", "--label", "disease", "--param", "max_iter=[1,2"],
            "--param 'max_iter=[1,2': the value of max_iter is not YAML",
        ),
        (["--model", "BAM_L", "--label", "disease", "--layer", "norm"], "layer 'norm' is not"),
        (["--model", "BAM_P", "--label", "disease", "--param", "variant=BAM_L"], "fixes variant"),
    ],
)
def test_fit_refuses_with_one_clear_message(cohort, tmp_path, args, message):
    result = omicsbayes("fit", cohort, *args, "-o", tmp_path / "x.h5ad")
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "x.h5ad").exists()


FIT = ["fit", "--label", "disease"]


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--model", "G-L-BSVM", "--param", "n_factor=2"],
            "RankFactorClassifier has no parameter 'n_factor'; did you mean 'n_factors'?",
        ),
        (
            ["--model", "BAM_L", "--param", "n_factors=2"],
            "BAMClassifier has no parameter 'n_factors'",
        ),
        (
            ["--model", "G-L-BSVM", "--param", "n_factors=0"],
            "The 'n_factors' parameter of RankFactorClassifier must be an int",
        ),
        (["--model", "G-L-BSVM", "--param", "layer=counts"], "set layer with --layer, not --param"),
        (["--model", "RankFactorClassifier", "--param", "variant=G-X"], "unknown variant 'G-X'"),
        (
            ["--model", "G-L-BSVM", "--draws", "{tmp}/d.nc"],
            "--draws: --model G-L-BSVM with these parameters is not an MCMC fit",
        ),
        (
            ["--model", "BAM_L", "--draws", "{tmp}/d.nc"],
            "--model BAM_L with these parameters is not an MCMC fit",
        ),
        (["--model", "G-L-BSVM", "--save-fit", "{tmp}/x.h5ad"], "-o and --save-fit both write"),
        (["--model", "G-L-BSVM", "--save-fit", "{tmp}"], "--save-fit {tmp}: is a folder"),
        (
            ["--model", "G-L-BSVM", "--save-fit", "{tmp}/a_file/fit.obfit"],
            "a_file is a file, not a folder",
        ),
    ],
)
def test_command_line_faults_are_one_line_before_any_fit(
    cohort, tmp_path, monkeypatch, args, message
):
    (tmp_path / "a_file").write_text("x")
    fitted = []
    monkeypatch.setattr(cli, "read_input", lambda *a: fitted.append(a))  # never reached
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    with pytest.raises(SystemExit) as exit:
        cli.main([*FIT[:1], str(cohort), *FIT[1:], *args, "-o", str(tmp_path / "x.h5ad")])
    assert message.replace("{tmp}", str(tmp_path)) in str(exit.value.code)
    assert "\n" not in str(exit.value.code) and not fitted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_an_error_of_the_fit_is_one_line(cohort, tmp_path, monkeypatch):
    from omicsbayes import tl

    def fails(*args, **kwargs):
        raise ValueError("the first line\nthe second line")

    monkeypatch.setattr(tl, "rank_factor", fails)
    out = tmp_path / "x.h5ad"
    with pytest.raises(SystemExit) as exit:
        cli.main(["fit", str(cohort), "--model", "G-L-BSVM", "--label", "disease", "-o", str(out)])
    assert exit.value.code == "omicsbayes fit: the first line the second line"
    assert not out.exists()


def test_mask_var_on_an_association_model_is_refused(cohort, tmp_path):
    with pytest.raises(SystemExit, match="--mask-var does not apply to --model PMF"):
        cli.main(
            [
                "fit",
                str(cohort),
                "--model",
                "PMF",
                "--mask-var",
                "hv",
                "-o",
                str(tmp_path / "x.h5ad"),
            ]
        )


def test_help_says_how_to_get_the_dense_rflvm():
    result = omicsbayes("fit", "--help")
    assert "dense RFLVM: --model RFLVM --param sparse=false" in " ".join(result.stdout.split())


def test_outputs_go_into_new_folders_together(cohort, tmp_path):
    out = tmp_path / "new" / "deeper"
    result = omicsbayes(
        "fit", cohort, "--model", "PFA", "--layer", "counts", "--param", "n_factors=2", "--param",
        "n_iter=6", "--param", "burn_in=3", "-o", out / "pfa.h5ad", "--save-fit",
        tmp_path / "fits" / "pfa.obfit", "--draws", tmp_path / "draws" / "pfa.nc",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (out / "pfa.h5ad").is_file() and (tmp_path / "draws" / "pfa.nc").is_file()
    assert load_fit(tmp_path / "fits" / "pfa.obfit").idata_.posterior.sizes["draw"] == 3


def test_a_failing_output_leaves_none_of_them_and_outputs_follow_the_umask(tmp_path, monkeypatch):
    def fail(tmp):
        raise OSError("disk full")

    def one(tmp):
        Path(tmp).write_text("1")

    with pytest.raises(OSError, match="disk full"):
        jobs.atomic_write_all([(tmp_path / "a" / "one.h5ad", one), (tmp_path / "two.obfit", fail)])
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []
    monkeypatch.setattr(jobs, "_UMASK", 0o027)  # the command's outputs, as every job's
    jobs.atomic_write_all([(tmp_path / "a" / "one.h5ad", one), (tmp_path / "two.obfit", one)])
    assert {p.name: p.stat().st_mode & 0o777 for p in tmp_path.rglob("*") if p.is_file()} == {
        "one.h5ad": 0o640,
        "two.obfit": 0o640,
    }


def test_predict_scores_a_new_cohort_by_gene_name(cohort, tmp_path):
    fit = tmp_path / "fit.obfit"
    result = omicsbayes(
        "fit", cohort, "--model", "BPROBIT", "--label", "disease", "--mask-var", "hv", "--param",
        "max_iter=20", "-o", tmp_path / "train.h5ad", "--save-fit", fit,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    train = ad.read_h5ad(cohort)
    new = train[5:25, ::-1].copy()  # other samples, genes in reverse order
    new.write_h5ad(tmp_path / "new.h5ad")
    result = omicsbayes(
        "predict", tmp_path / "new.h5ad", "--fit", fit, "-o", tmp_path / "out" / "scored.h5ad"
    )
    assert result.returncode == 0, result.stderr
    scored = ad.read_h5ad(tmp_path / "out" / "scored.h5ad")
    X = train[5:25, train.var["hv"].to_numpy()].X
    np.testing.assert_allclose(scored.obs["bam_decision"], load_fit(fit).decision_function(X))
    assert scored.uns["bam"]["fit"] == str(fit) and scored.uns["bam"]["n_genes_used"] == 9
    new[:, :4].copy().write_h5ad(tmp_path / "few.h5ad")
    truncated = tmp_path / "truncated.obfit"
    truncated.write_bytes(fit.read_bytes()[:-40])
    for args, message in (
        (
            ["few.h5ad", "--fit", fit],
            "tl.predict: 6 of the fit's 9 genes are not in adata.var_names",
        ),
        (["new.h5ad", "--fit", truncated], "truncated.obfit: not a valid omicsbayes fit file"),
    ):
        result = omicsbayes("predict", *args, "-o", tmp_path / "never.h5ad", cwd=tmp_path)
        assert result.returncode != 0 and message in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "never.h5ad").exists()


def test_fit_shows_a_bar_on_a_terminal(cohort, tmp_path):
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 0 wide: no bar
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "omicsbayes.cli",
            "fit",
            str(cohort),
            "--model",
            "G-L-BSVM",
            "--label",
            "disease",
            "--param",
            "max_iter=20",
            "-o",
            str(tmp_path / "t.h5ad"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=child,
        env=dict(ENV, TQDM_DELAY="0"),  # this fit ends before the default delay
    )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=600) == 0
    text = b"".join(chunks).decode(errors="replace")
    assert "RankFactorClassifier VB" in text and "it/s]" in text  # tqdm's bar
    assert "INFO" not in text  # no per-iteration log lines under the bar


def test_run_drives_a_bar_from_snakemake_progress(monkeypatch, capsys):
    lines = ["Building DAG of jobs...", "1 of 4 steps (25%) done", "4 of 4 steps (100%) done"]
    script = "import sys\n" + "".join(f"print({line!r})\n" for line in lines)
    monkeypatch.setattr(cli, "snakemake_command", lambda args: [sys.executable, "-c", script])
    terminal = io.StringIO()
    terminal.isatty = lambda: True
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(["run", "--cores", "1", "--no-report"]) == 0
    shown = terminal.getvalue()
    assert "4/4" in shown and "Building DAG" not in shown
    logfile = io.StringIO()  # not a terminal: snakemake's lines pass through as log lines
    monkeypatch.setattr(sys, "stderr", logfile)
    assert cli.main(["run", "--cores", "1", "--no-report"]) == 0
    assert logfile.getvalue().splitlines() == lines


def test_run_writes_the_report_or_says_why_not(monkeypatch, tmp_path, capsys):
    """After a run, ``snakemake --report`` on the same command; a failed report step is one
    message with the command to retry, and a dry run writes none (it has no outputs)."""
    script = "import sys\nsys.exit(3 if '--report' in sys.argv else 0)\n"
    monkeypatch.setattr(cli, "snakemake_command", lambda args: [sys.executable, "-c", script])
    assert cli.main(["run", "--directory", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "the workflow finished, but its report was not written" in err
    assert f"--report {tmp_path / 'results' / 'report.html'}" in err  # the command to retry
    assert cli.main(["run", "--", "-n"]) == 0
    assert "no report written (snakemake -n writes no outputs" in capsys.readouterr().err
    assert cli.report_skipped(["-pn"]) and cli.report_skipped(["--dry-run"])
    assert cli.report_skipped(["--keep-going", "-p", "--config", "seed=1"]) is None


def test_run_refuses_a_missing_config(tmp_path):
    result = omicsbayes("run", "--config", tmp_path / "nope.yaml", "--cores", "1")
    assert result.returncode != 0 and "nope.yaml: file not found" in result.stderr


@pytest.mark.workflow
def test_run_tiny_config_end_to_end(tmp_path, tiny_config):
    config = dict(tiny_config, protocols={"cv2": {"type": "stratified_kfold", "n_splits": 2}})
    config["models"] = {"logistic": config["models"]["logistic"]}
    config["experiments"]["malignant"].update(models=["logistic"], protocol="cv2")
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = omicsbayes(
        "run",
        "--config",
        "my.yaml",
        "--cores",
        "1",
        "--directory",
        "work",
        "--snakefile",
        REPO / "workflow" / "Snakefile",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps (100%) done" in result.stderr  # log lines: stderr is not a terminal
    metrics = pd.read_csv(tmp_path / "work/results/malignant/metrics.tsv", sep="\t")
    assert sorted(metrics["split"].unique()) == [0, 1]
    report = tmp_path / "work/results/report.html"  # as make run writes it
    assert f"report written to {report}" in result.stderr
    assert "metrics.tsv" in report.read_text()


def test_draws_are_kept_by_mcmc_fits_only():
    from omicsbayes import models

    assert cli._keeps_draws(models.RankFactorClassifier(inference="gibbs"))
    assert not cli._keeps_draws(models.RankFactorClassifier(inference="vb"))
    assert cli._keeps_draws(models.PoissonFactorAnalysis()) and cli._keeps_draws(models.RFLVM())
    assert not cli._keeps_draws(models.BAMClassifier()) and not cli._keeps_draws(models.PMF())
