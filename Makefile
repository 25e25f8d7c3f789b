# The project's commands. Every target builds the virtual environment in .venv first, and skips
# the install when its requirements have not changed since the last one. `make lab` installs the
# notebooks' packages (requirements.txt); every other target adds the tests and tools
# (requirements-dev.txt).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_LAB := $(VENV)/.installed-lab
STAMP := $(VENV)/.installed-dev
# Notebooks to execute: all by default, or `make notebooks NB=notebooks/03_many_clocks.ipynb`.
NB ?= $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
# Where make html and make slides write (build/html, build/slides).
BUILD ?= build
# Outputs of a notebook must not depend on the machine: compute on the CPU unless told otherwise.
export HELPERS_DEVICE ?= cpu
export PYTHONHASHSEED := 0
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: setup setup-lab lab test test-portable test-unit test-notebooks test-browser lint format diff-setup mutants notebooks experiment experiment-checks experiment-stretch bench slides html clean

setup: $(STAMP)
setup-lab: $(STAMP_LAB)

$(STAMP_LAB): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python 3.10 or newer is needed, found " + sys.version.split()[0]'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $(STAMP_LAB)

$(STAMP): $(STAMP_LAB) requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $(STAMP)

# JupyterLab refuses to start as root unless told; as root (containers, cloud machines) we tell it.
# LAB_FLAGS adds options, for example `make lab LAB_FLAGS="--no-browser --port 8899"`.
LAB_FLAGS ?=
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP_LAB)
	$(VENV)/bin/jupyter lab $(ALLOW_ROOT) $(LAB_FLAGS) notebooks/00_start_here.ipynb

# pytest-xdist: one test file or notebook per worker, a worker per core (PYTEST_WORKERS=0: one process).
PYTEST_WORKERS ?= auto
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

test: $(STAMP)
	$(PY) -m pytest tests notebooks --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg -m "not browser" -p no:cacheprovider $(XDIST)

# The notebooks once more under another kernel path: torch's plain (non-SIMD) CPU kernels and one
# thread. A saved output that holds only on one kind of CPU fails here.
test-portable: $(STAMP)
	ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
		$(PY) -m pytest notebooks --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider -q $(XDIST)

test-unit: $(STAMP)
	$(PY) -m pytest tests -m "not browser" -p no:cacheprovider

test-notebooks: $(STAMP)
	$(PY) -m pytest notebooks --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider --durations=0

# The linter (ruff: pycodestyle, pyflakes, bugbear, import order) on the package, the site builder
# (tools), the tests, the benchmarks and the notebooks' code cells; the formatter's check on the Python files (notebook
# cells are laid out by hand for reading and are linted, not reformatted). CI runs it.
lint: $(STAMP)
	$(VENV)/bin/ruff check helpers tools tests benchmarks notebooks
	$(VENV)/bin/ruff format --check helpers tools tests benchmarks notebooks/conftest.py

# Apply the formatter and the linter's safe fixes.
format: $(STAMP)
	$(VENV)/bin/ruff format helpers tools tests benchmarks notebooks/conftest.py
	$(VENV)/bin/ruff check --fix helpers tools tests benchmarks notebooks

# Readable notebook diffs in this clone: `git diff` and `git log -p` show a notebook's changed
# cells, sources and outputs instead of JSON and base64, without the metadata (execution
# timestamps, widget ids) that changes at every run (nbdime's git integration; see
# CONTRIBUTING.md). .gitattributes names the driver; this writes its command to .git/config only.
diff-setup: $(STAMP)
	git config diff.jupyternotebook.command "$(CURDIR)/$(VENV)/bin/git-nbdiffdriver diff --ignore-metadata --ignore-details"
	git config merge.jupyternotebook.driver "$(CURDIR)/$(VENV)/bin/git-nbmergedriver merge %O %A %B %L %P"
	git config merge.jupyternotebook.name "nbdime: merge notebooks cell by cell"

# Mutation testing (not in CI; how long it takes and what it found: docs/mutation-testing.md).
# `make mutants` runs every maths module; `make mutants MUTANTS='helpers.alibi*'` one. Prints the
# kill rate per module. mutmut keeps each mutant's verdict in mutants/ and does not test it again
# when only the tests changed, so every run starts from a fresh copy.
MUTANTS ?=
mutants: $(STAMP)
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children 2 $(MUTANTS)
	$(PY) benchmarks/mutation_report.py --survivors

notebooks: $(STAMP)
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=900 --ExecutePreprocessor.store_widget_state=True \
		--ExecutePreprocessor.record_timing=False $(NB)

experiment: $(STAMP)
	$(PY) -m helpers.experiment --out data/extrapolation.json

# The checks notebook 08 states its rankings against: seeds it never read, and the groups the step
# limit stopped, trained longer (each its own file in data/; DEVICE=cuda trains on a GPU).
experiment-checks: $(STAMP)
	$(PY) -m helpers.experiment --check fresh $(if $(DEVICE),--device $(DEVICE))
	$(PY) -m helpers.experiment --check long $(if $(DEVICE),--device $(DEVICE))

# The context-stretching experiment (helpers.experiment.stretch): RoPE models trained at L, read at 2L-8L under six
# RoPE scalings, without and after a short fine-tune at 4L; rewrites data/stretch.json, data/stretch_models.pt and data/stretch_text.pt.
experiment-stretch: $(STAMP)
	$(PY) -m helpers.experiment stretch --out data/stretch.json --models data/stretch_models.pt

bench: $(STAMP)
	$(PY) benchmarks/interactive_latency.py
	$(PY) benchmarks/bench_helpers.py

test-browser: $(STAMP)
	$(PY) -m pytest tests/browser -m browser -p no:cacheprovider

# Lecture slides (reveal.js), one deck per notebook, in build/slides; a static site of every notebook
# with an index page, in build/html. Both work offline: reveal.js and MathJax are copied beside the
# pages (tools/sitebuild/templates load them from there), and each explorer's sliders swap pictures rendered
# at build time (tools/sitebuild/frames.py), so they move without a kernel.
SITE_OPTS = --TemplateExporter.extra_template_basedirs=tools/sitebuild/templates \
	--SitePreprocessor.link_suffix=$(1) \
	--HTMLExporter.mathjax_url='_static/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe'

slides: $(STAMP)
	PYTHONPATH=tools $(VENV)/bin/jupyter nbconvert --to slides --output-dir $(BUILD)/slides --template pe_reveal \
		--SlidesExporter.reveal_scroll=True --SlidesExporter.preprocessors='["sitebuild.SitePreprocessor"]' \
		--SlidesExporter.reveal_url_prefix=_static/reveal --SlidesExporter.reveal_theme=white \
		--SitePreprocessor.explorer_subslide=True $(call SITE_OPTS,.slides.html) $(NB)
	PYTHONPATH=tools $(PY) -m sitebuild --slides --out $(BUILD)/slides $(NB)

html: $(STAMP)
	PYTHONPATH=tools $(VENV)/bin/jupyter nbconvert --to html --output-dir $(BUILD)/html --template pe_lab \
		--HTMLExporter.preprocessors='["sitebuild.SitePreprocessor"]' $(call SITE_OPTS,.html) $(NB)
	PYTHONPATH=tools $(PY) -m sitebuild --out $(BUILD)/html $(NB)

clean:
	rm -rf $(VENV) .pytest_cache build artifacts
