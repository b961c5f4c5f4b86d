# Raftwood: the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PORT   ?= 9092
DATA   ?= ./data

.PHONY: run test test-fast venv shell system-deps compat-node compat-all unit bench lint clean bytecode

# The project (editable) with its test extras: what `make run` needs, fast to install.
$(VENV)/.installed: pyproject.toml
	@echo "venv: $(VENV) with raftwood (editable) and its test extras"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

# pyspark, for the Spark tests only (~400 MB to download the first time; pip's cache makes
# it seconds afterwards): `make test` installs it, `make run` does not wait for it.
$(VENV)/.spark-installed: $(VENV)/.installed pyproject.toml
	@echo "venv: pyspark for the Spark tests (the spark extra)"
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $@

## run: a 3-broker cluster on 127.0.0.1:$(PORT)..(PORT+2), data under $(DATA)
BROKERS ?= 3
run: venv
	$(VENV)/bin/raftwood dev --brokers $(BROKERS) --data-dir $(DATA) --port $(PORT)

## shell: a shell with $(VENV)/bin first on PATH (raftwood, python, pytest); exit leaves it
shell: venv
	@echo "$(VENV)/bin is first on PATH in this shell (raftwood, python, pytest); exit to leave"
	@VIRTUAL_ENV="$(abspath $(VENV))" PATH="$(abspath $(VENV))/bin:$$PATH" $${SHELL:-/bin/sh}

## system-deps: Debian packages some tests use, installed with apt-get when their command is
## missing: kcat (kcat compatibility tests), nftables + iproute2 (network-partition tests:
## brokers in network namespaces), chromium + its driver (the replication view's browser
## test), a Java 17 runtime (Spark and the Java client tests) and openssl (test
## certificates).  Needs root; otherwise, or when apt-get fails (its last lines are shown),
## the tests needing them skip with the reason.
SYSTEM_TOOLS = kcat:kcat nft:nftables ip:iproute2 chromium:chromium \
               chromedriver:chromium-driver java:openjdk-17-jre-headless openssl:openssl
system-deps:
	@missing=""; for pair in $(SYSTEM_TOOLS); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair##*:}"; \
	done; \
	if [ -z "$$missing" ]; then \
	  echo "system-deps: every tool is there ($(foreach p,$(SYSTEM_TOOLS),$(firstword $(subst :, ,$(p)))))"; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	  echo "system-deps: missing$$missing and not root with apt-get: the tests needing them will skip"; \
	else \
	  echo "system-deps: apt-get install$$missing (a minute or two)"; \
	  log=$$(mktemp); \
	  if { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
	       apt-get install -y -q$$missing; } >$$log 2>&1; then \
	    echo "system-deps: installed$$missing"; \
	  else \
	    code=$$?; tail -n 15 $$log; \
	    echo "system-deps: apt-get failed (exit $$code), see above: the tests needing$$missing will skip"; \
	  fi; \
	  rm -f $$log; \
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

## test: install everything the tests need (venv with pyspark, system-deps, compat-node),
## then run the whole suite: about 33 minutes on 2 cores, plus the installs the first time
## (pyspark, chromium).  The slowest tests are listed at the end (the CI run has a time
## budget).  e.g. make test PYTEST_ARGS="-k fetch"
PYTEST_ARGS ?= --durations=15
test: venv $(VENV)/.spark-installed system-deps compat-node bytecode
	@echo "make test: pytest $(PYTEST_ARGS) (the whole suite: about 33 minutes on 2 cores), started $$(date +%H:%M:%S)"
	@# pytest exits 5 when it collects no test (a -k that matches none): not a failure
	$(PY) -m pytest -q $(PYTEST_ARGS) || [ $$? -eq 5 ]

## bytecode: the checkout's modules compiled once into __pycache__ (what a first import
## writes, unless PYTHONDONTWRITEBYTECODE is set, as on CI).  Every broker and CLI process
## the tests start imports about 240 of them; without the cache each compiles them again
## (0.8 s of CPU per broker start, a third of it).  A file edited later is recompiled as usual.
bytecode: venv
	@$(PY) -m compileall -q broker protocol storage compat

## test-fast: the inner loop: every test not marked slow (no cluster, JVM or Spark; the
## unit tests and the single-broker integration tests), nothing installed beyond the venv.
## e.g. make test-fast PYTEST_ARGS="-k fetch"
test-fast: venv bytecode
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS) || [ $$? -eq 5 ]

## compat-all: the ecosystem runs of `make test` (Java kafka-clients 4.3.0, Faust, Quix
## Streams) plus Flink 2.0 (PyFlink SQL, Kafka source -> exactly-once Kafka sink across a
## leader kill -9), which `make test` leaves out: its venv (~/.cache/raftwood/flink-venv,
## about 900 MB from PyPI) is built on the first run.  Times in compat/README.md.
compat-all: venv system-deps bytecode
	RAFTWOOD_COMPAT_ALL=1 $(PY) -m pytest -q $(PYTEST_ARGS) \
	  tests/integration/test_ecosystem.py tests/integration/test_ecosystem_flink.py

## unit: the unit tests only (no broker processes)
unit: venv bytecode
	$(PY) -m pytest -q tests/unit

## lint: ruff over the tree and mypy over protocol/ and storage/ (rules and options in
## pyproject.toml); CI runs it before the tests.  `ruff check --fix` applies the safe fixes
$(VENV)/.lint-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,lint]'
	touch $@

lint: $(VENV)/.lint-installed
	$(VENV)/bin/ruff check
	$(VENV)/bin/mypy

## bench: every benchmark workload, Raftwood vs noida-db (not a test); see benchmarks/README.md
## e.g. make bench BENCH_ARGS="--quick"   or   BENCH_ARGS="--workloads w1,w5 --json out.json"
$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

bench: $(VENV)/.bench-installed
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
