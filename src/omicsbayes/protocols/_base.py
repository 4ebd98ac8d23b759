"""The base class of the experiment kinds and the registry its subclasses join.

A subclass that sets ``name`` is an experiment kind: defining it registers one instance under
that name (:meth:`ExperimentKind.__init_subclass__`), so the kinds, the config schema's ``kind``
and protocol ``type`` enums and the workflow's rule files come from the subclasses that exist.
"""

import abc

from .._seed import derive_seed
from ._common import split_count

_REGISTRY = {}
"""Kind name -> the instance of its :class:`ExperimentKind` subclass."""

FOLD_KEYS = ("transform", "model", "split")
"""The columns :meth:`ExperimentKind.metric_table` receives after the fold tables' own columns:
the fit's wildcard values (``transform`` is ``"none"`` for a kind without transforms)."""


class ExperimentKind(abc.ABC):
    """One evaluation protocol: its splits, its fold fit, its metrics, the metric its winner is
    judged on, its figure and what it needs of a model.

    A kind is a subclass that sets the class attributes below and writes :meth:`make_splits`,
    :meth:`fit_fold` and :meth:`primary_metric`; the other methods have defaults. Defining the
    subclass registers it (:func:`omicsbayes.protocols.get`). Its rule file
    ``workflow/rules/<name>.smk`` owns the fit rule and every output path; the methods here
    return tables and wildcard values, never paths.

    Attributes
    ----------
    name : str
        The name a config's ``experiments.<name>.kind`` gives.
    requires : frozenset of str
        Capabilities (:data:`omicsbayes.models._capabilities.CAPABILITIES`) a model must declare.
    split_counts : dict
        Protocol type (``protocols.<name>.type``) -> (config key of its split count, default).
    transforms : bool
        Whether the experiment fits the transformed cohort (and lists ``transforms``).
    metrics : tuple of str
        The metric columns of :meth:`metric_table`, summarised per experiment.
    summary_by : tuple of str
        Further columns the summary groups by (``k`` of P@k and R@k).
    reads_labels : bool
        Whether its experiments take their classes from the cohort's ``label`` column: the config
        check reads each such cohort's sample sheet before any job and gives the labels to
        :meth:`check_labels`.
    model_figures : bool
        Whether an experiment may list models under ``figures:``, drawn from one fit on the whole
        cohort (``workflow/rules/model_figures.smk``); such a kind defines
        :meth:`figure_labels` and :meth:`figure_groups`.
    sweeps : bool
        Whether a ``sweeps:`` entry may draw its experiments (``workflow/rules/sweeps.smk``: a
        summary metric per model, task and transform against a varied setting).

    Examples
    --------
    >>> from omicsbayes import protocols
    >>> kind = protocols.get("rating")
    >>> kind.name, sorted(kind.requires), kind.primary_metric({})
    ('rating', ['entry_values', 'matrix_completion'], ('rmse', False))
    >>> kind.fits("ratings", {"models": ["PMF"]}, range(2))[1]
    {'experiment': 'ratings', 'model': 'PMF', 'split': 1}
    """

    name = None
    requires = frozenset()
    split_counts = {}
    transforms = False
    metrics = ()
    summary_by = ()
    reads_labels = False
    model_figures = False
    sweeps = False

    def __init_subclass__(cls, **kwargs):
        """Register a subclass that sets ``name``; one with an abstract method left or a name
        another kind holds is refused (TypeError)."""
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            return
        # ABCMeta marks the class abstract only after this hook: ask the methods themselves
        missing = [
            m for m in dir(cls) if getattr(getattr(cls, m, None), "__isabstractmethod__", False)
        ]
        if missing:
            raise TypeError(f"experiment kind {cls.name!r} ({cls.__name__}) lacks {missing}")
        unfigured = [m for m in FIGURE_HOOKS if getattr(cls, m) is getattr(ExperimentKind, m)]
        if cls.model_figures and unfigured:
            raise TypeError(
                f"experiment kind {cls.name!r} ({cls.__name__}) sets model_figures but does not "
                f"define {unfigured}, which the model figures' jobs ask it for"
            )
        known = _REGISTRY.get(cls.name)
        if known is not None and _origin(type(known)) != _origin(cls):
            raise TypeError(
                f"experiment kind {cls.name!r} is already {_origin(type(known))}; "
                f"{_origin(cls)} cannot take its name"
            )
        _REGISTRY[cls.name] = cls()

    def __repr__(self):
        return f"<experiment kind {self.name!r}>"

    @abc.abstractmethod
    def make_splits(self, adata, protocol, random_state, label=None):
        """The split table of a cohort for a protocol entry (the ``split`` rule)."""

    def n_splits(self, protocol):
        """Number of splits a protocol entry of this kind defines."""
        return split_count(protocol, self.split_counts)

    def fits(self, name, experiment, splits):
        """Wildcard values of every fit job output the ``evaluate`` rule reads, in its order.

        By default one job per (transform,) model and split: dicts with ``experiment``,
        ``transform`` (for a kind with transforms), ``model`` and ``split``. The kind's rule file
        fills its fit rule's output path with them.
        """
        transforms = experiment["transforms"] if self.transforms else [None]
        return [
            {
                "experiment": name,
                **({"transform": t} if self.transforms else {}),
                "model": m,
                "split": s,
            }
            for t in transforms
            for m in experiment["models"]
            for s in splits
        ]

    def seed(self, global_seed, wildcards, split):
        """The ``random_state`` of one split's fit: :func:`omicsbayes._seed.derive_seed` of the
        global seed, the experiment, the transform (a kind with transforms), the model and the
        split."""
        transform = [wildcards["transform"]] if self.transforms else []
        return derive_seed(
            global_seed, wildcards["experiment"], *transform, wildcards["model"], split
        )

    @abc.abstractmethod
    def fit_fold(self, adata, splits, params, wildcards, checkpoint=None):
        """Fit one job's model and return its tables.

        Parameters
        ----------
        adata : anndata.AnnData
            The cohort the fit rule reads: transformed (a kind with transforms) or as read.
        splits : pandas.DataFrame
            The cohort's split table for the experiment's protocol (every split).
        params : mapping
            The fit rule's params: ``experiment``, ``model`` (config entries) and whatever else
            the kind's rule file gives (``cohort``, ``protocol``, ``steps``, ``seed``).
        wildcards : mapping
            The job's wildcard values (one dict of :meth:`fits`).
        checkpoint : str, optional
            A file a resumable fit may keep its state in.

        Returns
        -------
        dict of str to pandas.DataFrame
            One table per named output of the fit rule.
        """

    def metric_table(self, joined):
        """Per-split metrics from the concatenated fold tables (each row with its
        :data:`FOLD_KEYS`): by default the fold rows as they are.

        Returns
        -------
        table : pandas.DataFrame
        metrics : tuple of str
            The columns the summary gives mean and sd of.
        by : list of str
            Further keys the summary groups by.
        """
        keys = list(FOLD_KEYS)
        own = [c for c in joined.columns if c not in keys]
        return joined[[*keys, *own]], self.metrics, list(self.summary_by)

    @abc.abstractmethod
    def primary_metric(self, experiment):
        """The metric column an experiment is judged on (the report's winner) and whether
        higher is better."""

    def figure(self, metrics, title, experiment, specs):
        """The metrics figure of one experiment (``specs``: its model entries); by default box
        plots of :attr:`metrics` per split."""
        from ..pl.metrics import metric_boxplots

        return metric_boxplots(metrics, title=title, columns=self.metrics)

    def check(self, name, experiment, config):  # noqa: B027 (a kind may have no checks)
        """Kind-specific config checks, raising
        :class:`~omicsbayes.protocols.ExperimentError` with the config key; by default none."""

    def check_labels(self, name, experiment, config, labels):  # noqa: B027
        """Checks of experiment ``name`` against its cohort's labels before any job, for a kind
        that :attr:`reads_labels` (:func:`omicsbayes.config.check_cohort_labels`), raising
        :class:`~omicsbayes.protocols.ExperimentError` with the config key; by default none.

        ``labels`` (pandas.Series of str) are the labelled values of the cohort's sample sheet,
        as its data job will write them (``label_map`` and ``keep_labels`` applied).
        """

    def figure_labels(self, adata, experiment, cohort):
        """What the whole-cohort fit of the model figures learns, for a kind that sets
        :attr:`model_figures` (``workflow/scripts/fit_summary.py`` gives it to
        :func:`omicsbayes.tl.rank_factor`).

        Parameters
        ----------
        adata : anndata.AnnData
            The cohort the fit reads; the kind may add the task columns it names to ``.obs``.
        experiment, cohort : mapping
            The config's entries of the experiment and of its cohort.

        Returns
        -------
        label_key : str or list of str
            One ``.obs`` column whose classes are the tasks, or one binary ``.obs`` column per
            task.
        tasks : list of str or None
            The task names of a list ``label_key``, in its order; None for one column (``tl``
            names the tasks by its classes).
        """
        raise NotImplementedError(f"experiment kind {self.name!r} has no model figures")

    def figure_groups(self, obs, experiment, cohort, task):
        """The group of each sample in task ``task`` of the whole-cohort fit, for Figure 1 of the
        model figures (``workflow/scripts/model_figures.py``), for a kind that sets
        :attr:`model_figures`.

        Parameters
        ----------
        obs : pandas.DataFrame
            The sample sheet of the cohort as read (``raw.h5ad``).
        experiment, cohort : mapping
            The config's entries of the experiment and of its cohort.
        task : str
            A task name of the fit (a row of its ``coef.tsv``).

        Returns
        -------
        ndarray of object, shape (n_samples,)
            A group name per sample; None for a sample outside the task.
        """
        raise NotImplementedError(f"experiment kind {self.name!r} has no model figures")


FIGURE_HOOKS = ("figure_labels", "figure_groups")
"""The methods a kind that sets :attr:`ExperimentKind.model_figures` defines."""


def _origin(cls):
    return f"{cls.__module__}.{cls.__qualname__}"
