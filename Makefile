# make demo: MoCo-v2 and MixCo on scikit-learn's digits (2 CPU processes each), evaluated, with a
# random-init encoder for reference, and the leaderboard.  make test: the test suite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test test-fast demo clean

install: $(STAMP)

$(STAMP): setup.cfg setup.py
	python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -ra

test-fast: $(STAMP)
	$(PY) -m pytest -q -ra -m 'not slow'

DEMO_RESULTS ?= results/demo

demo: $(STAMP)
	rm -rf $(DEMO_RESULTS)  # one seed per method: a rerun would count the same seed twice
	tools/dist_train.sh configs/mocov2_r18_digits.py 2 --results-dir $(DEMO_RESULTS)
	tools/dist_train.sh configs/mixco_r18_digits.py 2 --results-dir $(DEMO_RESULTS)
	$(PY) tools/eval.py configs/mixco_r18_digits.py random --results-dir $(DEMO_RESULTS)
	$(PY) tools/leaderboard.py --results-dir $(DEMO_RESULTS)
	@echo
	@echo "leaderboard: $(DEMO_RESULTS)/leaderboard.md (and .csv)"
	@echo "records, per-run reports and t-SNE figures: $(DEMO_RESULTS)/runs/"
	@echo "checkpoints and training logs: work_dirs/mocov2_r18_digits/, work_dirs/mixco_r18_digits/"

clean:
	rm -rf work_dirs .pytest_cache
