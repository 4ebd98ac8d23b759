"""Remote cohort files: which file keys of a config's cohorts are URLs, their pinned checksums, the
checks a fetched copy must pass, and the record of every fetched file (``results/downloads.tsv``).

The workflow (``workflow/rules/data.smk``) fetches the URLs through Snakemake's storage plugins
into its local storage cache; this module holds what does not need Snakemake.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .io.cohort import PATH_KEYS

URL_SCHEMES = ("http", "https", "ftp", "ftps", "s3", "gs")
STORAGE_PLUGINS = {
    "http": "snakemake-storage-plugin-http",
    "https": "snakemake-storage-plugin-http",
    "ftp": "snakemake-storage-plugin-ftp",
    "ftps": "snakemake-storage-plugin-ftp",
    "s3": "snakemake-storage-plugin-s3",
    "gs": "snakemake-storage-plugin-gcs",
}
"""URL scheme -> the PyPI package of the Snakemake storage plugin that fetches it (http and ftp
are in the ``workflow`` extra; s3 and gs are installed by the user)."""
RECORD_COLUMNS = ("cohort", "key", "url", "bytes", "sha256", "pinned", "date")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class DownloadError(ValueError):
    """A remote cohort file that cannot be used: named by its cohort key and URL."""


def is_url(value) -> bool:
    """Whether a cohort file value is a URL (``scheme://...``, a scheme of ``URL_SCHEMES``)."""
    if not isinstance(value, str) or "://" not in value:
        return False
    return value.split("://", 1)[0].lower() in URL_SCHEMES


def missing_plugin(url):
    """The package of the storage plugin a URL needs when it is not installed, else None."""
    package = STORAGE_PLUGINS[url.split("://", 1)[0].lower()]
    return package if importlib.util.find_spec(package.replace("-", "_")) is None else None


@dataclass(frozen=True)
class RemoteFile:
    """One URL of a cohort: ``key`` is its config key path (``cohorts.tb.path``, or
    ``cohorts.x.path[1]`` for an entry of a list), ``sha256`` its pinned checksum or None."""

    cohort: str
    key: str
    url: str
    sha256: str | None


def remote_files(cohorts, names=None):
    """The URLs among the file keys (``PATH_KEYS``) of ``cohorts`` (all, or those in ``names``).

    ``cohorts.<name>.sha256`` maps a file key (or, for a list of URLs, the URL itself) to the
    file's SHA-256 as 64 hexadecimal digits. Raises DownloadError naming the key when a checksum
    is malformed or names no URL of the cohort.
    """
    found = []
    for cohort in names if names is not None else cohorts:
        spec = cohorts[cohort]
        pins = spec.get("sha256") or {}
        urls = {}
        for key in PATH_KEYS:
            values = spec.get(key)
            listed = isinstance(values, list)
            for i, value in enumerate(values if listed else [values]):
                if is_url(value):
                    urls[value] = (f"cohorts.{cohort}.{key}" + (f"[{i}]" if listed else ""), key)
        for pin, digest in pins.items():
            where = f"cohorts.{cohort}.sha256.{pin}"
            if not (pin in urls or any(key == pin for _, key in urls.values())):
                raise DownloadError(
                    f"{where}: names no URL of the cohort; expected a file key whose value is a "
                    f"URL ({', '.join(sorted({k for _, k in urls.values()})) or 'none here'}) "
                    "or one of its URLs"
                )
            if not isinstance(digest, str) or not _HEX64.match(digest.lower()):
                raise DownloadError(f"{where}: {digest!r} is not a SHA-256 (64 hex digits)")
        for url, (label, key) in urls.items():
            digest = pins.get(url, pins.get(key))
            found.append(RemoteFile(cohort, label, url, digest.lower() if digest else None))
    return found


def sha256sum(path) -> str:
    """The SHA-256 of a file, as 64 hexadecimal digits."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _format_fault(path: Path, url: str):
    """Why a fetched file cannot be a cohort file, or None: empty, an HTML page, a ``.gz`` name
    without gzip content."""
    with open(path, "rb") as f:
        head = f.read(512)
    if not head:
        return "the file is empty"
    if head.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        return "the server sent an HTML page, not the data file"
    name = url.split("?", 1)[0].lower()
    if name.endswith(".gz") and not head.startswith(b"\x1f\x8b"):
        return "the name ends in .gz but the content is not gzip"
    if name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as f:
                while f.read(1 << 20):
                    pass
        except (OSError, EOFError) as err:
            return f"the gzip content is damaged ({err})"
    return None


def check_download(remote: RemoteFile, path) -> dict:
    """Check one fetched file and return its row of ``results/downloads.tsv``.

    Raises DownloadError naming the cohort key, the URL (and, for a pinned file, both
    checksums) when the file's SHA-256 differs from the pinned one or the file cannot be a
    cohort file; the cached copy is then removed, so the next run fetches it again.
    """
    path = Path(path)
    try:
        fault = _format_fault(path, remote.url)
        digest = sha256sum(path)
        if fault is None and remote.sha256 and digest != remote.sha256:
            fault = f"SHA-256 {digest} differs from the pinned {remote.sha256}"
        if fault:
            raise DownloadError(f"{remote.key}: {remote.url}: {fault}; the cached copy is removed")
    except DownloadError:
        path.unlink(missing_ok=True)
        raise
    stat = path.stat()
    return {
        "cohort": remote.cohort,
        "key": remote.key,
        "url": remote.url,
        "bytes": stat.st_size,
        "sha256": digest,
        "pinned": "yes" if remote.sha256 else "no",
        "date": datetime.fromtimestamp(stat.st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def local_spec(spec, local_paths):
    """A cohort entry for ``omicsbayes.io.read_cohort``: URLs replaced by their cached copies
    (``local_paths``: URL -> path) and the ``sha256`` key dropped."""
    out = {k: v for k, v in spec.items() if k != "sha256"}
    for key in PATH_KEYS:
        value = out.get(key)
        if isinstance(value, list):
            out[key] = [local_paths.get(v, v) if is_url(v) else v for v in value]
        elif is_url(value):
            out[key] = local_paths[value]
    return out
