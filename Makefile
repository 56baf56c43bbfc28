# Two entry points (see README): `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
ARGS ?=
PYTEST_ARGS ?=

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

.PHONY: demo test engine lint gpu
demo: $(VENV)/.installed
	$(VENV)/bin/python run_bench.py demo $(ARGS)

# The engine environment, with progress on first use (cached; a no-op afterwards).
engine: $(VENV)/.installed
	$(VENV)/bin/python run_bench.py engine provision

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

# The engines the tests need are provisioned in the background while the tests without the
# engine run (tests/conftest.py).
test: lint
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

# On a machine with an NVIDIA GPU: the demo, the isolation table and an A/B of two vLLM
# versions on a real architecture without weights (docs/engine.md; never run by saltbench's
# developers, who have no GPU). GPU_PRESET=qwen2.5-vl-7b takes images and video only.
GPU_BASE ?= 0.31.0
GPU_NEW ?= 0.32.0
GPU_PRESET ?= qwen2.5-omni-7b
gpu: $(VENV)/.installed
	@command -v nvidia-smi >/dev/null || { echo "make gpu: nvidia-smi not found: this target needs an NVIDIA GPU (make demo runs on a CPU)"; exit 2; }
	$(VENV)/bin/python run_bench.py demo --engine vllm==$(GPU_NEW) --model-preset $(GPU_PRESET)
	$(VENV)/bin/python run_bench.py isolation --engine vllm==$(GPU_NEW) --model-preset $(GPU_PRESET)
	$(VENV)/bin/python run_bench.py ab --base vllm==$(GPU_BASE) --new vllm==$(GPU_NEW) \
		--model-preset $(GPU_PRESET) --spec smoke --starts 2 --more 0 --blocks 2
