# Two commands do all the setup on a fresh machine:
#   make run    installs everything into .venv, then runs the main job on the defaults
#   make test   installs everything into .venv, then runs the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The core and every built-in plugin: separate distributions, installed together.
DISTS  := . $(wildcard backends/*/pyproject.toml executors/*/pyproject.toml synthesizers/*/pyproject.toml llm_providers/pyproject.toml strategies/pyproject.toml jaxbench/pyproject.toml)
# The main job: optimize a matmul + bias + GELU kernel with the offline synthesizer (no key, CPU only).
TASK   ?= tests/tpu_pallas/tasks/matmul_bias_gelu
STAMP  := $(VENV)/.installed
# PyTorch tasks (KernelBench's own format) run on JAX through torchax, with PyTorch's CPU build (the
# registry's default torch is the CUDA build, gigabytes of NVIDIA libraries a CPU never uses).
TORCH_CPU   ?= torch==2.13.0+cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# Two test processes, a module's tests kept together (its fixtures are built once): the suite took
# 33 minutes in one process on the 2-core build machine. Override with PYTEST_ARGS= to run in one.
PYTEST_ARGS ?= -n 2 --dist loadfile

.PHONY: run test install clean sandbox

install: $(STAMP)

# Candidates run inside bubblewrap; as root with apt it is installed here, otherwise maxkernel
# says in one line that it runs with the weaker fallback sandbox.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; } || \
	  echo "note: bubblewrap (bwrap) is not installed and could not be installed here: candidates run with the weaker fallback sandbox" >&2; }

$(STAMP): $(shell find . -name pyproject.toml -not -path './$(VENV)/*' -not -path './docs/*') | sandbox
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_CPU)" --extra-index-url $(TORCH_INDEX)
	$(BIN)/python -m pip install --quiet -e ".[test,ray,torch]" $(foreach d,$(filter-out .,$(DISTS)),-e $(dir $(d)))
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/maxkernel run --task $(TASK) --strategy auto --provider offline --out maxkernel-out

# pytest exits 5 when it collected nothing: that is broken setup, not a pass.
test: $(STAMP)
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "ERROR: pytest collected no tests; the setup is broken" >&2; exit 1; fi; \
	exit $$rc

clean:
	rm -rf $(VENV)
