# speechlab: `make demo` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.speechlab-installed
DEBIAN_PACKAGES := espeak-ng sox festival festvox-us-slt-hts festvox-kallpc16k festvox-kdlpc16k festvox-hi-nsk festvox-czech-dita festvox-czech-machac festvox-czech-ph festvox-suopuhe-lj festvox-suopuhe-mv festvox-italp16k festvox-itapc16k aspell-hi aspell-ta aspell-gu wamerican gettext libsndfile1 chromium chromium-driver fonts-noto-core
DEMO_OUT ?= exp/demo
# Tests and the demo are sized for 2 cores; more threads only add contention.
export OMP_NUM_THREADS ?= 2
# Test processes (pytest-xdist): each test runs on one thread, so two keep both cores busy.
TEST_WORKERS ?= 2

# The public API and every family's loaded model against speechlab.contract (also run by
# tests/test_contract.py inside make test).
.PHONY: setup debian test typecheck test-kernels test-loaded test-portable fingerprint demo bench clean

setup: debian $(STAMP)

# Installs the Debian packages that are missing; as non-root it names them and stops.
debian:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "speechlab needs these Debian packages; run as root: apt-get install$$missing" >&2; exit 1; \
	  fi; \
	fi

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, by exact pin, so no other requirement can pull a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

test: setup
	$(PY) -m pytest -q -x -n $(TEST_WORKERS) --durations=15 tests

typecheck: setup
	$(PY) -m mypy

# The tests whose outcome rests on floating-point kernels (marker `numerics`), again on
# PyTorch's other SIMD paths: what a CPU without AVX-512 (avx2) or without AVX (default)
# computes. CI runs `make test-kernels KERNELS=default`.
KERNELS ?= default avx2
test-kernels: setup
	@for k in $(KERNELS); do \
	  echo "== numerics tests with ATEN_CPU_CAPABILITY=$$k"; \
	  ATEN_CPU_CAPABILITY=$$k $(PY) -m pytest -q -x -n $(TEST_WORKERS) -p no:cacheprovider -m numerics tests || exit 1; \
	done

# The whole suite while other processes keep every core busy.
test-loaded: setup
	$(PY) -m speechlab.testing.cpu_hog -- $(PY) -m pytest -q -x -n $(TEST_WORKERS) -p no:cacheprovider tests

# Both: what `make test` must survive on a new or busy machine.
test-portable: test-kernels test-loaded

# The ci-scale tables on pinned kernels (speechlab.testing.ci_tables), recorded for this
# machine: run before a restructuring; the suite then compares against it exactly.
fingerprint: setup
	$(PY) -m speechlab.testing.ci_tables tests/experiment/ci_tables.json

# The set-up is timed here and shown in the demo's summary beside the demo's own time.
demo:
	@t0=$$(date +%s); $(MAKE) --no-print-directory setup || exit 1; t1=$$(date +%s); \
	$(VENV)/bin/speechlab demo --out $(DEMO_OUT) --setup-seconds $$((t1 - t0))

bench: setup
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/run_all.py

clean:
	rm -rf exp .pytest_cache
