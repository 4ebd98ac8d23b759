"""Figures, each a function of saved result tables (never of a live model).

Model families add their own modules here (``rank_factor``, ``bam``, ``rflvm``, ``bm2pca``,
``mvgp``); the workflow-wide figures live in :mod:`.metrics`.
"""

from .metrics import metric_boxplots

__all__ = ["metric_boxplots"]
