# Two commands on a fresh machine (see README): `make run` sets up and runs the pipeline, `make test` the tests.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
WITH_VENV := PATH="$(CURDIR)/$(BIN):$$PATH"

export DVC_NO_ANALYTICS := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: setup run test bench lint clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, from the exact CPU wheel this machine kind provides, so nothing pulls a CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test]'
	# ALFWorld without its dependencies: we read its package data (layouts, attribute tables, PDDL domain) only;
	# its textworld[pddl] dependency compiles fast-downward and pulls spaCy. See pyproject.toml.
	$(BIN)/python -m pip install -q --no-deps alfworld==0.4.2
	# TextWorld (the PDDL engine that replays demonstrations) without its declared dependencies: the rest of them
	# are pinned in pyproject.toml; jericho (Z-machine games, imported by textworld at start-up) is built without
	# spaCy, which only its template action generator uses and the PDDL environment never touches.
	$(BIN)/python -m pip install -q --no-deps textworld==1.7.0 jericho==3.3.1
	touch $@

run: setup
	$(WITH_VENV) dvc repro
	$(WITH_VENV) dvc metrics show

test: setup
	$(WITH_VENV) python -m pytest

bench: setup
	$(WITH_VENV) python bench/muep_stages.py

clean:
	rm -rf $(VENV) .pytest_cache
