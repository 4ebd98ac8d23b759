"""One global seed plus a job's wildcards decide every random draw."""

import hashlib


def derive_seed(global_seed, *parts):
    """A 32-bit seed from the global seed and any wildcard values, stable across runs and hosts.

    >>> derive_seed(1, "cohort", "model", 3) == derive_seed(1, "cohort", "model", 3)
    True
    """
    text = "\x1f".join([str(int(global_seed)), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
