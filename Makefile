# The README's two commands: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test lint tools bench clean wheelhouse messages

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
# Kustomize as Argo CD and Flux run it, for the rendered tree's round trip (tests/unit/test_manifests_go.py).
KUSTOMIZE_VERSION := v5.7.1
KUSTOMIZE := $(or $(GPUGOV_CACHE),$(HOME)/.cache/gpugov)/bin/kustomize-$(KUSTOMIZE_VERSION)/kustomize

test: $(VENV)/.installed lint
	@if command -v go >/dev/null 2>&1; then \
		{ [ -x "$(ACTIONLINT)" ] || GOBIN="$(dir $(ACTIONLINT))" go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION); } & actionlint=$$!; \
		{ [ -x "$(KUSTOMIZE)" ] || GOBIN="$(dir $(KUSTOMIZE))" go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION); } & kustomize=$$!; \
		GPUGOV_BUILD_JOBS=$${GPUGOV_BUILD_JOBS:-2} tools/build && wait $$actionlint && wait $$kustomize && \
		ln -sf "$(ACTIONLINT)" tools/bin/actionlint && ln -sf "$(KUSTOMIZE)" tools/bin/kustomize; \
	else echo "Go not found: end-to-end tests and actionlint checks will be skipped"; fi
	scripts/test-lanes

# Offline install (README, "Installing without internet"): on a connected machine with the target's
# Python version and CPU architecture, wheels of gpugov and every dependency of its extras into one
# folder; behind the firewall: pip install --no-index --find-links wheelhouse 'gpugov[cluster,notify,agent]'.
# PIP_INDEX_URL=... make wheelhouse builds it from a mirror.
WHEELHOUSE ?= wheelhouse
WHEELHOUSE_EXTRAS ?= cluster,notify,agent,deploy
wheelhouse:
	rm -rf "$(WHEELHOUSE)"
	$(PYTHON) -m pip wheel -q --wheel-dir "$(WHEELHOUSE)" ".[$(WHEELHOUSE_EXTRAS)]"
	@echo "$(WHEELHOUSE): $$(ls "$(WHEELHOUSE)" | wc -l) wheels"

# Messages (README, "Languages"): extract every message into the template, merge it into each
# language's catalogue (translate the new msgstr there), compile the .mo that gpugov ships.
LOCALES := gpugov/locale
messages: $(VENV)/.installed
	pybabel -q extract -F babel.cfg -k Text -k Joined -k rule --no-location --sort-output \
		--project gpugov --version 0.1.0 --copyright-holder "the gpugov authors" -o $(LOCALES)/gpugov.pot .
	pybabel -q update -i $(LOCALES)/gpugov.pot -d $(LOCALES) -D gpugov -l zh_CN --init-missing --ignore-obsolete
	pybabel -q compile -d $(LOCALES) -D gpugov --statistics

# The README's performance table (section "Performance"): paste what this prints, date and machine included.
bench: $(VENV)/.installed
	python bench/bench.py --markdown

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
