"""Cohort files given by URL: fetched by Snakemake's storage plugin from a loopback HTTP server,
kept in the local storage cache and read from it offline; a wrong pinned checksum, a missing file,
an unreachable host, a file in the wrong format and a sheet without its label column each stopped
before any model job; ftp:// files through the FTP plugin from a loopback FTP server (pyftpdlib).
Plus the pure helpers of omicsbayes.downloads and the paper configs (config/papers/) against the
schema; tests/test_paper_configs.py runs them from loopback URLs."""

import base64
import functools
import gzip
import hashlib
import http.server
import shutil
import threading
from pathlib import Path

import pandas as pd
import pytest
import yaml

from omicsbayes.downloads import (
    STORAGE_PLUGINS,
    DownloadError,
    check_download,
    local_spec,
    missing_plugin,
    remote_files,
)

REPO = Path(__file__).resolve().parents[1]
GEO = REPO / "tests" / "fixtures" / "examples" / "geo"
SERIES, PLATFORM = "GSE900001_series_matrix.txt.gz", "GPL6947.annot.gz"


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # requests go to the server's list, not stderr
        self.server.requests.append(self.requestline)

    def do_GET(self):
        """``/cut/<name>``: the served file's headers, then a tenth of its bytes and a hang-up."""
        if not self.path.startswith("/cut/"):
            return super().do_GET()
        data = (Path(self.directory) / self.path.removeprefix("/cut/")).read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 10])
        self.wfile.flush()
        self.close_connection = True

    def do_HEAD(self):
        if self.path.startswith("/cut/"):
            self.path = self.path.removeprefix("/cut")
        return super().do_HEAD()


class LoopbackServer:
    """A static HTTP server on 127.0.0.1 (a free port) serving ``folder`` from a thread."""

    def __init__(self, folder):
        handler = functools.partial(_Handler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.requests = []
        self.httpd.timeout = 5
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def requests(self):
        return self.httpd.requests

    def stop(self):
        if self.thread.is_alive():
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(timeout=10)


@pytest.fixture
def server(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    for name in (SERIES, PLATFORM):
        shutil.copy(GEO / name, folder / name)
    srv = LoopbackServer(folder)
    yield srv
    srv.stop()


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def geo_config(base, **cohort):
    """geo_tuberculosis's cohort from ``base`` URLs, one transform, one baseline, two folds."""
    return {
        "seed": 3,
        "cohorts": {
            "tb": {
                "format": "geo",
                "path": f"{base}/{SERIES}",
                "annotation": f"{base}/{PLATFORM}",
                "collapse": "max_mean",
                "label": "illness",
                **cohort,
            }
        },
        "transforms": {"z": {"steps": [{"name": "top_genes", "n": 30, "by": "mean"}, "zscore"]}},
        "protocols": {"cv2": {"type": "stratified_kfold", "n_splits": 2}},
        "models": {"logistic": {"class": "LogisticBaseline"}},
        "experiments": {
            "tb_groups": {
                "cohort": "tb",
                "task": {"kind": "one_vs_rest"},
                "transforms": ["z"],
                "models": ["logistic"],
                "protocol": "cv2",
            }
        },
    }


def _cache(workdir, server, name):
    host = server.url.split("://", 1)[1]
    return Path(workdir) / ".snakemake" / "storage" / "http" / host / name


def _no_model_job(workdir):
    workdir = Path(workdir)
    return not (workdir / "logs" / "fit").exists() and not (workdir / "results" / "tb").exists()


@pytest.mark.workflow
def test_first_run_downloads_second_run_reads_the_cache_offline(tmp_path, server, snakemake_run):
    work = tmp_path / "run"
    config = geo_config(server.url)
    result = snakemake_run(work, "--cores", "2", config=config, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert any(r.startswith(f"GET /{SERIES}") for r in server.requests)
    assert any(r.startswith(f"GET /{PLATFORM}") for r in server.requests)
    for name in (SERIES, PLATFORM):
        assert _cache(work, server, name).read_bytes() == (GEO / name).read_bytes()
    record = pd.read_csv(work / "results" / "downloads.tsv", sep="\t")
    assert list(record["key"]) == ["cohorts.tb.path", "cohorts.tb.annotation"]
    assert list(record["url"]) == [f"{server.url}/{SERIES}", f"{server.url}/{PLATFORM}"]
    assert list(record["sha256"]) == [_sha256(GEO / SERIES), _sha256(GEO / PLATFORM)]
    assert list(record["bytes"]) == [(GEO / n).stat().st_size for n in (SERIES, PLATFORM)]
    assert set(record["pinned"]) == {"no"}
    metrics = (work / "results" / "tb_groups" / "metrics.tsv").read_bytes()

    server.stop()  # offline: the second run reads the cache, every job again
    shutil.rmtree(work / "results")
    shutil.rmtree(work / "logs")
    result = snakemake_run(work, "--cores", "2", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Retrieving from storage" not in result.stderr
    assert (work / "results" / "tb_groups" / "metrics.tsv").read_bytes() == metrics
    result = snakemake_run(work, "--cores", "1", "--report", "results/report.html", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    html = (work / "results" / "report.html").read_text()
    assert "downloads.tsv" in html and "Inputs" in html
    record = (work / "results" / "downloads.tsv").read_bytes()  # every URL and its SHA-256
    assert base64.b64encode(record).decode() in html  # embedded as the report's data URI


@pytest.mark.workflow
def test_wrong_pinned_checksum_stops_before_any_model_job(tmp_path, server, snakemake_run):
    wrong = "0" * 64
    config = geo_config(server.url, sha256={"path": wrong, "annotation": _sha256(GEO / PLATFORM)})
    result = snakemake_run(tmp_path, "--cores", "2", config=config, timeout=300)
    assert result.returncode != 0
    err = result.stderr
    assert f"{server.url}/{SERIES}" in err and "cohorts.tb.path" in err
    assert wrong in err and _sha256(GEO / SERIES) in err
    assert _no_model_job(tmp_path)
    assert not _cache(tmp_path, server, SERIES).exists()  # refused copies leave the cache


@pytest.mark.workflow
def test_a_changed_pin_reruns_the_fetch_check(tmp_path, server, snakemake_run):
    """The fetch job's checks come from its params: pinning a wrong checksum after a run that
    fetched the file reruns it (Snakemake's params trigger), which refuses before any model job
    and drops the cached copy; the right pin fetches it again and passes."""
    config = geo_config(server.url)
    result = snakemake_run(tmp_path, "--cores", "2", "--until", "fetch", config=config)
    assert result.returncode == 0, result.stderr[-3000:]
    wrong = "0" * 64
    config["cohorts"]["tb"]["sha256"] = {"path": wrong}
    result = snakemake_run(tmp_path, "--cores", "2", config=config, timeout=300)
    assert result.returncode != 0
    assert "Error in rule fetch" in result.stderr, result.stderr[-3000:]
    assert f"cohorts.tb.path: {server.url}/{SERIES}" in result.stderr
    assert wrong in result.stderr and _sha256(GEO / SERIES) in result.stderr
    assert not (tmp_path / "logs" / "fit").exists()
    config["cohorts"]["tb"]["sha256"] = {"path": _sha256(GEO / SERIES)}
    result = snakemake_run(tmp_path, "--cores", "2", "--until", "fetch", config=config)
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(pd.read_csv(tmp_path / "results" / "downloads.tsv", sep="\t")["pinned"]) == [
        "yes",
        "no",
    ]


@pytest.mark.workflow
@pytest.mark.parametrize("fault", ["http_404", "unreachable"])
def test_missing_or_unreachable_file_stops_before_any_job(tmp_path, server, snakemake_run, fault):
    config = geo_config(server.url)
    if fault == "http_404":
        config["cohorts"]["tb"]["annotation"] = f"{server.url}/GPL0.annot.gz"
        expected = ["cohorts.tb.annotation", f"{server.url}/GPL0.annot.gz", "not found"]
    else:
        server.stop()
        expected = ["cohorts.tb.path", f"{server.url}/{SERIES}", "cannot be reached"]
    result = snakemake_run(tmp_path, "--cores", "2", config=config, timeout=120)
    assert result.returncode != 0
    for text in expected:
        assert text in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()
    assert not list((tmp_path / ".snakemake" / "storage").rglob("*.gz"))


@pytest.mark.workflow
@pytest.mark.parametrize("fault", ["html_page", "not_a_series_matrix", "truncated_table"])
def test_file_in_the_wrong_format_is_refused_naming_key_and_url(
    tmp_path, server, snakemake_run, fault
):
    """An HTML page is refused by the fetch job's file check, a table that is no series matrix
    by its sample-sheet check (the series matrix's header lines), a series matrix whose table
    is cut short by the data job's reader; each time one message names the key and the URL and
    no model job runs."""
    served = Path(server.httpd.RequestHandlerClass.keywords["directory"])
    config = geo_config(server.url)
    if fault == "html_page":
        (served / "error.annot.gz").write_text("<!DOCTYPE html><html><body>Moved</body></html>\n")
        config["cohorts"]["tb"]["annotation"] = url = f"{server.url}/error.annot.gz"
        expected = ["cohorts.tb.annotation", url, "HTML page"]
    elif fault == "not_a_series_matrix":
        shutil.copy(REPO / "tests/fixtures/io/samples.tsv", served / "GSE1_series_matrix.txt")
        config["cohorts"]["tb"]["path"] = url = f"{server.url}/GSE1_series_matrix.txt"
        expected = [f"config key cohorts.tb.path: {url}: no '!series_matrix_table_begin' line"]
    else:
        text = gzip.decompress((GEO / SERIES).read_bytes()).decode()
        cut = text[: text.index("!series_matrix_table_end")]
        (served / "GSE2_series_matrix.txt").write_text(cut)
        config["cohorts"]["tb"]["path"] = url = f"{server.url}/GSE2_series_matrix.txt"
        expected = [f"cohorts.tb.path = {url}", "truncated: no '!series_matrix_table_end' line"]
    result = snakemake_run(tmp_path, "--cores", "2", config=config, timeout=300)
    assert result.returncode != 0
    for text in expected:
        assert text in result.stderr, result.stderr[-2000:]
    assert _no_model_job(tmp_path)
    assert not (tmp_path / "results" / "tb" / "raw.h5ad").exists()
    if fault == "html_page":
        assert not _cache(tmp_path, server, "error.annot.gz").exists()


@pytest.mark.workflow
def test_interrupted_download_leaves_nothing_in_the_cache(tmp_path, server, snakemake_run):
    config = geo_config(server.url)
    config["cohorts"]["tb"]["path"] = url = f"{server.url}/cut/{SERIES}"
    result = snakemake_run(tmp_path, "--cores", "2", config=config, timeout=300)
    assert result.returncode != 0
    assert url in result.stderr, result.stderr[-2000:]
    assert _no_model_job(tmp_path)
    assert not _cache(tmp_path, server, f"cut/{SERIES}").exists()


@pytest.mark.workflow
def test_a_scheme_without_its_storage_plugin_is_refused_before_any_job(tmp_path, snakemake_run):
    """s3:// needs snakemake-storage-plugin-s3, which the workflow extra does not install: one
    message names the key, the URL and the package, and no job runs."""
    if missing_plugin("s3://b/x") is None:
        pytest.skip("snakemake-storage-plugin-s3 is installed here")
    config = geo_config("https://127.0.0.1:9")
    config["cohorts"]["tb"]["path"] = url = f"s3://omicsbayes-test/{SERIES}"
    result = snakemake_run(tmp_path, "--cores", "1", config=config, timeout=120)
    assert result.returncode != 0
    expected = f"config key cohorts.tb.path: {url}: no installed Snakemake storage plugin reads "
    expected += "s3:// addresses; expected the package snakemake-storage-plugin-s3"
    assert expected in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


# omicsbayes.downloads without Snakemake


def test_remote_files_reads_urls_and_pins():
    cohorts = {
        "a": {
            "format": "counts",
            "path": ["https://h/x.txt", "local.txt", "ftp://h/y.txt"],
            "sample_sheet": "https://h/s.tsv",
            "sha256": {"sample_sheet": "A" * 64, "ftp://h/y.txt": "b" * 64},
        },
        "b": {"format": "demo", "name": "digits"},
        "c": {
            "format": "associations",
            "path": "pairs.tsv",
            "row_graph": "s3://b/rows.tsv",
            "col_graph": "gs://b/cols.tsv",
        },
    }
    found = remote_files(cohorts)
    assert [(r.key, r.url, r.sha256) for r in found] == [
        ("cohorts.a.path[0]", "https://h/x.txt", None),
        ("cohorts.a.path[2]", "ftp://h/y.txt", "b" * 64),
        ("cohorts.a.sample_sheet", "https://h/s.tsv", "a" * 64),
        ("cohorts.c.row_graph", "s3://b/rows.tsv", None),
        ("cohorts.c.col_graph", "gs://b/cols.tsv", None),
    ]
    spec = local_spec(cohorts["a"], {r.url: f"cache/{i}" for i, r in enumerate(found)})
    assert spec["path"] == ["cache/0", "local.txt", "cache/1"]
    assert spec["sample_sheet"] == "cache/2" and "sha256" not in spec


def test_missing_plugin_names_the_package_of_each_scheme(monkeypatch):
    import importlib.util

    assert missing_plugin("https://h/x") is None and missing_plugin("FTP://h/x") is None
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert missing_plugin("s3://b/x") == "snakemake-storage-plugin-s3"
    assert missing_plugin("gs://b/x") == "snakemake-storage-plugin-gcs"
    assert set(STORAGE_PLUGINS) == {"http", "https", "ftp", "ftps", "s3", "gs"}


@pytest.mark.parametrize(
    "pins, expected",
    [
        ({"clinical": "a" * 64}, "cohorts.a.sha256.clinical: names no URL"),
        ({"path": "abc"}, "cohorts.a.sha256.path: 'abc' is not a SHA-256"),
    ],
)
def test_remote_files_refuses_bad_pins(pins, expected):
    cohorts = {"a": {"format": "tcga", "path": "https://h/x.txt", "clinical": "c.tsv"}}
    cohorts["a"]["sha256"] = pins
    with pytest.raises(DownloadError, match=expected):
        remote_files(cohorts)


def test_check_download_accepts_and_records(tmp_path):
    path = tmp_path / SERIES
    shutil.copy(GEO / SERIES, path)
    (remote,) = remote_files({"tb": {"format": "geo", "path": f"https://h/{SERIES}"}})
    row = check_download(remote, path)
    assert row["sha256"] == _sha256(path) and row["bytes"] == path.stat().st_size
    assert row["pinned"] == "no" and path.exists()


@pytest.mark.parametrize(
    "content, pinned, expected",
    [
        (b"", None, "empty"),
        (b"<html><body>Not here</body></html>", None, "HTML page"),
        (b"ID\tGene Symbol\n", None, "not gzip"),
        (b"\x1f\x8b\x08\x00broken", None, "damaged"),
        (None, "f" * 64, "differs from the pinned " + "f" * 64),
    ],
    ids=["empty", "html", "not_gzip", "damaged_gzip", "wrong_pin"],
)
def test_check_download_refuses_and_removes_the_copy(tmp_path, content, pinned, expected):
    path = tmp_path / "GPL1.annot.gz"
    if content is None:
        shutil.copy(GEO / PLATFORM, path)
    else:
        path.write_bytes(content)
    spec = {"format": "geo", "path": "x", "annotation": "https://h/GPL1.annot.gz"}
    if pinned:
        spec["sha256"] = {"annotation": pinned}
    (remote,) = remote_files({"tb": spec})
    with pytest.raises(DownloadError, match=expected) as err:
        check_download(remote, path)
    assert "cohorts.tb.annotation: https://h/GPL1.annot.gz" in str(err.value)
    assert not path.exists()


PAPERS = sorted((REPO / "config" / "papers").glob("paper*.yaml"))


def test_there_is_one_config_per_paper():
    assert [p.stem for p in PAPERS] == [f"paper00{i}" for i in range(5)]


@pytest.mark.parametrize("paper", PAPERS, ids=lambda p: p.stem)
def test_paper_config_passes_the_workflow_checks(paper, workflow_checks):
    config = yaml.safe_load(paper.read_text())
    workflow_checks(config)
    for remote in remote_files(config["cohorts"]):
        assert remote.url.startswith(("https://", "http://", "ftp://")), remote.key


@pytest.mark.workflow
def test_url_cohort_without_its_label_column_is_refused_before_any_model_job(
    tmp_path, server, snakemake_run
):
    """The sheet of a URL cohort is not there before the run: the fetch step checks it, before
    any data or model job; a later run finds the cached copy and refuses at parse time."""
    config = geo_config(server.url, label="ilness")
    expected = "config key cohorts.tb.label: 'ilness' is not a column of the cohort's sample "
    expected += f"sheet (the !Sample_ lines of path {server.url}/{SERIES})"
    result = snakemake_run(tmp_path, "--cores", "2", config=config, timeout=300)
    assert result.returncode != 0
    assert expected in result.stderr, result.stderr[-3000:]
    assert "Error in rule fetch" in result.stderr  # not at parse time: the file was not there
    assert "illness" in result.stderr  # among the columns it expected
    assert _no_model_job(tmp_path) and not (tmp_path / "logs" / "data").exists()
    assert _cache(tmp_path, server, SERIES).exists()  # the file itself was fine

    server.stop()
    result = snakemake_run(tmp_path, "--cores", "2", timeout=120)
    assert result.returncode != 0
    assert expected in result.stderr and "Building DAG" not in result.stdout + result.stderr
    assert _no_model_job(tmp_path)


class LoopbackFTPServer:
    """An anonymous, read-only FTP server (pyftpdlib) on 127.0.0.1 serving ``folder`` from a
    thread."""

    def __init__(self, folder):
        from pyftpdlib.authorizers import DummyAuthorizer
        from pyftpdlib.handlers import FTPHandler
        from pyftpdlib.servers import FTPServer

        authorizer = DummyAuthorizer()
        authorizer.add_anonymous(str(folder))
        handler = type("Handler", (FTPHandler,), {"authorizer": authorizer, "timeout": 30})
        self.server = FTPServer(("127.0.0.1", 0), handler)
        self.url = f"ftp://127.0.0.1:{self.server.address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"timeout": 0.5}, daemon=True
        )
        self.thread.start()

    def stop(self):
        if self.thread.is_alive():
            self.server.close_all()
            self.thread.join(timeout=10)


@pytest.mark.workflow
def test_ftp_cohort_is_fetched_by_the_storage_plugin(tmp_path, snakemake_run):
    """ftp:// cohort files through snakemake-storage-plugin-ftp from a loopback FTP server: the
    run fetches both, records them and reads them; the cached copies are the served files."""
    folder = tmp_path / "served"
    folder.mkdir()
    for name in (SERIES, PLATFORM):
        shutil.copy(GEO / name, folder / name)
    server = LoopbackFTPServer(folder)
    try:
        config = geo_config(server.url)
        work = tmp_path / "run"
        result = snakemake_run(work, "--cores", "2", "--until", "data", config=config, timeout=300)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    record = pd.read_csv(work / "results" / "downloads.tsv", sep="\t")
    assert list(record["url"]) == [f"{server.url}/{SERIES}", f"{server.url}/{PLATFORM}"]
    assert list(record["sha256"]) == [_sha256(GEO / SERIES), _sha256(GEO / PLATFORM)]
    assert (work / "results" / "tb" / "raw.h5ad").exists()
    cache = work / ".snakemake" / "storage" / "ftp" / server.url.split("://", 1)[1]
    for name in (SERIES, PLATFORM):
        assert (cache / name).read_bytes() == (GEO / name).read_bytes()
