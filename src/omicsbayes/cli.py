"""The ``omicsbayes`` command: fit one model on a cohort file, or run the whole workflow.

``omicsbayes fit COHORT --model NAME [--label COLUMN] [--layer LAYER] [--param KEY=VALUE ...]
-o fit.h5ad`` calls the :mod:`omicsbayes.tl` function of the model and writes the cohort with its
outputs; ``omicsbayes run --config my.yaml --cores N [--profile DIR]`` runs the Snakemake
workflow. Progress: a bar when stderr is a terminal, log lines when it is not (a cluster log).
"""

from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys
from collections import deque
from pathlib import Path

logger = logging.getLogger("omicsbayes")

_RANK_FACTOR = (
    "G-L-Probit",
    "G-L-BSVM",
    "OR-L-Probit",
    "OR-L-BSVM",
    "R-L-BSVM",
    "G-NL-BSVM",
    "R-NL-BSVM",
)
_MVGP = ("ConstrainedMVGP", "TraceGP", "MVGP", "KPMF", "PMF")

# model name -> (tl function, fixed arguments, labels: "required" / "optional" / "none")
MODELS = {
    **{v: ("rank_factor", {"variant": v}, "required") for v in _RANK_FACTOR},
    "RankFactorClassifier": ("rank_factor", {}, "required"),
    "BAM_L": ("bam", {"variant": "BAM_L"}, "required"),
    "BAM_P": ("bam", {"variant": "BAM_P"}, "required"),
    "BPROBIT": ("bam", {"variant": "BPROBIT"}, "required"),
    "BAMClassifier": ("bam", {"variant": "BAM_L"}, "required"),
    "BayesianProbitClassifier": ("bam", {"variant": "BPROBIT"}, "required"),
    "BM2PCA": ("bm2pca", {}, "optional"),
    "BM2PCAClassifier": ("bm2pca", {}, "optional"),
    "RFLVM": ("rflvm", {}, "none"),
    "IBP-RFLVM": ("rflvm", {"sparse": True}, "none"),
    "IBPFactorModel": ("ibp_factor", {}, "none"),
    "IBP-linear": ("ibp_factor", {}, "none"),
    "PFA": ("pfa", {}, "none"),
    "PoissonFactorAnalysis": ("pfa", {}, "none"),
    "PFA-L-BSVM": ("pfa", {}, "required"),
    "PFAClassifier": ("pfa", {}, "required"),
    **{m: ("mvgp", {"model": m}, "none") for m in _MVGP},
}

FORMATS = """\
cohort formats (COHORT):
  *.h5ad                         AnnData, samples x features (omicsbayes.io.read_h5ad)
  *.tsv, *.csv, *.txt (.gz too)  delimited matrix, samples as rows (--orientation to turn),
                                 labels from --sample-sheet (omicsbayes.io.read_matrix)
  demo:NAME                      a bundled demo cohort (omicsbayes.io.load_demo)
outputs:
  -o FIT.h5ad                    the cohort with the model's .obsm/.varm/.obs/.uns outputs
  --save-fit FIT.joblib          the fitted estimator (omicsbayes.io.load_fit reads it back)
  --draws DRAWS.nc               MCMC draws as ArviZ netCDF (MCMC models only)"""


def _models_help():
    groups = {}
    for name, (func, _, labels) in MODELS.items():
        groups.setdefault((func, labels), []).append(name)
    lines = ["models (--model), by omicsbayes.tl function:"]
    for (func, labels), names in groups.items():
        lines.append(f"  tl.{func:<12} labels {labels:<9} {', '.join(names)}")
    return "\n".join(lines)


def parse_param(text):
    """``KEY=VALUE`` with VALUE read as YAML (numbers, booleans, lists, null)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_]\w*", key):
        raise argparse.ArgumentTypeError(f"--param {text!r}: expected KEY=VALUE, e.g. n_factors=20")
    return key, yaml.safe_load(value)


def read_input(path, sample_sheet=None, orientation="samples_as_rows"):
    """Read a cohort named on the command line (see :data:`FORMATS`)."""
    from . import io

    text = str(path)
    if text.startswith("demo:"):
        return io.load_demo(text[5:])
    suffixes = [s.lower() for s in Path(text).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if suffixes[-1:] == [".h5ad"]:
        return io.read_h5ad(text)
    if suffixes[-1:] and suffixes[-1] in (".tsv", ".csv", ".txt"):
        return io.read_matrix(text, sample_sheet=sample_sheet, orientation=orientation)
    raise SystemExit(f"omicsbayes fit: {text}: unknown cohort format; expected\n{FORMATS}")


def _progress_setup(verbose_bar):
    """A progress bar on a terminal (log lines at WARNING only), INFO log lines otherwise."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logger.setLevel(logging.WARNING if verbose_bar else logging.INFO)


def cmd_fit(args):
    from . import io, tl

    func, fixed, labels = MODELS[args.model]
    if labels == "required" and args.label is None:
        raise SystemExit(
            f"omicsbayes fit: --model {args.model} needs --label COLUMN (an .obs column)"
        )
    if labels == "none" and args.label is not None:
        raise SystemExit(f"omicsbayes fit: --model {args.model} takes no labels; drop --label")
    params = dict(fixed)
    for key, value in args.param:
        if key in params and params[key] != value:
            raise SystemExit(f"omicsbayes fit: --model {args.model} fixes {key}={params[key]!r}")
        params[key] = value
    bar = sys.stderr.isatty()
    _progress_setup(bar)
    params.setdefault("verbose", bar)
    call = {"random_state": args.seed, **params}
    if labels != "none":
        call["label_key"] = args.label
    if args.layer is not None:
        call["layer"] = args.layer
    if args.mask_var is not None and func != "mvgp":
        call["mask_var"] = args.mask_var
    if args.key is not None:
        call["key_added"] = args.key
    try:
        adata = read_input(args.cohort, args.sample_sheet, args.orientation)
        logger.log(
            logging.WARNING if bar else logging.INFO,
            "fitting %s (tl.%s) on %s: %d samples x %d features",
            args.model,
            func,
            args.cohort,
            adata.n_obs,
            adata.n_vars,
        )
        estimator = getattr(tl, func)(adata, **call)
    except ValueError as exc:
        raise SystemExit(f"omicsbayes fit: {exc}") from exc
    adata.write_h5ad(args.output)
    logger.log(logging.WARNING if bar else logging.INFO, "wrote %s", args.output)
    if args.save_fit:
        io.save_fit(estimator, args.save_fit)
    if args.draws:
        io.save_draws(estimator, args.draws)
    return 0


def find_snakefile(given=None):
    """The Snakefile: ``given``, ``./Snakefile``, ``./workflow/Snakefile`` or the checkout's."""
    candidates = (
        [Path(given)]
        if given
        else [
            Path("Snakefile"),
            Path("workflow/Snakefile"),
            Path(__file__).resolve().parents[2] / "workflow" / "Snakefile",
        ]
    )
    for path in candidates:
        if path.is_file():
            return path.resolve()
    raise SystemExit(
        f"omicsbayes run: no Snakefile at {', '.join(map(str, candidates))}; run from a checkout "
        "of the workflow (or snakedeploy it) or pass --snakefile"
    )


_DONE = re.compile(r"(\d+) of (\d+) steps \(\d+%\) done")


def snakemake_command(args):
    """The snakemake command line ``omicsbayes run`` executes (same Python interpreter)."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(find_snakefile(args.snakefile)),
        "--cores",
        str(args.cores),
    ]
    if args.config:
        cmd += ["--configfile", str(Path(args.config).resolve())]
    if args.profile:
        cmd += ["--profile", str(args.profile)]
    if args.directory:
        cmd += ["--directory", str(args.directory)]
    return cmd + list(args.snakemake_args)


def cmd_run(args):
    """Run Snakemake in a subprocess; its progress lines drive a bar on a terminal."""
    if args.config and not Path(args.config).is_file():
        raise SystemExit(f"omicsbayes run: --config {args.config}: file not found")
    cmd = snakemake_command(args)
    bar = None
    if sys.stderr.isatty():
        from tqdm.auto import tqdm

        bar = tqdm(total=None, desc="workflow", unit="job", file=sys.stderr)
    tail = deque(maxlen=60)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        tail.append(line)
        done = _DONE.search(line)
        if bar is None:
            sys.stderr.write(line)
        elif done:
            bar.total = int(done.group(2))
            bar.n = int(done.group(1))
            bar.refresh()
        elif "error" in line.lower() or "exception" in line.lower():
            bar.write(line.rstrip())
    code = proc.wait()
    if bar is not None:
        bar.close()
        if code:
            sys.stderr.writelines(tail)
    return code


def build_parser():
    parser = argparse.ArgumentParser(
        prog="omicsbayes",
        description="Bayesian latent factor models for omics cohorts.",
        epilog=f"{_models_help()}\n\n{FORMATS}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser(
        "fit",
        help="fit one model on a cohort file and write the cohort with its outputs",
        epilog=f"{_models_help()}\n\n{FORMATS}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fit.add_argument("cohort", help="cohort file (see the formats below)")
    fit.add_argument(
        "--model",
        required=True,
        choices=list(MODELS),
        metavar="NAME",
        help="model name (listed below)",
    )
    fit.add_argument("--label", help=".obs column of the labels")
    fit.add_argument("--layer", help="fit on this layer instead of X (e.g. counts)")
    fit.add_argument("--mask-var", help="boolean .var column of the genes to use")
    fit.add_argument(
        "--param",
        action="append",
        default=[],
        type=parse_param,
        metavar="KEY=VALUE",
        help="estimator parameter (repeatable)",
    )
    fit.add_argument("--seed", type=int, default=0, help="random_state (default 0)")
    fit.add_argument("--key", help="key_added (default: the tl function's)")
    fit.add_argument("--sample-sheet", help="sample sheet of a delimited matrix")
    fit.add_argument(
        "--orientation",
        default="samples_as_rows",
        choices=["samples_as_rows", "samples_as_columns"],
    )
    fit.add_argument("-o", "--output", required=True, help="output .h5ad")
    fit.add_argument("--save-fit", help="also save the estimator (.joblib)")
    fit.add_argument("--draws", help="also save the MCMC draws (.nc)")
    fit.set_defaults(func=cmd_fit)
    run = sub.add_parser(
        "run",
        help="run the Snakemake workflow",
        description="Run the workflow with snakemake (same Python); arguments after -- go to "
        "snakemake, e.g. omicsbayes run --config my.yaml --cores 4 -- --dry-run",
    )
    run.add_argument("--config", help="config file (default: the workflow's config/config.yaml)")
    run.add_argument("--cores", default="1", help="cores (a number or 'all')")
    run.add_argument("--profile", help="Snakemake profile folder, e.g. profiles/slurm")
    run.add_argument("--directory", help="working directory for results/ and logs/")
    run.add_argument("--snakefile", help="the workflow's Snakefile (default: found)")
    run.add_argument("snakemake_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    run.set_defaults(func=cmd_run)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if getattr(args, "snakemake_args", None) and args.snakemake_args[0] == "--":
        args.snakemake_args = args.snakemake_args[1:]
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
