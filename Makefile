# make demo: MoCo-v2 and MixCo on scikit-learn's digits, 2 seeds each (2 CPU processes per run),
# evaluated, with a random-init encoder for reference, the suite's leaderboard and monitor curves.
# make test: the test suite, then its 25 slowest tests; make test-fast: without tests/e2e/ (slow).
# make coverage: the test suite with line coverage of benchmark, methods and tools, subprocesses
# included (TESTS=tests/tools for a part of it).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test test-fast coverage demo clean

install: $(STAMP)

$(STAMP): setup.cfg setup.py
	python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -ra --durations=25

test-fast: $(STAMP)
	$(PY) -m pytest -q -ra -m 'not slow'

TESTS ?=
coverage: $(STAMP)
	$(PY) -m pytest -q -ra --cov --cov-report=term $(TESTS)

# The demo suite (configs/suites/demo_digits.py) with two of its three seeds, so that it fits
# in 15 minutes on 2 CPU cores; runs whose records exist are skipped, so a rerun only renders.
DEMO_SEEDS ?= 0 1
DEMO_RESULTS := results/suites/demo_digits

demo: $(STAMP)
	$(PY) tools/eval.py configs/mixco_r18_digits.py random --results-dir $(DEMO_RESULTS)
	$(PY) tools/run_suite.py configs/suites/demo_digits.py --seeds $(DEMO_SEEDS) --publish README.md
	@echo
	@echo "leaderboard: $(DEMO_RESULTS)/leaderboard.md (and .csv, intervals.png); monitor curves: $(DEMO_RESULTS)/curves.png"
	@echo "README.md's demo block and docs/figures/demo_digits_intervals.png: regenerated from these records"
	@echo "records, per-run reports and t-SNE figures: $(DEMO_RESULTS)/runs/"
	@echo "checkpoints and training logs: work_dirs/suites/demo_digits/<run>/"

clean:
	rm -rf work_dirs .pytest_cache .coverage .coverage.*
