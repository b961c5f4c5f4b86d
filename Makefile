# Raftwood: the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PORT   ?= 9092
DATA   ?= ./data

.PHONY: run test venv system-deps compat-node unit bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

## run: a 3-broker cluster on 127.0.0.1:$(PORT)..(PORT+2), data under $(DATA)
BROKERS ?= 3
run: venv
	$(VENV)/bin/raftwood dev --brokers $(BROKERS) --data-dir $(DATA) --port $(PORT)

## system-deps: Debian's kcat (kcat compatibility tests), nftables + iproute2 (network
## partition tests: brokers in network namespaces) and chromium + its driver (the replication
## view's browser test); needs root, the tests skip otherwise
SYSTEM_TOOLS = kcat:kcat nft:nftables ip:iproute2 chromium:chromium chromedriver:chromium-driver
system-deps:
	@missing=""; for pair in $(SYSTEM_TOOLS); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing$$missing and not root: the tests needing them will skip"; fi; \
	fi

## compat-node: KafkaJS and its codecs for the KafkaJS compat tests (npm ci from
## compat/kafkajs/package-lock.json, again when the lock changes); without node/npm the tests skip
KAFKAJS_DIR = compat/kafkajs
compat-node:
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
	  echo "node/npm not found: the KafkaJS compat tests will skip"; \
	elif [ ! -f $(KAFKAJS_DIR)/node_modules/.installed ] \
	     || [ $(KAFKAJS_DIR)/package-lock.json -nt $(KAFKAJS_DIR)/node_modules/.installed ]; then \
	  echo "npm ci --prefix $(KAFKAJS_DIR)"; \
	  npm ci --prefix $(KAFKAJS_DIR) --no-audit --no-fund --loglevel=error \
	    && touch $(KAFKAJS_DIR)/node_modules/.installed; \
	fi

## test: install everything the tests need, then run the whole suite; the slowest tests
## are listed at the end (the CI run has a time budget). e.g. make test PYTEST_ARGS="-k fetch"
PYTEST_ARGS ?= --durations=15
test: venv system-deps compat-node
	@# pytest exits 5 when it collects no test: not a failure of the code
	$(PY) -m pytest -q $(PYTEST_ARGS) || [ $$? -eq 5 ]

unit: venv
	$(PY) -m pytest -q tests/unit

## bench: every benchmark workload, Raftwood vs noida-db (not a test); see benchmarks/README.md
## e.g. make bench BENCH_ARGS="--quick"   or   BENCH_ARGS="--workloads w1,w5 --json out.json"
$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

bench: $(VENV)/.bench-installed
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
