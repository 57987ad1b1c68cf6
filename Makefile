# cdclake: the README's two commands are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
UV_VERSION ?= 0.13.8
# uv lives in its own virtualenv: syncing the project's would uninstall it (it is not in the lock)
UV_VENV ?= .cache/uv
UV := $(UV_VENV)/bin/uv
PY := $(VENV)/bin/python
MVN ?= mvn
MVN_FLAGS ?= -B -q -s jvm/settings.xml
PYTEST_ARGS ?=
# the local stack's profile of `make demo`: default (embedded lake, Spark local[*]) or cluster
PROFILE ?= $(or $(CDC_STACK_PROFILE),default)
# where the JVM components go: the CDC_JVM_DIR the code reads, else .cache/jvm (git-ignored)
JVM_DIR ?= $(abspath $(or $(CDC_JVM_DIR),.cache/jvm))

.PHONY: help install venv jars peer-jars cluster-jars cds system-packages lock demo test test-unit test-integration test-reliability lint stack-up stack-down clean

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(UV):
	$(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/pip install -q "uv==$(UV_VERSION)"

# Bytecode is compiled at install: a process started with PYTHONDONTWRITEBYTECODE=1 (set on some machines) never
# writes it, so without it every `airflow` task, DAG parse and `cdclake` run would compile its imports from source
$(VENV)/.synced: requirements.lock pyproject.toml plugins/pyproject.toml | $(VENV)/bin/python $(UV)
	VIRTUAL_ENV=$(VENV) $(UV) pip sync -q --compile-bytecode requirements.lock
	VIRTUAL_ENV=$(VENV) $(UV) pip install -q --no-deps -e . -e plugins
	touch $@

# the project's own sources too (only those changed since their last compile)
venv: $(VENV)/.synced  ## Python virtualenv from requirements.lock (+ cdclake and cdclake-airflow, editable)
	@$(PY) -m compileall -q src plugins dags jobs > /dev/null

DECODER_SOURCES := $(shell find jvm/decoder/src -name '*.java')

$(JVM_DIR)/.resolved: jvm/pom.xml jvm/kafka/pom.xml jvm/connect-plugins/pom.xml jvm/spark/pom.xml jvm/settings.xml \
		jvm/decoder/pom.xml $(DECODER_SOURCES)
	$(MVN) $(MVN_FLAGS) -f jvm/pom.xml -Dcdclake.jvm.dir=$(JVM_DIR) package
	touch $@

jars: $(JVM_DIR)/.resolved  ## JVM dependencies from Maven Central, and the envelope decoder built, into $(JVM_DIR)

$(JVM_DIR)/.peers-resolved: jvm/pom.xml jvm/peers/pom.xml jvm/settings.xml
	$(MVN) $(MVN_FLAGS) -f jvm/peers/pom.xml -Dcdclake.jvm.dir=$(JVM_DIR) package
	touch $@

peer-jars: $(JVM_DIR)/.peers-resolved  ## the real-shape benchmark's peers (the Iceberg Kafka Connect sink) into $(JVM_DIR)/peer-plugins

# after `make jars` (order only): two Maven builds never write the local repository at once
$(JVM_DIR)/.cluster-resolved: jvm/pom.xml jvm/cluster/pom.xml jvm/settings.xml $(shell find jvm/cluster/src -name "*.java") \
		| $(JVM_DIR)/.resolved
	$(MVN) $(MVN_FLAGS) -f jvm/cluster/pom.xml -Dcdclake.jvm.dir=$(JVM_DIR) package
	touch $@

cluster-jars: $(JVM_DIR)/.cluster-resolved  ## the cluster profile's servers (Iceberg REST catalog, s3proxy) and Spark's S3 jars into $(JVM_DIR)

cds: venv jars  ## class-data sharing archive of the Spark driver JVM (about 5 s off every start), if missing
	$(VENV)/bin/cdclake spark cds

system-packages: venv  ## Debian packages of the local stack (PostgreSQL, MariaDB), if missing
	$(VENV)/bin/cdclake stack packages --install

# three at a time: the Python environment and the Debian packages download while Maven does
install:  ## everything the demo and the tests need (idempotent)
	$(MAKE) -j3 --no-print-directory venv jars cluster-jars system-packages cds

lock:  ## re-resolve requirements.lock from requirements*.txt
	$(UV) pip compile requirements.txt requirements-dev.txt --python-version 3.11 \
	  --python-platform x86_64-unknown-linux-gnu -o requirements.lock

demo: install  ## start the local stack and run the demo pipeline end to end (PROFILE=cluster: on the cluster profile)
	CDC_STACK_PROFILE=$(PROFILE) $(VENV)/bin/cdclake demo

# Two pytest processes at once: the tests on the shared local stack (marker shared_stack, tests/conftest.py), in file
# order, and the others beside them; the first's output follows the second's, from its start and live until it ends.
# Exit status 5 (no test selected) of one of them counts as success when the other ran tests.
test: install  ## run the whole test suite (unit, DAG and integration tests)
	@$(VENV)/bin/pytest -m shared_stack $(PYTEST_ARGS) > .pytest-shared-stack.log 2>&1 & stack=$$!; \
	$(VENV)/bin/pytest -m "not shared_stack" $(PYTEST_ARGS); rest=$$?; \
	echo "=== the tests on the shared local stack (pytest -m shared_stack) ==="; \
	tail -n +1 --pid=$$stack -f .pytest-shared-stack.log; \
	wait $$stack; shared=$$?; \
	echo "make test: pytest exit status $$rest (the others), $$shared (on the shared local stack)"; \
	[ $$rest -eq 0 -a $$shared -eq 0 ] || [ $$rest -eq 0 -a $$shared -eq 5 ] || [ $$rest -eq 5 -a $$shared -eq 0 ]

test-unit: venv jars cds  ## unit and DAG tests only (no local stack)
	$(VENV)/bin/pytest -m "not integration" $(PYTEST_ARGS)

test-integration: install  ## integration tests only (starts the local stack)
	$(VENV)/bin/pytest -m integration $(PYTEST_ARGS)

test-reliability: install  ## the reliability suite only: faults on the local stack, duplicates and reordering (also part of `make test`)
	$(VENV)/bin/pytest -m reliability tests/reliability $(PYTEST_ARGS)

lint:  ## ruff
	$(VENV)/bin/ruff check src plugins dags jobs tests

stack-up: install  ## cdclake stack up
	$(VENV)/bin/cdclake stack up

stack-down:  ## cdclake stack down
	$(VENV)/bin/cdclake stack down

clean:  ## remove local state (keeps download caches)
	-$(VENV)/bin/cdclake stack down
	rm -rf .stack .lake .airflow
