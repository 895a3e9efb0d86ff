# make demo: MixCo on scikit-learn's digits with 2 CPU processes.  make test: the test suite.
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

demo: $(STAMP)
	tools/dist_train.sh configs/mixco_r18_digits.py 2

clean:
	rm -rf work_dirs .pytest_cache
