# Every set-up step lives here, so a fresh machine needs only `make test` or
# `make check WORKSPACE=...` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
WORKSPACE ?= .
REPO ?= .
BASE ?= HEAD~1

.PHONY: install test lint check review docs

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

lint: install
	$(BIN)/ruff check app tests bench
	$(BIN)/ruff format --check app tests bench
	$(BIN)/mypy app

test: lint
	$(BIN)/pytest -q

check: install
	$(BIN)/gpuproof check $(WORKSPACE)

# What the App would post for a branch of a local checkout (HEAD and BODY optional).
review: install
	$(BIN)/gpuproof review --root $(REPO) --base $(BASE) $(if $(HEAD),--head $(HEAD)) $(if $(BODY),--body $(BODY))

docs: install
	$(BIN)/gpuproof docs > docs/rules.md
