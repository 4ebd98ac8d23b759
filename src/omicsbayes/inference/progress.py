"""Progress of an iterative fit.

With ``verbose`` a fit that runs longer than :data:`DELAY` seconds shows its progress:
a ``tqdm.auto`` bar in a terminal (text) or in Jupyter (a widget), one bar per chain on its own
line (``position``), and, when stderr is neither (a log file, a pipe), a line every ~10 % of the
iterations instead. Every fit also logs those lines at INFO level on the ``omicsbayes`` logger.

Chains run in worker processes (:func:`~omicsbayes.inference.chain.sample_chains`) send their
progress to the main process through a queue (:func:`chain_context`), which draws the bars
(:class:`ChainBars`), so that the bars of parallel chains appear where the user looks.
"""

import contextlib
import contextvars
import logging
import sys
import threading
import time

logger = logging.getLogger("omicsbayes")

DELAY = 2.0
"""Seconds a fit runs before its progress shows (shorter fits stay silent)."""

_CHAIN = contextvars.ContextVar("omicsbayes_chain", default=(0, 1, None))


@contextlib.contextmanager
def chain_context(chain, n_chains, queue=None):
    """Within the block, a :class:`Progress` is chain ``chain`` of ``n_chains`` (its bar on line
    ``chain``) and sends its updates to ``queue`` when one is given."""
    token = _CHAIN.set((int(chain), int(n_chains), queue))
    try:
        yield
    finally:
        _CHAIN.reset(token)


def _in_notebook():
    """Whether the code runs in a Jupyter kernel (where ``tqdm.auto`` draws a widget)."""
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def _interactive():
    """A bar can be drawn: stderr is a terminal or the code runs in Jupyter."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty is not None and isatty()) or _in_notebook()


class Progress:
    """Report the progress of ``total`` iterations of the fit called ``name``.

    ``first`` is the iteration a resumed fit starts at (a chain restored from a checkpoint): the
    bar starts there and the time left is estimated from the iterations run in this session.
    Inside :func:`chain_context` the bar is that chain's (on its own line); with a queue the
    updates go to the main process instead.
    """

    def __init__(self, total, name, verbose=False, first=0):
        chain, n_chains, queue = _CHAIN.get()
        self.total = int(total)
        self.name = name if n_chains == 1 else f"{name} chain {chain + 1}/{n_chains}"
        self.first = int(first)
        self.start = time.perf_counter()
        self.every = max(1, self.total // 10)
        self.verbose = bool(verbose)
        self.queue = queue if verbose else None
        self.chain = chain
        self.bar = None
        if self.queue is not None:
            self.queue.put(("open", chain, self.total, self.name, self.first))
        elif verbose and _interactive():
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=self.total,
                initial=self.first,
                desc=self.name,
                position=chain,
                leave=True,
                delay=DELAY,
            )

    def step(self, iteration, value, label="bound"):
        """Record that 0-based ``iteration`` finished with ``value`` of the monitored ``label``."""
        if self.queue is not None:
            self.queue.put(("step", self.chain, iteration, float(value), label))
            return
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix({label: f"{value:.4g}"}, refresh=False)
        done = iteration + 1
        if done % self.every == 0 or done == self.total:
            elapsed = time.perf_counter() - self.start
            args = (
                self.name,
                done,
                self.total,
                label,
                value,
                elapsed,
                elapsed / max(done - self.first, 1) * (self.total - done),
            )
            line = "%s iteration %d/%d %s %.6g elapsed %.1fs left ~%.1fs"
            logger.info(line, *args)
            if self.verbose and self.bar is None and elapsed >= DELAY:
                if not logger.isEnabledFor(logging.INFO) or not logger.hasHandlers():
                    print(line % args, file=sys.stderr, flush=True)

    def close(self):
        """End the report (the bar stays on screen)."""
        if self.queue is not None:
            self.queue.put(("close", self.chain))
        elif self.bar is not None:
            self.bar.close()


class ChainBars:
    """The main process's side of chains run elsewhere: a thread that reads the updates of
    :class:`Progress` objects in worker processes from ``queue`` and reports them with a
    :class:`Progress` per chain (one bar per chain, each on its own line)."""

    def __init__(self, queue):
        self.queue = queue
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    def _listen(self):
        shown = {}
        while True:
            message = self.queue.get()
            if message is None:
                break
            kind, chain, *rest = message
            if kind == "open":
                total, name, first = rest
                with chain_context(chain, 1):
                    shown[chain] = Progress(total, name, True, first)
            elif kind == "step":
                shown[chain].step(*rest)
            else:
                shown.pop(chain).close()
        for progress in shown.values():
            progress.close()

    def stop(self):
        """Wait until every update sent so far is reported."""
        self.queue.put(None)
        self.thread.join()
