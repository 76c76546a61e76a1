# Two commands do all the setup on a fresh machine:
#   make run    installs what the main job needs into .venv, then runs it on the defaults
#   make test   adds what the tests need (Ray, PyTorch's CPU build, Playwright + Debian's chromium), then runs them
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The main job's distributions: the core and the built-in plugins it runs on (no Ray, no PyTorch).
RUN_DISTS := $(wildcard backends/*/pyproject.toml synthesizers/*/pyproject.toml llm_providers/pyproject.toml strategies/pyproject.toml jaxbench/pyproject.toml)
# What only the tests (and users who ask for them) need: the Ray executor, the web UI, PyTorch tasks, a browser.
TEST_DISTS := $(wildcard executors/*/pyproject.toml ui/pyproject.toml)
# The main job: optimize a matmul + bias + GELU kernel with the offline synthesizer (no key, CPU only).
TASK   ?= tests/tpu_pallas/tasks/matmul_bias_gelu
RUN_STAMP  := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# PyTorch tasks (KernelBench's own format) run on JAX through torchax, with PyTorch's CPU build (the
# registry's default torch is the CUDA build, gigabytes of NVIDIA libraries a CPU never uses).
TORCH_CPU   ?= torch==2.13.0+cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# Two test processes, a module's tests kept together (its fixtures are built once), the longest files
# first (tests/conftest.py orders them): the suite took 33 minutes in one process on the 2-core build
# machine. Override with PYTEST_ARGS= to run in one.
PYTEST_ARGS ?= -n 2 --dist loadfile --no-loadscope-reorder
# The suite leaves out the checks of every JaxBench task's published data: its reference compiled at
# full size for v6e (43 XLA compiles), its tolerances (50 tasks, three variants each), and the expert
# kernels past one of each kind (tests/tpu_pallas/test_experts.py), about 20 minutes of CPU, and each offline
# template's cascade on its second chip (marked second_chip: the v5e case stays in the suite). CI runs them
# after the suite (`make test-jaxbench`), one test per free worker (--dist load: the tasks are independent).
# A -m in PYTEST_ARGS replaces this selection.
SUITE_MARKS ?= not jaxbench_full and not second_chip
PYPROJECTS := $(shell find . -name pyproject.toml -not -path './$(VENV)/*' -not -path './docs/*')

.PHONY: run test test-jaxbench test-tpu tpu-wheels install install-test clean sandbox browser ui

install: $(RUN_STAMP)
install-test: $(TEST_STAMP)

# Candidates run inside bubblewrap; as root with apt it is installed here, otherwise maxkernel
# says in one line that it runs with the weaker fallback sandbox.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; } || \
	  echo "note: bubblewrap (bwrap) is not installed and could not be installed here: candidates run with the weaker fallback sandbox" >&2; }

# The report tests open the HTML reports in Debian's chromium through Playwright (Playwright's own
# browser download does not work here); as root with apt it is installed here.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
	  echo "note: chromium is not installed and could not be installed here: the browser tests will fail; install Debian's chromium" >&2; }

$(RUN_STAMP): $(PYPROJECTS) | sandbox
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e . $(foreach d,$(RUN_DISTS),-e $(dir $(d)))
	touch $(RUN_STAMP)

$(TEST_STAMP): $(RUN_STAMP) | browser
	$(BIN)/python -m pip install --quiet "$(TORCH_CPU)" --extra-index-url $(TORCH_INDEX)
	$(BIN)/python -m pip install --quiet -e ".[test,bench,ray,torch,ui]" $(foreach d,$(TEST_DISTS),-e $(dir $(d)))
	touch $(TEST_STAMP)

run: $(RUN_STAMP)
	$(BIN)/maxkernel run --task $(TASK) --strategy auto --provider synthesizer --out maxkernel-out

# The web UI over this machine's run store (docs/ui.md): installs the ui extra, serves 127.0.0.1:8765.
ui: $(RUN_STAMP)
	$(BIN)/python -m pip install --quiet -e ui/
	$(BIN)/maxkernel ui

# pytest exits 5 when it collected nothing: that is broken setup, not a pass.
PYTEST = $(BIN)/python -m pytest $(1); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "ERROR: pytest collected no tests; the setup is broken" >&2; exit 1; fi; \
	exit $$rc

test: $(TEST_STAMP)
	@$(call PYTEST,-m "$(SUITE_MARKS)" $(PYTEST_ARGS))

test-jaxbench: $(TEST_STAMP)
	@$(call PYTEST,-n 2 --dist load -m "jaxbench_full or second_chip")

clean:
	rm -rf $(VENV)

# What a bare TPU host needs (no network, no root): this project's wheels, the pure-Python dependencies and
# bubblewrap's binary, in .tpu/; carry it there and run commands through tools/tpu/run.sh (docs/tpu.md).
tpu-wheels: $(RUN_STAMP)
	PYTHON=$(BIN)/python tools/tpu/build_wheelhouse.sh .tpu

# The tests that need a TPU (marked tpu; skipped everywhere else), on a TPU host: through the device tool,
# `tools/tpu/run.sh make test-tpu PYTHON_TPU=python3` with .tpu carried (docs/tpu.md).
PYTHON_TPU ?= $(BIN)/python
test-tpu:
	$(PYTHON_TPU) -m pytest -m tpu -p no:cacheprovider -o addopts="-ra --strict-markers --durations=15" $(or $(PYTEST_TPU_ARGS),tests/tpu)
