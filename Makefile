# The two commands a user needs are `make lab` and `make test` (see README.md).
# Both create .venv with the pinned dependencies on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# LAB_ARGS: extra flags for JupyterLab; NO_BROWSER=1 keeps it from opening a browser.
LAB_ARGS ?=
ifneq ($(strip $(NO_BROWSER)),)
LAB_ARGS += --no-browser
endif
# PYTEST_ARGS: extra flags for the test run, e.g. PYTEST_ARGS="-k roofline".
PYTEST_ARGS ?=

.PHONY: lab test check build site venv clean help

help:
	@echo "make lab    open JupyterLab on the course (NO_BROWSER=1 to only print the URL)"
	@echo "make test   run the whole test suite (what CI runs)"
	@echo "make check  the fast tests to run while working: unit, lesson keys, command line (no grading"
	@echo "            sandbox, no notebooks, no browser); docs/architecture.md says which covers what"
	@echo "make site   render the course as static HTML in _site/"

$(STAMP): pyproject.toml
	@echo "Setting up .venv with roofkit, JupyterLab and the test tools (first time only: about 2 minutes)..."
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "roofkit needs Python 3.11 or newer; this is " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

# The course as a static HTML site in _site/ (open _site/index.html).
site: $(STAMP)
	$(BIN)/roofkit site

# Regenerate notebooks/ and solutions/ from lessons/ (for lesson authors).
build: $(STAMP)
	$(BIN)/roofkit build

# JupyterLab refuses to run as root unless told; containers often run as root.
ifeq ($(shell id -u),0)
LAB_ARGS += --allow-root
endif

# The course's JupyterLab settings (jupyterlab-settings/overrides.json: no "Jupyter news" prompt; answer boxes
# saved with the notebook) and the notebook it opens on: the learner's own copy in my-notebooks/, which
# `roofkit workspace` makes from notebooks/ and git ignores, so running a lesson changes nothing git tracks.
# tests/browser/conftest.py starts JupyterLab with the same LAB_FLAGS.
LAB_FLAGS := --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=. "--LabApp.app_settings_dir=$(CURDIR)/jupyterlab-settings" \
             --LabApp.default_url=/lab/tree/my-notebooks/00-start-here.ipynb

lab: $(STAMP)
	@$(BIN)/roofkit workspace
	$(BIN)/jupyter lab $(LAB_FLAGS) $(LAB_ARGS)

# The suite, in two pytest runs on two workers: first the unit, lesson, command line
# and grading tests together with every notebook, run once each (nbval: every solution's
# outputs compared, its figures too; every student copy run top to bottom; conftest.py);
# then the course driven in JupyterLab through Chromium (skipped with a reason when
# Chromium is missing, except in CI).
NBVAL := --nbval --nbval-sanitize-with nbval_sanitize.cfg --nbval-current-env -p no:cacheprovider

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile $(NBVAL) tests solutions notebooks --ignore=tests/browser $(PYTEST_ARGS)
	$(BIN)/python -m pytest -n 2 -p no:cacheprovider tests/browser $(PYTEST_ARGS)

# While working: no sandboxed grading, no notebook runs, no browser, no servers (markers
# `sandbox` and `slow`, pyproject.toml). Green here is not green in CI: run make test before pushing.
check: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not sandbox and not slow" --ignore=tests/browser -p no:cacheprovider -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
