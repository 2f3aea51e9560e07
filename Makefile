# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: install demo test lint bench coverage clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/attnlab reproduce jiang2024-fig1 --scale cpu --out results/jiang2024-fig1-cpu

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest tests

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,bench]"
	$(BIN)/python benchmarks/bench_suite.py --check
	$(BIN)/python benchmarks/bench_trainer.py --cells 64
	$(BIN)/python benchmarks/bench_suite.py --cells 100 --json results/bench-jiang2024.json

coverage: $(STAMP)
	$(BIN)/python benchmarks/coverage_fig1.py --blocks 20 --json results/coverage-fig1.json

clean:
	rm -rf $(VENV) results
