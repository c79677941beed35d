# adlnmt — newcomer entry points. Needs only Python 3.11 on the machine.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
# Exactly this torch (a CPU build is on disk here); installed before the package so that
# the package's `torch>=2.x` requirement is already satisfied and nothing else is downloaded.
TORCH_PIN := torch==2.13.0
STAMP  := $(VENV)/.installed

.PHONY: install test demo lint docs clean

$(STAMP): pyproject.toml
# Graphviz's `dot` lays out `adlnmt describe --diagram` (its tests skip without it), and chromium runs the browser
# test of `adlnmt serve` (skipped without it): apt-get them as root.
	@{ command -v dot >/dev/null && command -v chromium >/dev/null; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update && apt-get install -y graphviz chromium; \
	  else command -v dot >/dev/null || echo "note: Graphviz's dot is missing and cannot be installed here (not root," \
	    "or no apt-get): diagrams fail with a hint and their tests are skipped; install it with: sudo apt-get install graphviz"; \
	    command -v chromium >/dev/null || echo "note: chromium is missing and cannot be installed here: the browser" \
	    "test of adlnmt serve is skipped; install it with: sudo apt-get install chromium"; fi; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install $(TORCH_PIN)
	$(BIN)/pip install -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/ruff format --check src tests benchmarks experiments
	@bash scripts/slurm/start.sh || echo "note: no single-node SLURM here (see above): the slurm tests skip or fail"
	$(BIN)/python -m pytest -q $(if $(CI),-m "not slow",) tests

# The demo: generate the embedded toy corpus, learn subwords, train a small Transformer for a few
# minutes on the CPU, translate the test split (beam 5), score it with sacreBLEU and on the demo agreement suite
# (contrastive evaluation; chance is 50 %). Outputs in demo/.
DEMO := demo
DEMO_ENCODER := pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm
DEMO_DECODER := pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm

demo: $(STAMP)
	rm -rf $(DEMO)/model
	$(BIN)/adlnmt demo-corpus --out $(DEMO)/corpus --size 12000 --seed 1 --overwrite
	$(BIN)/adlnmt prepare --train-src $(DEMO)/corpus/train.src --train-tgt $(DEMO)/corpus/train.tgt \
	  --valid-src $(DEMO)/corpus/valid.src --valid-tgt $(DEMO)/corpus/valid.tgt --out $(DEMO)/data \
	  --vocab-size 1000 --joint --overwrite
	$(BIN)/adlnmt train --data $(DEMO)/data --model $(DEMO)/model \
	  --encoder '$(DEMO_ENCODER)' --decoder '$(DEMO_DECODER)' \
	  --d-model 128 --heads 4 --batch-tokens 2500 --lr 1e-3 --lr-schedule inverse-sqrt --warmup 300 \
	  --max-updates 600 --checkpoint-interval 200 --seed 1
	$(BIN)/adlnmt translate --model $(DEMO)/model --input $(DEMO)/corpus/test.src --output $(DEMO)/test.hyp --beam 5
	@echo "--- first test translations (source / hypothesis / reference):"
	@paste -d '\n' $(DEMO)/corpus/test.src $(DEMO)/test.hyp $(DEMO)/corpus/test.tgt | head -9
	$(BIN)/adlnmt score --hyp $(DEMO)/test.hyp --ref $(DEMO)/corpus/test.tgt
	$(BIN)/adlnmt contrastive-suite demo --source $(DEMO)/corpus/test.src --reference $(DEMO)/corpus/test.tgt \
	  --output $(DEMO)/agreement.jsonl
	$(BIN)/adlnmt contrastive --model $(DEMO)/model --suite $(DEMO)/agreement.jsonl

# The documentation site (MkDocs, docs/ + mkdocs.yml) into site/; strict: a broken link or reference fails. `make test`
# builds it too (tests/test_doc_links.py).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/ruff format --check src tests benchmarks experiments

clean:
	rm -rf $(VENV) build site src/*.egg-info .pytest_cache .ruff_cache
