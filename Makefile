# `make demo` and `make test` set everything up on a fresh machine (Python >= 3.10 on PATH).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# torch is pinned first so that a machine with a local CPU wheel uses it; the package's `agents` and `real`
# extras ask only for torch>=2.2, so a GPU machine may install its CUDA build instead.
TORCH ?= torch==2.13.0

.PHONY: install lint test test-fast demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e '.[agents,real,plot,solvers,ray,rllib,torchrl,dev]'
	touch $(STAMP)

lint: install
	$(VENV)/bin/ruff check .

test: lint
	$(PY) -m pytest -q

# the suite without the tests marked slow (training runs, notebooks, MILP solves, Ray and multi-process runs);
# `make test` (and CI) run everything
test-fast: lint
	$(PY) -m pytest -q -m "not slow"

demo: install
	$(VENV)/bin/doppler demo

bench: install
	$(PY) -m benchmarks.bench_sim

clean:
	rm -rf $(VENV) build *.egg-info
