# adlnmt — newcomer entry points. Needs only Python 3.11 on the machine.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
# Exactly this torch (a CPU build is on disk here); installed before the package so that
# the package's `torch>=2.x` requirement is already satisfied and nothing else is downloaded.
TORCH_PIN := torch==2.13.0
STAMP  := $(VENV)/.installed

.PHONY: install test demo lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install $(TORCH_PIN)
	$(BIN)/pip install -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/python -m pytest -q $(if $(CI),-m "not slow",) tests

demo: $(STAMP)
	@echo "make demo: training/translation land with the training issue — not yet."
	@echo "Meanwhile, the ADL builder: describing the Transformer of the ADL paper:"
	$(BIN)/adlnmt describe --d-model 256 --heads 4 \
	  --encoder 'pos -> repeat(6, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm' \
	  --decoder 'pos -> repeat(6, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm'

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache
