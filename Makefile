# One task runner for people and CI. `make demo` sets up and runs the main job; `make test` runs the tests.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint ci bench clean llama-cpp

# llama-cpp-python is built first by tools/build_llama_cpp.py: the release compiled natively, with the fix of
# ggml's AMX tile configuration (without it every q8_0 model dies with SIGILL on Intel CPUs with AMX); the wheel
# is cached per CPU and compiler, and the script checks the installed library.
$(VENV)/.installed: pyproject.toml tools/build_llama_cpp.py indexer/engine/llama_build.py $(wildcard indexer/engine/llama_cpp_patches/*.patch)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python tools/build_llama_cpp.py
	$(BIN)/python -m pip install -e '.[dev]'
	touch $@

llama-cpp: setup
	$(BIN)/python tools/build_llama_cpp.py --force

setup: $(VENV)/.installed

# The framework packages the Qdrant-attach tests build real collections with (LangChain, LlamaIndex, Haystack)
# the OCR extra (pytesseract, pypdfium2) and the cluster extra (Ray: the cluster tests run a local Ray cluster): test-only, so `make demo` does not pull them.
$(VENV)/.test-extras: $(VENV)/.installed pyproject.toml
	$(BIN)/python -m pip install -e '.[dev,attach-tests,ocr,cluster]'
	touch $@

demo: setup
	$(BIN)/indexer index docs
	$(BIN)/indexer search "how are unchanged files skipped on the second run?" -k 3

test: setup $(VENV)/.test-extras
	bash tools/ensure_browser.sh    # the search-page test needs Debian's chromium + chromedriver (apt-get if missing)
	bash tools/ensure_ocr.sh        # the OCR tests need Debian's tesseract-ocr + English data (apt-get if missing)
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports    # the house's rules: layers, no cycles, plugins through indexer.plugin_api (pyproject.toml)
	$(BIN)/python tools/import_cycles.py    # no import circle at all, type-only imports included

ci: lint test

bench: setup
	$(BIN)/python bench/embed_throughput.py
	$(BIN)/python bench/index_throughput.py

clean:
	rm -rf $(VENV) build dist *.egg-info
