"""The HTML report: every table and figure the run produced is in it, and it loads in Chromium.

The browser part needs Debian's chromium and chromium-driver (``make test`` installs them where it
can); it is skipped, saying why, on a machine without them.
"""

import shutil

import pandas as pd
import pytest

pytestmark = pytest.mark.workflow
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def report(tiny_run):
    """The shared tiny run (tests/conftest.py) and its report."""
    return tiny_run, tiny_run / "results" / "report.html"


def test_report_references_every_table_and_figure(report):
    workdir, path = report
    html = path.read_text()
    produced = [p for p in (workdir / "results").rglob("*") if p.suffix in (".tsv", ".png")]
    shown = [p for p in produced if "/fits/" not in str(p) and "/splits/" not in str(p)]
    assert shown, "the run produced no table or figure"
    for p in shown:
        assert p.name in html, f"{p.relative_to(workdir)} is not in the report"
    for experiment in ("malignant", "digits_ovr", "n2", "n3"):  # grouped by experiment
        assert experiment in html
    assert "Summary" in html


def test_summary_page_names_each_papers_winner(report):
    workdir, path = report
    table = pd.read_csv(workdir / "results" / "winners.tsv", sep="\t", dtype={"paper": str})
    assert list(table["experiment"]) == ["malignant", "digits_ovr", "n2", "n3"]  # by paper
    assert list(table["paper"].fillna("")) == ["", "000", "003", "003"]
    assert list(table["metric"]) == ["auroc", "auroc", "accuracy", "accuracy"]
    for row in table.itertuples():  # the winner's mean and margin, again from metrics.tsv
        metrics = pd.read_csv(workdir / "results" / row.experiment / "metrics.tsv", sep="\t")
        means = metrics.groupby(["model", "split"])[row.metric].mean().groupby("model").mean()
        assert means.idxmax() == row.winner and means.max() == pytest.approx(row.winner_mean)
        assert row.margin == pytest.approx(means.max() - means.drop(row.winner).max())
        ahead = row.margin > 2 * row.margin_se  # the two-standard-error rule
        assert row.ahead == ahead
        verb = (
            "tied with"
            if abs(row.margin) < 1e-9
            else "ahead of"
            if ahead
            else "not clearly ahead of"
        )
        assert row.statement.startswith(f"{row.winner} {verb} {row.runner_up}")
    assert "winners.tsv" in path.read_text()


@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian's chromium/chromium-driver not installed"
)
def test_report_loads_in_headless_chromium_without_console_errors(report):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    _, path = report
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(path.as_uri())
        driver.implicitly_wait(5)
        body = driver.find_element("tag name", "body").text
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()
    assert body.strip(), "the report rendered an empty page"
    assert not errors, errors
