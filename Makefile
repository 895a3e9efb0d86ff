# make demo: MoCo-v2 and MixCo on scikit-learn's digits, 2 seeds each (two one-process runs at a time),
# trained and evaluated into results/suites/demo_digits/ and work_dirs/ (both ignored by git), with a
# random-init encoder for reference, the suite's leaderboard and monitor curves, then compared with
# the published records (results/reference/demo_digits/). A rerun skips finished runs and renders.
# make publish (maintainers): the demo's records become the published reference, and README's
# demo block and docs/figures/ are regenerated from them.
# make test: the test suite in WORKERS pytest-xdist processes (default 3 for a 2-core machine:
# the slow tests wait for SLURM, timeouts and signals part of the time, and a third worker
# uses the core a waiting one leaves; WORKERS=0 runs it in one process), then its 25 slowest
# tests;
# make test-fast: without the tests marked slow (tests/e2e/ and the others that take seconds).
# make coverage: the test suite (in the same workers) with line coverage of benchmark, methods
# and tools, subprocesses included (TESTS=tests/tools for a part of it).
# All three run the tests in a random order (pytest-randomly); its seed is in pytest's header,
# which -q would hide.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install install-gpu test test-fast coverage demo publish clean

# make install: .venv with the package and its test extra (wandb, kornia, pytest), faiss-cpu.
# make install-gpu: the same with faiss-gpu-cu12 instead of faiss-cpu (docs/install.md).
install: $(STAMP)

# mmengine and opencv-python (in a .venv made before the switch to mmengine-lite and the headless
# OpenCV) share their files with those two: they go, and the two are reinstalled whole.
# A .venv with faiss-gpu-cu12 keeps it as its only faiss.
$(STAMP): setup.cfg setup.py
	python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -e '.[test]'
	if $(PY) -m pip show -q mmengine opencv-python 2>/dev/null; then \
	  $(PY) -m pip uninstall -y --quiet mmengine opencv-python && \
	  $(PY) -m pip install --quiet --force-reinstall --no-deps \
	    $$($(PY) -m pip freeze | grep -iE '^(mmengine-lite|opencv-python-headless)=='); fi
	if $(PY) -m pip show -q faiss-gpu-cu12 2>/dev/null; then $(FAISS_GPU); fi
	touch $(STAMP)

# faiss-cpu and faiss-gpu-cu12 are both the module faiss: one replaces the other, never both.
FAISS_GPU = $(PY) -m pip uninstall -y --quiet faiss-cpu faiss-gpu-cu12 && \
	$(PY) -m pip install --quiet faiss-gpu-cu12

install-gpu: $(STAMP)
	$(FAISS_GPU)
	$(PY) -m pip list 2>/dev/null | grep -i '^faiss'

# --maxschedchunk 1: pytest-xdist hands out the tests one at a time. By default each worker
# starts with a quarter of its share in a row, so the first worker would get every slow test
# (they come first) and run them alone while the other ran out of short ones.
WORKERS ?= 3
XDIST = -n $(WORKERS) $(if $(filter 0,$(WORKERS)),,--maxschedchunk 1)
test: $(STAMP)
	$(PY) -m pytest -ra $(XDIST) --durations=25

test-fast: $(STAMP)
	$(PY) -m pytest -ra $(XDIST) -m 'not slow'

TESTS ?=
coverage: $(STAMP)
	$(PY) -m pytest -ra $(XDIST) --cov --cov-report=term $(TESTS)

# The demo suite (configs/suites/$(DEMO).py) with two of its three seeds, two runs at a time (each
# its share of the cores); runs whose records exist are skipped, so a rerun only renders.
# DEMO=demo_digits_full: the same at ResNet-18's full width (slower; no published reference).
DEMO ?= demo_digits
DEMO_SEEDS ?= 0 1
DEMO_RESULTS := results/suites/$(DEMO)
DEMO_REFERENCE := results/reference/$(DEMO)
# the random encoder is built as the suite's runs are (its width)
DEMO_RANDOM := $(if $(filter demo_digits,$(DEMO)),--cfg-options model.backbone.width=0.25,)

demo: $(STAMP)
	@start=$$(date +%s.%N); \
	if ls $(DEMO_RESULTS)/runs/*-random_init-*.json >/dev/null 2>&1; then \
	  echo "random encoder: evaluated before (its record is in $(DEMO_RESULTS)/runs)"; \
	else $(PY) tools/eval.py configs/mixco_r18_digits.py random --results-dir $(DEMO_RESULTS) $(DEMO_RANDOM) || exit $$?; fi; \
	$(PY) tools/run_suite.py configs/suites/$(DEMO).py --seeds $(DEMO_SEEDS) --parallel 2 || exit $$?; \
	echo; \
	echo "leaderboard: $(DEMO_RESULTS)/leaderboard.md (and .csv, intervals.png); explorer: $(DEMO_RESULTS)/index.html; monitor curves: $(DEMO_RESULTS)/curves.png"; \
	echo "records, per-run reports and t-SNE figures: $(DEMO_RESULTS)/runs/; checkpoints and training logs: work_dirs/suites/$(DEMO)/<run>/"; \
	echo; \
	if [ -d $(DEMO_REFERENCE) ]; then $(PY) tools/reference.py check $(DEMO_RESULTS) $(DEMO_REFERENCE) --started $$start; \
	else echo "no published reference for $(DEMO) ($(DEMO_REFERENCE))"; fi

# Maintainers: after a make demo from nothing, its records become the published reference
# (results/reference/$(DEMO)/, with the demo's time on this CPU kind in its times.md), and
# README's demo block and docs/figures/$(DEMO)_*.png are regenerated from them.
publish: $(STAMP)
	$(PY) tools/run_suite.py configs/suites/$(DEMO).py --seeds $(DEMO_SEEDS) --parallel 2 --publish README.md
	$(PY) tools/reference.py store $(DEMO_RESULTS) $(DEMO_REFERENCE)

clean:
	rm -rf work_dirs .pytest_cache .coverage .coverage.*
