# Two entry points for a fresh machine: `make run` and `make test`.
# Both create .venv on first use and install the project into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/mcp-manager run startup.lua

test: $(STAMP)
	$(BIN)/ruff check manager tests bench
	$(BIN)/ruff format --check manager tests bench
	$(BIN)/mypy
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV)
