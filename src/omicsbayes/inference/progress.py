"""Progress of an iterative fit.

With ``verbose`` a fit that runs longer than :data:`DELAY` seconds (or the ``TQDM_DELAY``
environment variable, tqdm's own override of its ``delay``) shows its progress:
a ``tqdm.auto`` bar in a terminal (text) or in Jupyter (a widget), one bar per chain on its own
line (``position``), and, when stderr is neither (a log file, a pipe), a line every ~10 % of the
iterations instead. Every fit also logs those lines at INFO level on the ``omicsbayes`` logger.

Chains run in worker processes (:func:`~omicsbayes.inference.chain.sample_chains`) send their
progress to the main process through a local socket (:func:`chain_context`), which draws the
bars (:class:`ChainBars`), so that the bars of parallel chains appear where the user looks.
"""

import contextlib
import contextvars
import logging
import os
import secrets
import sys
import threading
import time
from multiprocessing.connection import Client, Listener

logger = logging.getLogger("omicsbayes")

DELAY = 2.0
"""Seconds a fit runs before its progress shows (shorter fits stay silent)."""


def _delay():
    """Seconds before progress shows: ``TQDM_DELAY`` from the environment, else :data:`DELAY`."""
    value = os.environ.get("TQDM_DELAY")
    if value is None:
        return DELAY
    try:
        return float(value)
    except ValueError:
        raise ValueError(
            f"The environment variable TQDM_DELAY must be a number of seconds. Got {value!r}."
        ) from None


_CHAIN = contextvars.ContextVar("omicsbayes_chain", default=(0, 1, None))


@contextlib.contextmanager
def chain_context(chain, n_chains, relay=None):
    """Within the block, a :class:`Progress` is chain ``chain`` of ``n_chains`` (its bar on line
    ``chain``) and, given the ``relay`` of a :class:`ChainBars`, sends its updates there."""
    token = _CHAIN.set((int(chain), int(n_chains), relay))
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
    bar starts there and the time left is estimated from the iterations this process has run.
    Inside :func:`chain_context` the bar is that chain's (on its own line); with a relay the
    updates go to the main process instead.
    """

    def __init__(self, total, name, verbose=False, first=0):
        chain, n_chains, relay = _CHAIN.get()
        self.total = int(total)
        self.name = name if n_chains == 1 else f"{name} chain {chain + 1}/{n_chains}"
        self.first = int(first)
        self.done = self.first
        self.start = time.perf_counter()
        self.every = max(1, self.total // 10)
        self.verbose = bool(verbose)
        self.conn = Client(relay[0], authkey=relay[1]) if verbose and relay else None
        self.chain = chain
        self.delay = _delay()
        self.bar = None
        if self.conn is not None:
            self.conn.send(("open", chain, self.total, self.name, self.first))
        elif verbose and _interactive():
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=self.total,
                initial=self.first,
                desc=self.name,
                position=chain,
                leave=True,
                delay=self.delay,
            )

    def step(self, iteration, value, label="bound"):
        """Record that 0-based ``iteration`` finished with ``value`` of the monitored ``label``
        (the progress moves to ``iteration + 1`` of ``total``, so a step may skip iterations)."""
        if self.conn is not None:
            self.conn.send(("step", self.chain, iteration, float(value), label))
            return
        done = iteration + 1
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            self.bar.set_postfix({label: f"{value:.4g}"}, refresh=False)
        previous, self.done = self.done, done
        if done // self.every > previous // self.every or done == self.total:
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
            if self.verbose and self.bar is None and elapsed >= self.delay:
                if not logger.isEnabledFor(logging.INFO) or not logger.hasHandlers():
                    print(line % args, file=sys.stderr, flush=True)

    def close(self):
        """End the report (the bar stays on screen)."""
        if self.conn is not None:
            self.conn.send(("close", self.chain))
            self.conn.close()
        elif self.bar is not None:
            self.bar.close()


class ChainBars:
    """The main process's side of chains run in worker processes: a listener (a local socket,
    no extra process) to which each worker's :class:`Progress` connects and sends its updates,
    reported here with a :class:`Progress` per chain (one bar per chain, each on its own line).

    ``relay`` is what a worker needs to connect (give it to :func:`chain_context`).
    """

    def __init__(self):
        authkey = secrets.token_bytes(16)
        self._listener = Listener(authkey=authkey)
        self.relay = (self._listener.address, authkey)
        self._lock = threading.Lock()
        self._shown = {}
        self._readers = []
        self._stopping = False
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self):
        while True:
            try:
                conn = self._listener.accept()
            except (OSError, EOFError):  # a connection that failed the handshake
                continue
            if self._stopping:
                conn.close()
                return
            reader = threading.Thread(target=self._read, args=(conn,), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _read(self, conn):
        with conn:
            while True:
                try:
                    kind, chain, *rest = conn.recv()
                except (EOFError, OSError):
                    return
                with self._lock:
                    if kind == "open":
                        total, name, first = rest
                        with chain_context(chain, 1):
                            self._shown[chain] = Progress(total, name, True, first)
                    elif kind == "step":
                        self._shown[chain].step(*rest)
                    else:
                        self._shown.pop(chain).close()
                        return

    def stop(self, timeout=5.0):
        """Report what the workers sent (waiting at most ``timeout`` seconds for each), then
        close the listener and any bar left open."""
        self._stopping = True
        Client(self.relay[0], authkey=self.relay[1]).close()  # wakes the accepting thread
        self._accepting.join()
        self._listener.close()
        for reader in self._readers:
            reader.join(timeout)
        with self._lock:
            for progress in self._shown.values():
                progress.close()
            self._shown.clear()
