# The README's two commands: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test lint tools bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	scripts/demo

lint: $(VENV)/.installed
	ruff check gpugov tests bench __main__.py

tools:
	tools/build

ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := $(or $(GPUGOV_CACHE),$(HOME)/.cache/gpugov)/bin/actionlint-$(ACTIONLINT_VERSION)/actionlint

test: $(VENV)/.installed lint
	@if command -v go >/dev/null 2>&1; then \
		GPUGOV_BUILD_JOBS=$${GPUGOV_BUILD_JOBS:-2} tools/build && \
		{ [ -x "$(ACTIONLINT)" ] || GOBIN="$(dir $(ACTIONLINT))" go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION); } && \
		ln -sf "$(ACTIONLINT)" tools/bin/actionlint; \
	else echo "Go not found: end-to-end tests and actionlint checks will be skipped"; fi
	pytest -q

bench: $(VENV)/.installed
	python bench/bench.py

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
