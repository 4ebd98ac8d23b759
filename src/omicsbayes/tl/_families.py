"""One ``tl`` function per model family; the AnnData plumbing is in :mod:`._anndata`."""

from __future__ import annotations

import inspect
from numbers import Real

import numpy as np
import scipy.sparse as sp

from ._anndata import joint_targets, labels_of, matrix_of, run, values_of, write_results
from ._checks import check_entries, check_estimator_memory, check_matrix, check_memory

BAM_VARIANTS = {"BAM_L": "listwise", "BAM_P": "pairwise", "BPROBIT": None}

_COMMON = """
    mask_var : None, bool array or str
        Genes to fit on: all (None), a boolean mask over ``adata.var_names`` or the name of a
        boolean ``.var`` column such as ``"highly_variable"``. Loadings of the other genes are NaN.
    random_state : int or None
        Seed of the estimator.
    copy : bool
        Write into a copy of ``adata`` and return that copy (scanpy's convention) instead of the
        fitted estimator.
    **params
        Further parameters of the estimator."""


_MANY_CLASSES = """
    allow_many_classes : bool
        Fit a label column that looks continuous (float values, more than 10 distinct) or mostly
        unique (more classes than half the labelled samples) as classes, one per distinct value;
        by default such a column is refused."""


def _doc(func):
    func.__doc__ = func.__doc__.replace("    {common}", _COMMON.strip("\n"))
    func.__doc__ = func.__doc__.replace("    {many_classes}", _MANY_CLASSES.strip("\n"))
    return func


def _training_matrix(target, layer, mask_var, who):
    """:func:`matrix_of` checked for a fit (:func:`check_matrix`)."""
    X, mask = matrix_of(target, layer, mask_var, who)
    source = "adata.X" if layer is None else f"adata.layers[{layer!r}]"
    check_matrix(X, who, source, target.obs_names, target.var_names[mask])
    return X, mask


def _build(cls, random_state, **params):
    """``cls(**params)`` with ``random_state`` when the class takes one."""
    if "random_state" in inspect.signature(cls.__init__).parameters:
        params.setdefault("random_state", random_state)
    return cls(**params)


def _classes_extra(label_key, classes, tasks, layer):
    return {"label_key": label_key, "classes": classes, "tasks": tasks, "layer": layer}


@_doc
def rank_factor(
    adata,
    label_key=None,
    variant="R-L-BSVM",
    layer=None,
    key_added="rank_factor",
    *,
    mask_var=None,
    allow_many_classes=False,
    random_state=0,
    copy=False,
    **params,
):
    """Fit paper 000's discriminative factor model (``RankFactorClassifier``).

    Several classes are one-vs-rest tasks sharing the factors; samples with a missing label enter
    the factor model only (the samples x tasks matrix with NaN).

    Parameters
    ----------
    adata : anndata.AnnData
        Samples x genes.
    label_key : str, list of str or None
        ``.obs`` column of the labels; None uses ``adata.uns["label_column"]``; a list of columns
        is one binary task per column (e.g. 0/1 with NaN where unlabelled).
    variant : str or None
        A Table 1 name: G-L-Probit, G-L-BSVM, OR-L-Probit, OR-L-BSVM, R-L-BSVM, G-NL-BSVM,
        R-NL-BSVM; None: ``RankFactorClassifier(**params)``.
    layer : str or None
        Fit on ``adata.layers[layer]`` instead of ``adata.X``.
    key_added : str
    {many_classes}
    {common}

    Returns
    -------
    RankFactorClassifier, or the AnnData copy if ``copy``. Written: ``.obsm["X_<key>"]`` (factor
    scores), ``.varm["<key>_loadings"]``, ``.obs["<key>_decision[_<task>]"]`` and ``.uns[key]``
    (params, coef, intercept, classes, tasks, the bound trace, and for Gibbs the diagnostics).

    Examples
    --------
    >>> from omicsbayes import io, tl
    >>> adata = io.load_demo("tissue_gene_expression")
    >>> est = tl.rank_factor(adata, label_key="tissue", variant="G-L-Probit", n_factors=3,
    ...                      max_iter=10)
    >>> adata.obsm["X_rank_factor"].shape  # samples x factors
    (189, 3)
    >>> adata.varm["rank_factor_loadings"].shape  # genes x factors
    (500, 3)
    >>> adata.uns["rank_factor"]["trace_name"]
    'lower_bound'
    """
    from ..models import RankFactorClassifier

    who = "tl.rank_factor"

    def fit(target):
        X, mask = _training_matrix(target, layer, mask_var, who)
        labels, Y, classes, tasks, key = joint_targets(target, label_key, who, allow_many_classes)
        # 1-D labels keep the class names in classes_; missing labels need the task matrix
        y = Y if labels is None or np.isnan(Y).any() else labels
        if variant is None:
            est = _build(RankFactorClassifier, random_state, **params)
        else:
            est = RankFactorClassifier.from_variant(variant, random_state=random_state, **params)
        check_estimator_memory(est, *X.shape, who)
        est.fit(X, y)
        extra = dict(_classes_extra(key, classes, tasks, layer), variant=str(variant))
        write_results(
            target,
            key_added,
            est,
            mask,
            decision=est.decision_function(X),
            tasks=tasks,
            extra=extra,
        )
        return est

    return run(adata, copy, fit, who)


@_doc
def bam(
    adata,
    label_key,
    kernel="gaussian",
    variant="BAM_L",
    layer=None,
    key_added="bam",
    *,
    mask_var=None,
    allow_many_classes=False,
    random_state=0,
    copy=False,
    **params,
):
    """Fit paper 001's Bayesian AUC maximisation (or BPROBIT) on the empirical kernel map.

    The samples are represented by their kernel values against the training samples
    (:class:`~omicsbayes.preprocess.EmpiricalKernelMap`, section 4) unless ``kernel`` is None.
    Several classes: one binary classifier per class (scikit-learn's ``OneVsRestClassifier``).

    Parameters
    ----------
    adata : anndata.AnnData
    label_key : str
        ``.obs`` column of the labels (no missing label).
    kernel : {"gaussian", "linear"} or None
    variant : {"BAM_L", "BAM_P", "BPROBIT"}
        Listwise BAM (eq. 2), pairwise BAM (eq. 1) or Bayesian probit regression (eq. 3).
    layer, key_added
        As for :func:`rank_factor`.
    {many_classes}
    {common}

    Returns
    -------
    The fitted classifier (a Pipeline with the kernel map, in a OneVsRestClassifier for several
    classes), or the AnnData copy if ``copy``. Written: ``.obs["<key>_decision[_<class>]"]``,
    the coefficients on the genes in ``.varm["<key>_loadings"]`` (``kernel=None``) or on the
    training samples' kernel columns in ``.obsm["<key>_dual_coef"]``, and ``.uns[key]``.

    Examples
    --------
    >>> from omicsbayes import io, tl
    >>> adata = io.load_demo("gse7390")
    >>> est = tl.bam(adata, label_key="er", variant="BPROBIT")
    >>> adata.obs["bam_decision"].shape
    (198,)
    >>> adata.obsm["bam_dual_coef"].shape  # weights on the training samples' kernel columns
    (198, 1)
    """
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline

    from ..models import BAMClassifier, BayesianProbitClassifier
    from ..preprocess import EmpiricalKernelMap

    who = "tl.bam"
    if variant not in BAM_VARIANTS:
        raise ValueError(f"{who}: variant={variant!r}; expected one of {sorted(BAM_VARIANTS)}")
    if BAM_VARIANTS[variant] is None:
        core = _build(BayesianProbitClassifier, random_state, **params)
    else:
        core = _build(BAMClassifier, random_state, ranking=BAM_VARIANTS[variant], **params)

    def fit(target):
        X, mask = _training_matrix(target, layer, mask_var, who)
        labels, classes, key = labels_of(
            target, label_key, who, allow_missing=False, allow_many_classes=allow_many_classes
        )
        n = X.shape[0] if kernel is not None else min(X.shape)
        check_memory(
            who,
            16 * n * n,
            f"kernel={kernel!r} on {X.shape[0]} samples x {X.shape[1]} genes",
            f"two {n} x {n} matrices: the kernel map or Gram matrix and its Cholesky factor",
            "fit on fewer samples",
        )
        est = core if kernel is None else make_pipeline(EmpiricalKernelMap(kernel), core)
        est = OneVsRestClassifier(est) if len(classes) > 2 else est
        est.fit(X, labels.astype(str))
        fits = getattr(est, "estimators_", [est])
        cores = [f[-1] if hasattr(f, "steps") else f for f in fits]
        coef = np.column_stack([c.coef_ for c in cores])
        trace = np.full((len(cores), max(c.n_iter_ for c in cores)), np.nan)
        for i, c in enumerate(cores):
            trace[i, : c.n_iter_] = c.lower_bound_
        extra = _classes_extra(key, classes, [str(c) for c in classes[-coef.shape[1] :]], layer)
        extra.update(
            model=type(core).__name__,
            params=core.get_params(),
            kernel=str(kernel),
            variant=variant,
            intercept=np.array([c.intercept_ for c in cores]),
            trace=trace[0] if len(cores) == 1 else trace,
            trace_name="lower_bound",
        )
        if kernel is None:
            target.varm[f"{key_added}_loadings"] = np.full((target.n_vars, coef.shape[1]), np.nan)
            target.varm[f"{key_added}_loadings"][mask] = coef
            obsm = {}
        else:
            obsm = {f"{key_added}_dual_coef": coef}
        write_results(
            target,
            key_added,
            est,
            mask,
            decision=est.decision_function(X),
            tasks=extra["tasks"],
            extra=extra,
            obsm=obsm,
        )
        return est

    return run(adata, copy, fit, who)


@_doc
def bm2pca(
    adata,
    label_key,
    layer=None,
    key_added="bm2pca",
    *,
    mask_var=None,
    allow_many_classes=False,
    random_state=0,
    copy=False,
    **params,
):
    """Fit paper 003's Bayesian max-margin PCA (:class:`~omicsbayes.models.BM2PCAClassifier`).

    Missing labels are unlabelled samples (PCA part only); ``label_key=None`` fits Bayesian PCA.
    Several classes: one-vs-rest, each with its own subspace (scores and loadings are the
    per-class blocks side by side).

    Parameters
    ----------
    adata : anndata.AnnData
    label_key : str or None
    layer, key_added
        As for :func:`rank_factor`.
    {many_classes}
    {common}

    Returns
    -------
    BM2PCAClassifier, or the AnnData copy if ``copy``. Written: ``.obsm["X_<key>"]`` (the
    variational projection), ``.varm["<key>_loadings"]``, ``.obs["<key>_decision[_<class>]"]``
    (with labels) and ``.uns[key]`` (the bound trace per one-vs-rest problem).

    Examples
    --------
    >>> from omicsbayes import io, tl
    >>> adata = io.load_demo("tissue_gene_expression")
    >>> est = tl.bm2pca(adata, label_key="tissue", n_components=3, max_iter=20)
    >>> adata.obsm["X_bm2pca"].shape  # 3 components for each of the 7 one-vs-rest subspaces
    (189, 21)
    >>> sorted(est.classes_)[:2]
    ['cerebellum', 'colon']
    """
    from ..models import BM2PCAClassifier

    who = "tl.bm2pca"

    def fit(target):
        X, mask = _training_matrix(target, layer, mask_var, who)
        est = _build(BM2PCAClassifier, random_state, **params)
        check_estimator_memory(est, *X.shape, who)
        if label_key is None:
            est.fit(X)
            write_results(target, key_added, est, mask, scores=est.transform(X))
            return est
        labels, classes, key = labels_of(
            target, label_key, who, allow_missing=True, allow_many_classes=allow_many_classes
        )
        est.fit(X, labels)
        tasks = [str(c) for c in (classes[1:] if len(classes) == 2 else classes)]
        write_results(
            target,
            key_added,
            est,
            mask,
            scores=est.transform(X),
            decision=est.decision_function(X),
            tasks=tasks,
            extra=_classes_extra(key, classes, tasks, layer),
        )
        return est

    return run(adata, copy, fit, who)


def _unsupervised(cls, who, adata, layer, key_added, mask_var, random_state, copy, params, extra):
    """Fit an unsupervised latent model on the matrix and write scores, loadings and traces."""

    def fit(target):
        X, mask = _training_matrix(target, layer, mask_var, who)
        est = _build(cls, random_state, **params)
        check_estimator_memory(est, *X.shape, who)
        est.fit(X)
        more = {name: getattr(est, attr) for name, attr in extra if hasattr(est, attr)}
        write_results(target, key_added, est, mask, extra=dict(more, layer=layer))
        return est

    return run(adata, copy, fit, who)


@_doc
def rflvm(
    adata,
    layer=None,
    key_added="rflvm",
    *,
    mask_var=None,
    random_state=0,
    copy=False,
    **params,
):
    """Fit paper 002's random feature latent variable model (:class:`~omicsbayes.models.RFLVM`).

    ``sparse=True`` (default) is the IBP RFLVM, ``likelihood`` one of gaussian, bernoulli,
    negative_binomial, multinomial, poisson (count likelihoods want ``layer="counts"``).

    Parameters
    ----------
    adata : anndata.AnnData
    layer, key_added
        As for :func:`rank_factor`.
    {common}

    Returns
    -------
    RFLVM, or the AnnData copy if ``copy``. Written: ``.obsm["X_<key>"]`` (posterior mean latent
    positions), ``.uns[key]`` (log-likelihood trace, active dimensions per iteration, acceptance
    rates and the R-hat / ESS table of the identifiable draws).

    Examples
    --------
    >>> from omicsbayes import io, tl
    >>> adata = io.load_demo("breast_cancer_wisconsin")[:60].copy()
    >>> est = tl.rflvm(adata, n_random_features=10, n_latent=2, n_iter=6, hmc_leapfrog=10)
    >>> adata.obsm["X_rflvm"].shape[0]
    60
    >>> adata.uns["rflvm"]["trace_name"]
    'log_likelihood'
    """
    from ..models import RFLVM

    extra = [
        ("n_active", "n_active_"),
        ("acceptance_rate", "acceptance_rate_"),
        ("hmc_acceptance", "hmc_acceptance_"),
    ]
    return _unsupervised(
        RFLVM, "tl.rflvm", adata, layer, key_added, mask_var, random_state, copy, params, extra
    )


@_doc
def ibp_factor(
    adata,
    layer=None,
    key_added="ibp_factor",
    *,
    mask_var=None,
    random_state=0,
    copy=False,
    **params,
):
    """Fit the linear IBP factor model (:class:`~omicsbayes.models.IBPFactorModel`, paper 002's
    baseline) by Gibbs sampling; NaN entries are missing.

    Parameters
    ----------
    adata : anndata.AnnData
    layer, key_added
        As for :func:`rank_factor`.
    {common}

    Returns
    -------
    IBPFactorModel, or the AnnData copy if ``copy``. Written: ``.obsm["X_<key>"]`` (posterior mean
    of Z * X), ``.varm["<key>_loadings"]`` (final draw), ``.uns[key]`` (log-likelihood trace,
    IBP concentration and active features per sweep, R-hat / ESS table).

    Examples
    --------
    >>> from omicsbayes import io, tl
    >>> adata = io.load_demo("breast_cancer_wisconsin")[:60].copy()
    >>> est = tl.ibp_factor(adata, n_iter=10)
    >>> adata.obsm["X_ibp_factor"].shape[0]
    60
    >>> "diagnostics" in adata.uns["ibp_factor"]
    True
    """
    from ..models import IBPFactorModel

    extra = [("n_active", "n_active_"), ("alpha", "alpha_")]
    return _unsupervised(
        IBPFactorModel,
        "tl.ibp_factor",
        adata,
        layer,
        key_added,
        mask_var,
        random_state,
        copy,
        params,
        extra,
    )


@_doc
def pfa(
    adata,
    layer="counts",
    label_key=None,
    key_added="pfa",
    *,
    mask_var=None,
    allow_many_classes=False,
    random_state=0,
    copy=False,
    **params,
):
    """Fit Poisson factor analysis on counts; with ``label_key``, PFA-L-BSVM (paper 000's
    baseline: a Bayesian SVM per one-vs-rest task on the PFA scores).

    Parameters
    ----------
    adata : anndata.AnnData
    layer : str or None
        The counts (``"counts"``, as the readers store them); None: ``adata.X``.
    label_key : str, list of str or None
        None fits :class:`~omicsbayes.models.PoissonFactorAnalysis`; a column (or a list of
        binary task columns, as in :func:`rank_factor`) fits
        :class:`~omicsbayes.models.PFAClassifier` (missing labels allowed).
    key_added : str
    {many_classes}
    {common}

    Returns
    -------
    The estimator, or the AnnData copy if ``copy``. Written: ``.obsm["X_<key>"]`` (posterior mean
    scores theta), ``.varm["<key>_loadings"]`` (loading simplices), ``.obs["<key>_decision..."]``
    (classifier), ``.uns[key]`` (log-likelihood trace, R-hat / ESS table).

    Examples
    --------
    >>> from omicsbayes import io, tl
    >>> adata = io.simulate_counts(n_samples=30, n_genes=60, random_state=0)
    >>> est = tl.pfa(adata, layer="counts", n_factors=3, n_iter=10)
    >>> adata.obsm["X_pfa"].shape
    (30, 3)
    """
    from ..models import PFAClassifier, PoissonFactorAnalysis

    who = "tl.pfa"
    if label_key is None:
        return _unsupervised(
            PoissonFactorAnalysis,
            who,
            adata,
            layer,
            key_added,
            mask_var,
            random_state,
            copy,
            params,
            [("r", "r_"), ("p", "p_")],
        )

    def fit(target):
        X, mask = _training_matrix(target, layer, mask_var, who)
        labels, Y, classes, tasks, key = joint_targets(target, label_key, who, allow_many_classes)
        single = labels is not None and len(classes) == 2 and not np.isnan(Y).any()
        est = _build(PFAClassifier, random_state, **params)
        check_estimator_memory(est, *X.shape, who)
        est.fit(X, labels if single else Y)
        write_results(
            target,
            key_added,
            est,
            mask,
            decision=est.decision_function(X),
            tasks=tasks,
            extra=_classes_extra(key, classes, tasks, layer),
        )
        return est

    return run(adata, copy, fit, who)


def _kernel(kernel, store, name, who):
    """A kernel argument: None, an array / LowRankKernel, or the key of ``store`` (obsp / varp)."""
    if not isinstance(kernel, str):
        return kernel
    if kernel not in store:
        raise ValueError(
            f"{who}: {name}={kernel!r} is not a key of {store.attrname}; keys are {list(store)}"
        )
    value = store[kernel]
    return value.toarray() if sp.issparse(value) else np.asarray(value)


def mvgp(
    adata,
    model="ConstrainedMVGP",
    layer=None,
    key_added="mvgp",
    *,
    row_kernel=None,
    col_kernel=None,
    negative_ratio=None,
    random_state=0,
    copy=False,
    **params,
):
    """Fit paper 004's matrix-variate GP (or a baseline) on an association AnnData.

    ``adata`` is rows x columns (e.g. diseases x genes). Observed entries: the stored entries of a
    sparse X / layer (explicit zeros included), or the non-NaN entries of a dense one. For a
    positive-only association list, ``negative_ratio`` adds that many unknown entries per positive
    as zeros (one set drawn by :func:`omicsbayes.evaluate.splitters.sample_negatives`; the
    workflow's protocol averages several).

    Parameters
    ----------
    adata : anndata.AnnData
    model : {"ConstrainedMVGP", "TraceGP", "MVGP", "KPMF", "PMF"}
    layer, key_added
        As for :func:`rank_factor`.
    row_kernel, col_kernel : None, array, LowRankKernel or str
        Prior covariances over all rows / columns; a string names an ``.obsp`` / ``.varp`` entry
        (e.g. ``diffusion_kernel`` of a disease graph). None: the identity.
    negative_ratio : float or None
    random_state, copy, **params
        As for :func:`rank_factor`.

    Returns
    -------
    The estimator, or the AnnData copy if ``copy``. Written: ``.layers[key]`` (the posterior mean
    of every entry), ``.obsm["X_<key>"]`` and ``.varm["<key>_loadings"]`` (row and column
    factors of the factor models) and ``.uns[key]`` (params, objective trace).

    Examples
    --------
    >>> import anndata as ad
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from omicsbayes import tl
    >>> known = sp.csr_matrix(np.eye(6, 5) + np.eye(6, 5, k=1))  # stored entries: associations
    >>> adata = ad.AnnData(known)
    >>> est = tl.mvgp(adata, model="PMF", negative_ratio=1.0, rank=2, sigma2=0.1)
    >>> adata.layers["mvgp"].shape  # posterior mean of every entry
    (6, 5)
    """
    from .. import models
    from ..evaluate.splitters import sample_negatives
    from ..models._capabilities import models_with

    who = "tl.mvgp"
    known = sorted(models_with("matrix_completion"))
    if model not in known:
        raise ValueError(f"{who}: model={model!r}; expected one of {known}")
    if negative_ratio is not None and not (
        isinstance(negative_ratio, Real) and not isinstance(negative_ratio, bool)
        and negative_ratio > 0
    ):  # fmt: skip
        raise ValueError(
            f"{who}: negative_ratio={negative_ratio!r}; expected a number > 0 (unknown entries "
            "drawn per known one) or None"
        )

    def fit(target):
        M = values_of(target, layer, who)
        if sp.issparse(M):
            coo = M.tocoo()
            rows, cols, values = coo.row, coo.col, coo.data.astype(float)
        else:
            M = np.asarray(M, dtype=float)
            rows, cols = np.nonzero(~np.isnan(M))
            values = M[rows, cols]
        check_entries(
            target.shape,
            len(values),
            who,
            "adata.X" if layer is None else f"adata.layers[{layer!r}]",
        )
        if negative_ratio is not None:
            ((neg_rows, neg_cols),) = sample_negatives(
                rows, cols, target.shape, 1, negative_ratio, random_state=random_state
            )
            rows, cols = np.concatenate([rows, neg_rows]), np.concatenate([cols, neg_cols])
            values = np.concatenate([values, np.zeros(len(neg_rows))])
        n_rows, n_cols = target.shape
        check_memory(
            who,
            8 * n_rows * n_cols,
            f"{n_rows} rows x {n_cols} columns",
            f"the dense posterior mean of every entry, layers[{key_added!r}]",
            "fit on fewer rows or columns",
        )
        est = _build(getattr(models, model), random_state, **params)
        est.fit(
            rows,
            cols,
            values,
            target.shape,
            row_kernel=_kernel(row_kernel, target.obsp, "row_kernel", who),
            col_kernel=_kernel(col_kernel, target.varp, "col_kernel", who),
        )
        target.layers[key_added] = est.predict_rows()
        extra = {"layer": layer, "n_observed": len(values), "negative_ratio": negative_ratio}
        write_results(target, key_added, est, np.ones(target.n_vars, bool), extra=extra)
        return est

    return run(adata, copy, fit, who)
