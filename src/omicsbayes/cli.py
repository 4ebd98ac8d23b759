"""The ``omicsbayes`` command: fit one model on a cohort file, or run the whole workflow.

``omicsbayes fit COHORT --model NAME [--label COLUMN] [--layer LAYER] [--param KEY=VALUE ...]
-o fit.h5ad [--save-fit FIT.obfit]`` calls the :mod:`omicsbayes.tl` function of the model and
writes the cohort with its outputs; ``omicsbayes predict NEW.h5ad --fit FIT.obfit -o OUT.h5ad``
scores a new cohort with a saved fit (:func:`omicsbayes.tl.predict`, genes matched by name);
``omicsbayes run --config my.yaml --cores N [--profile DIR]`` runs the Snakemake workflow.
Progress: a bar when stderr is a terminal, log lines when it is not (a cluster log).

Every fault of the command line (an unknown or invalid ``--param``, an option that does not apply
to the model, an output that cannot be written) is one line on stderr and a non-zero exit, found
before the cohort is read or the model fitted; outputs are written only when everything succeeded
(each output's folder is created as needed).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import logging
import os
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


@functools.cache
def models():
    """Model name -> (tl function, fixed arguments, labels: "required" / "optional" / "none").

    The ``tl.mvgp`` models are the registry's matrix-completion models
    (:func:`omicsbayes.models._capabilities.models_with`), so the table imports every model
    family: it is built when a fit is parsed or the help shown, not when the parser is.
    """
    from .models._capabilities import models_with

    return {
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
        **{m: ("mvgp", {"model": m}, "none") for m in sorted(models_with("matrix_completion"))},
    }


class _ModelNames:
    """The names of :func:`models` as argparse ``choices``, read when a value is checked."""

    def __contains__(self, name):
        return name in models()

    def __iter__(self):
        return iter(models())


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose ``epilog`` may be a function, called when the help is shown."""

    def format_help(self):
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


# parameters of the tl function (not of the estimator) that --param may set
TL_PARAMS = {
    "rank_factor": {"variant"},
    "bam": {"kernel", "variant"},
    "mvgp": {"model", "row_kernel", "col_kernel", "negative_ratio"},
}
# tl arguments that have their own option
OPTIONS = {"label_key": "--label", "layer": "--layer", "mask_var": "--mask-var",
           "key_added": "--key", "random_state": "--seed"}  # fmt: skip

FORMATS = """\
cohort formats (COHORT, NEW):
  *.h5ad                         AnnData, samples x features (omicsbayes.io.read_h5ad)
  *.tsv, *.csv, *.txt (.gz too)  delimited matrix, samples as rows (--orientation to turn),
                                 labels from --sample-sheet (omicsbayes.io.read_matrix)
  demo:NAME                      a bundled demo cohort (omicsbayes.io.load_demo)
outputs (folders are created; nothing is written when a step fails):
  -o OUT.h5ad                    the cohort with the model's .obsm/.varm/.obs/.uns outputs
  --save-fit FIT.obfit           the fit as a data file (omicsbayes.io.load_fit, omicsbayes
                                 predict and omicsbayes.tl.predict read it back)
  --draws DRAWS.nc               MCMC draws as ArviZ netCDF (MCMC models only)"""

RFLVM_NOTE = """\
RFLVM and IBP-RFLVM are the IBP (sparse) RFLVM; the dense RFLVM of paper 002:
  --model RFLVM --param sparse=false"""


def _models_help():
    groups = {}
    for name, (func, _, labels) in models().items():
        groups.setdefault((func, labels), []).append(name)
    lines = ["models (--model), by omicsbayes.tl function:"]
    for (func, labels), names in groups.items():
        lines.append(f"  tl.{func:<12} labels {labels:<9} {', '.join(names)}")
    return "\n".join(lines) + "\n" + RFLVM_NOTE


def parse_param(text):
    """``KEY=VALUE`` with VALUE read as YAML (numbers, booleans, lists, null)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_]\w*", key):
        raise argparse.ArgumentTypeError(f"--param {text!r}: expected KEY=VALUE, e.g. n_factors=20")
    try:
        return key, yaml.safe_load(value)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise argparse.ArgumentTypeError(
            f"--param {text!r}: the value of {key} is not YAML ({problem}); expected a number, "
            "true / false, null, a list such as [0.1, 1.0] or a string"
        ) from exc


def read_input(path, sample_sheet=None, orientation="samples_as_rows", prog="omicsbayes fit"):
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
    raise SystemExit(
        f"{prog}: {text}: unknown cohort format; expected .h5ad, a .tsv / .csv / .txt matrix "
        "(.gz too) or demo:NAME (the formats: omicsbayes fit --help)"
    )


def _progress_setup(verbose_bar):
    """A progress bar on a terminal (log lines at WARNING only), INFO log lines otherwise."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logger.setLevel(logging.WARNING if verbose_bar else logging.INFO)


def _estimator(func, tl_args, params, labelled):
    """The estimator ``tl.<func>(**tl_args, **params)`` would fit (for checks before any fit)."""
    from . import models

    if func == "rank_factor":
        variant = tl_args.get("variant", "R-L-BSVM")  # tl.rank_factor's default
        if variant is None:
            return models.RankFactorClassifier(**params)
        return models.RankFactorClassifier.from_variant(variant, **params)
    if func == "bam":
        if tl_args["variant"] == "BPROBIT":
            return models.BayesianProbitClassifier(**params)
        ranking = "listwise" if tl_args["variant"] == "BAM_L" else "pairwise"
        return models.BAMClassifier(ranking=ranking, **params)
    if func == "mvgp":
        return getattr(models, tl_args["model"])(**params)
    if func == "pfa":
        cls = models.PFAClassifier if labelled else models.PoissonFactorAnalysis
        return cls(**params)
    cls = {"bm2pca": models.BM2PCAClassifier, "rflvm": models.RFLVM,
           "ibp_factor": models.IBPFactorModel}[func]  # fmt: skip
    return cls(**params)


def _checked_estimator(args, func, params):
    """Check every ``--param`` against the estimator before anything is read or fitted.

    Returns the estimator; raises SystemExit with one line naming the parameter otherwise.
    """
    prog = f"omicsbayes fit: --model {args.model}"
    for key in params:
        if key in OPTIONS:
            raise SystemExit(f"{prog}: set {key} with {OPTIONS[key]}, not --param")
    tl_keys = TL_PARAMS.get(func, set())
    tl_args = {k: v for k, v in params.items() if k in tl_keys}
    own = {k: v for k, v in params.items() if k not in tl_keys}
    labelled = args.label is not None
    try:
        probe = _estimator(func, tl_args, {}, labelled)
    except ValueError as exc:  # an unknown variant
        raise SystemExit(f"{prog}: {_one_line(exc)}") from exc
    known = sorted(set(probe.get_params(deep=False)) | tl_keys)
    for key in own:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise SystemExit(
                f"{prog}: --param {key}: {type(probe).__name__} has no parameter {key!r}; "
                f"{hint}its parameters are {', '.join(known)}"
            )
    try:
        estimator = _estimator(func, tl_args, own, labelled)
        if "random_state" in known:
            estimator.set_params(random_state=args.seed)
        estimator._validate_params()
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"{prog}: {_one_line(exc)}") from exc
    return estimator


def _keeps_draws(estimator):
    """Whether a fit of ``estimator`` keeps MCMC draws (``idata_``): an MCMC model, or one that
    does both VB and MCMC (RankFactorClassifier) with ``inference="gibbs"``."""
    from .models._capabilities import capabilities_of

    capabilities = capabilities_of(estimator)
    if "mcmc" not in capabilities:
        return False
    return "vb" not in capabilities or getattr(estimator, "inference", None) == "gibbs"


def _one_line(exc):
    return " ".join(str(exc).split())


def check_outputs(prog, outputs):
    """Refuse, before any work, outputs that cannot be written: the same path twice, a folder in
    the way, or a folder that cannot be created or written. ``outputs``: option -> path."""
    given = {opt: Path(path) for opt, path in outputs.items() if path}
    seen = {}
    for opt, path in given.items():
        resolved = path.resolve()
        if resolved in seen:
            raise SystemExit(f"{prog}: {seen[resolved]} and {opt} both write {path}")
        seen[resolved] = opt
        if path.is_dir():
            raise SystemExit(f"{prog}: {opt} {path}: is a folder; expected a file path")
        ancestor = resolved.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise SystemExit(f"{prog}: {opt} {path}: {ancestor} is a file, not a folder")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise SystemExit(f"{prog}: {opt} {path}: cannot write in {ancestor}")


def cmd_fit(args):
    from . import io, tl
    from .jobs import atomic_write_all

    prog = "omicsbayes fit"
    func, fixed, labels = models()[args.model]
    if labels == "required" and args.label is None:
        raise SystemExit(f"{prog}: --model {args.model} needs --label COLUMN (an .obs column)")
    if labels == "none" and args.label is not None:
        raise SystemExit(f"{prog}: --model {args.model} takes no labels; drop --label")
    if args.mask_var is not None and func == "mvgp":
        raise SystemExit(
            f"{prog}: --mask-var does not apply to --model {args.model} (tl.mvgp fits every "
            "column of the association matrix); drop --mask-var or subset the cohort first"
        )
    params = dict(fixed)
    for key, value in args.param:
        if key in params and params[key] != value:
            raise SystemExit(f"{prog}: --model {args.model} fixes {key}={params[key]!r}")
        params[key] = value
    bar = sys.stderr.isatty()
    params.setdefault("verbose", bar)
    estimator = _checked_estimator(args, func, params)
    if args.draws and not _keeps_draws(estimator):
        raise SystemExit(
            f"{prog}: --draws: --model {args.model} with these parameters is not an MCMC fit and "
            "keeps no draws; drop --draws (RankFactorClassifier variants: --param inference=gibbs)"
        )
    check_outputs(prog, {"-o": args.output, "--save-fit": args.save_fit, "--draws": args.draws})
    _progress_setup(bar)
    call = {"random_state": args.seed, **params}
    if labels != "none":
        call["label_key"] = args.label
    if args.layer is not None:
        call["layer"] = args.layer
    if args.mask_var is not None:
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
        raise SystemExit(f"{prog}: {_one_line(exc)}") from exc
    writers = [(args.output, adata.write_h5ad)]
    if args.save_fit:
        writers.append((args.save_fit, lambda tmp: io.save_fit(estimator, tmp)))
    if args.draws:
        writers.append((args.draws, lambda tmp: io.save_draws(estimator, tmp)))
    atomic_write_all(writers)
    written = ", ".join(str(path) for path, _ in writers)
    logger.log(logging.WARNING if bar else logging.INFO, "wrote %s", written)
    return 0


def cmd_predict(args):
    from . import io, tl
    from .jobs import atomic_write_all

    prog = "omicsbayes predict"
    check_outputs(prog, {"-o": args.output})
    _progress_setup(sys.stderr.isatty())
    try:
        header = io.read_header(args.fit)
        adata = read_input(args.cohort, args.sample_sheet, args.orientation, prog)
        kwargs = {} if args.layer is None else {"layer": args.layer}
        tl.predict(adata, args.fit, key_added=args.key, **kwargs)
    except ValueError as exc:
        raise SystemExit(f"{prog}: {_one_line(exc)}") from exc
    atomic_write_all([(args.output, adata.write_h5ad)])
    logger.info(
        "scored %d samples of %s with %s (omicsbayes %s) from %s; wrote %s",
        adata.n_obs,
        args.cohort,
        header["class"].rsplit(".", 1)[1],
        header["omicsbayes"],
        args.fit,
        args.output,
    )
    return 0


def _add_predict_parser(sub):
    predict = sub.add_parser(
        "predict",
        help="score a new cohort with a saved fit (genes matched by name)",
        description="Score the samples of a new cohort with a fit saved by omicsbayes fit "
        "--save-fit (or omicsbayes.io.save_fit): the fit's genes are taken from the cohort by "
        "name (extra genes are ignored, a missing gene is an error), from the layer the fit was "
        "made on, and the scores and decision values are written as omicsbayes fit writes them.",
        epilog=FORMATS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    predict.add_argument("cohort", metavar="NEW", help="the new cohort (see the formats below)")
    predict.add_argument("--fit", required=True, help="fit file written by --save-fit")
    predict.add_argument("--key", help="key_added (default: the fit's)")
    predict.add_argument("--layer", help="score this layer (default: the layer of the fit)")
    _add_cohort_file_options(predict)
    predict.set_defaults(func=cmd_predict)


def _add_cohort_file_options(parser):
    """The options ``fit`` and ``predict`` share: how to read a delimited cohort (its sample
    sheet and orientation, for :func:`read_input`) and the output .h5ad."""
    parser.add_argument("--sample-sheet", help="sample sheet of a delimited matrix")
    parser.add_argument(
        "--orientation",
        default="samples_as_rows",
        choices=["samples_as_rows", "samples_as_columns"],
    )
    parser.add_argument("-o", "--output", required=True, help="output .h5ad")


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


REPORT = Path("results") / "report.html"
"""Where ``omicsbayes run`` writes the HTML report, under the working directory (as make run)."""

# snakemake options after which a run makes no outputs to report on
_NO_OUTPUTS = (
    "--dry-run", "--dryrun", "--report", "--touch", "--unlock", "--lint", "--dag", "--d3dag",
    "--rulegraph", "--filegraph", "--summary", "--detailed-summary", "--list", "--delete-",
    "--cleanup-", "--containerize", "--print-compilation", "--export-cwl", "--archive",
    "--generate-unit-tests", "--version", "--help",
)  # fmt: skip


def report_skipped(snakemake_args):
    """Why the snakemake arguments make a run that has no report to write, or None."""
    for arg in snakemake_args:
        short = re.fullmatch(r"-([A-Za-z]+)", arg)
        if arg.startswith(_NO_OUTPUTS) or (short and set(short.group(1)) & set("nth")):
            return f"snakemake {arg} writes no outputs to report on"
    return None


def write_report(args):
    """``snakemake --report results/report.html`` for the run ``args`` describes; its exit code.
    Says on stderr where the report is, or why there is none."""
    path = (Path(args.directory or ".") / REPORT).resolve()
    cmd = [*snakemake_command(args), "--report", str(path)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode:
        sys.stderr.write(result.stdout[-2000:] + result.stderr[-3000:])
        sys.stderr.write(
            f"omicsbayes run: the workflow finished, but its report was not written: "
            f"snakemake --report exited with {result.returncode} (above); to retry: "
            f"{' '.join(cmd)}\n"
        )
    else:
        sys.stderr.write(f"omicsbayes run: report written to {path}\n")
    return result.returncode


def cmd_run(args):
    """Run Snakemake in a subprocess (its progress lines drive a bar on a terminal), then write
    the HTML report (:data:`REPORT`) as ``make run`` does, unless told not to."""
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
    if code or args.no_report:
        return code
    skipped = report_skipped(args.snakemake_args)
    if skipped:
        sys.stderr.write(f"omicsbayes run: no report written ({skipped})\n")
        return 0
    return write_report(args)


def build_parser():
    parser = _Parser(
        prog="omicsbayes",
        description="Bayesian latent factor models for omics cohorts.",
        epilog=lambda: f"{_models_help()}\n\n{FORMATS}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser(
        "fit",
        help="fit one model on a cohort file and write the cohort with its outputs",
        epilog=lambda: f"{_models_help()}\n\n{FORMATS}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_predict_parser(sub)
    fit.add_argument("cohort", help="cohort file (see the formats below)")
    fit.add_argument(
        "--model",
        required=True,
        choices=_ModelNames(),
        metavar="NAME",
        help="model name (listed below; the dense RFLVM: --model RFLVM --param sparse=false)",
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
    _add_cohort_file_options(fit)
    fit.add_argument("--save-fit", help="also save the fit as a data file (.obfit)")
    fit.add_argument("--draws", help="also save the MCMC draws (.nc)")
    fit.set_defaults(func=cmd_fit)
    run = sub.add_parser(
        "run",
        help="run the Snakemake workflow and write results/report.html",
        description="Run the workflow with snakemake (same Python); arguments after -- go to "
        "snakemake, e.g. omicsbayes run --config my.yaml --cores 4 -- --dry-run",
    )
    run.add_argument("--config", help="config file (default: the workflow's config/config.yaml)")
    run.add_argument("--cores", default="1", help="cores (a number or 'all')")
    run.add_argument("--profile", help="Snakemake profile folder, e.g. profiles/slurm")
    run.add_argument("--directory", help="working directory for results/ and logs/")
    run.add_argument("--snakefile", help="the workflow's Snakefile (default: found)")
    run.add_argument(
        "--no-report",
        action="store_true",
        help=f"do not write the HTML report ({REPORT} under the working directory) afterwards",
    )
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
