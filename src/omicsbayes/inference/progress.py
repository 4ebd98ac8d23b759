"""Progress of an iterative fit: an INFO log line every ~10 % of iterations (iteration, the
monitored value, seconds elapsed and estimated seconds left), and a tqdm bar when verbose."""

import logging
import time

logger = logging.getLogger("omicsbayes")


class Progress:
    """Report the progress of ``total`` iterations of the fit called ``name``.

    ``first`` is the iteration a resumed fit starts at (a chain restored from a checkpoint): the
    bar starts there and the time left is estimated from the iterations run in this session.
    """

    def __init__(self, total, name, verbose=False, first=0):
        self.total = int(total)
        self.name = name
        self.first = int(first)
        self.start = time.perf_counter()
        self.every = max(1, self.total // 10)
        self.bar = None
        if verbose:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, initial=self.first, desc=name)

    def step(self, iteration, value, label="bound"):
        """Record that 0-based ``iteration`` finished with ``value`` of the monitored ``label``."""
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix({label: f"{value:.4g}"})
        done = iteration + 1
        if done % self.every == 0 or done == self.total:
            elapsed = time.perf_counter() - self.start
            logger.info(
                "%s iteration %d/%d %s %.6g elapsed %.1fs left ~%.1fs",
                self.name,
                done,
                self.total,
                label,
                value,
                elapsed,
                elapsed / max(done - self.first, 1) * (self.total - done),
            )

    def close(self):
        if self.bar is not None:
            self.bar.close()
