# The README's two commands: `make run` and `make test`. Both do their own
# set-up on a fresh machine (npm packages, PostgreSQL 15, Apache Kafka jars).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Node 24 LTS: every recipe runs with deploy/local/node.sh's bin dir first on
# PATH, so `node`, `npm`, `npx` and what they spawn are Node 24's (the
# machine's own if it is 24 or newer, else a pinned build fetched once into
# .local/node). Goals that run no Node skip it, so `make help` fetches nothing.
NODE_FREE_GOALS := help clean jaeger helm-lint
ifneq ($(filter-out $(NODE_FREE_GOALS),$(or $(MAKECMDGOALS),$(.DEFAULT_GOAL))),)
NODE_BIN := $(shell deploy/local/node.sh)
ifneq ($(.SHELLSTATUS),0)
$(error deploy/local/node.sh: no Node >= 24 on this machine, and fetching it failed (see above))
endif
export PATH := $(NODE_BIN):$(PATH)
NODE_VERSION := $(shell $(NODE_BIN)/node --version)
NODE_HEADERS := $(wildcard $(NODE_BIN)/../include/node/common.gypi)
endif
# The stamp names the node that ran `npm ci`: native addons are built for its
# ABI, so switching Node (20 -> 24, or a machine node replacing the pinned
# one) reinstalls node_modules. npm ci empties node_modules, old stamps too.
STAMP := node_modules/.install-stamp-node-$(NODE_VERSION)

.PHONY: help install build test test-unit run bench bench-quick clean lint-sql lint format

help:
	@echo "make run         start PostgreSQL + Kafka locally (unless DATABASE_URL / KAFKA_BROKERS are set) and the service"
	@echo "make test        make lint, then every test (unit + integration) against real PostgreSQL and Kafka"
	@echo "make lint        ESLint (type-aware, zero warnings) and prettier --check"
	@echo "make format      prettier --write . (the formatting make lint checks)"
	@echo "make bench       full side-by-side benchmarks (results in bench/results/)"
	@echo "make bench-quick the same benchmarks at small sizes"
	@echo "make soak        long soaks (soak-retention: 30 min, table sizes flat under retention; soak-memory: RSS/heap over 70 min of mixed HTTP)"
	@echo "make chaos       1 M records under kill -9, PostgreSQL restarts, rebalances, a paused broker; JSON report (not in make test)"
	@echo "make jaeger      local Jaeger v2 (OTLP on :4318, query API on :16686), built once into .local/bin"
	@echo "make test-jaeger traces producer -> consume -> flush -> PostgreSQL, asserted in Jaeger's API"
	@echo "make check-observability  alert rules, dashboard queries and a /metrics scrape checked by promtool"
	@echo "make helm-check  the Helm chart's test (builds helm + k8scheck into .local/bin the first time)"
	@echo "make packages    pack @queen-ingress/client and @queen-ingress/queenctl into .local/packages"
	@echo "make test-registry  the Schema Registry test against a real registry: QUEEN_TEST_SCHEMA_REGISTRY_URL=http://host:8081"
	@echo "                 (optional QUEEN_TEST_SCHEMA_REGISTRY_USER/_PASSWORD). None installs on this project's machines: Confluent's"
	@echo "                 and Karapace's are not reachable and Apicurio 3.3.3 cannot be built from Maven Central alone (docs/kafka-ingress.md),"
	@echo "                 so make test runs the same file against an in-process stand-in for the registry's REST API, and says so in the test names"

# node-gyp (cpu-features and ssh2's sshcrypto, under testcontainers) must build against the headers
# beside the node that runs it, not a `nodedir` from the user's npmrc naming
# another Node's (an addon built for 20 does not load on 24). Set for npm ci
# only: npm warns about this key on every call that sees it.
ifneq ($(NODE_HEADERS),)
$(STAMP): export npm_config_nodedir := $(abspath $(NODE_BIN)/..)
endif
$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $(STAMP)

install: $(STAMP)

build: install
	npx tsc -p tsconfig.json

# Lint first: ESLint reads types from tsconfig.json (not dist/), so it needs
# only the npm packages. Both checks always run; either failing fails lint.
lint: install
	@status=0; \
	npx eslint --max-warnings 0 . || status=1; \
	npx prettier --check . || status=1; \
	exit $$status

format: install
	npx prettier --write .

test: lint build
	scripts/with-deps.sh --kafka --profile test -- npx ava

# test/integration/schema-registry.test.ts against a real Schema Registry (see `make help`).
# Refuses to run without QUEEN_TEST_SCHEMA_REGISTRY_URL: the stand-in run is part of `make test` already.
.PHONY: test-registry
test-registry: build
	@if [ -z "$$QUEEN_TEST_SCHEMA_REGISTRY_URL" ]; then \
	  echo "make test-registry: set QUEEN_TEST_SCHEMA_REGISTRY_URL to a real Schema Registry (none runs on this project's machines; make test runs the same file against an in-process stand-in)"; \
	  exit 2; \
	fi
	scripts/with-deps.sh --kafka --profile test -- npx ava dist/test/integration/schema-registry.test.js

test-unit: build
	npx ava 'dist/test/unit/**/*.test.js'

# V8 flags for the service and for what measures it (docs/operations.md,
# "Node's young generation"): 32 MB semi-spaces let a bundle's short-lived
# objects die young instead of being promoted. The image sets the same
# NODE_OPTIONS; spawned service processes (chaos, soak) inherit it.
QUEEN_NODE_OPTIONS ?= --max-semi-space-size=32
RUN_NODE_OPTIONS = NODE_OPTIONS="$(QUEEN_NODE_OPTIONS) $${NODE_OPTIONS:-}"

# Without QUEEN_INGRESS_TOPICS, the local service consumes the topic "events".
run: build
	$(RUN_NODE_OPTIONS) QUEEN_INGRESS_TOPICS="$${QUEEN_INGRESS_TOPICS:-events}" scripts/with-deps.sh --kafka --profile run -- node dist/src/main.js

bench: build connect-fetch
	$(RUN_NODE_OPTIONS) scripts/with-deps.sh --kafka --profile run -- node dist/bench/run.js --full

bench-quick: build connect-fetch
	$(RUN_NODE_OPTIONS) scripts/with-deps.sh --kafka --profile run -- node dist/bench/run.js --quick

# Chaos (not part of `make test`): 1 M records, 10 % re-sent ids, kill -9 x10, PostgreSQL
# restarts x2, rebalances x5, broker SIGSTOP 20 s, compressed batches; report in
# bench/results/chaos/. Smaller: make chaos CHAOS_ARGS="--records 100000".
.PHONY: chaos
chaos: build
	$(RUN_NODE_OPTIONS) scripts/with-deps.sh --kafka --profile run -- node dist/test/chaos/chaos.js $(CHAOS_ARGS)

# Kafka Connect + Debezium's JDBC sink (the kafka-dups suite's baseline), from
# Maven Central into .local/connect; a no-op once cached.
.PHONY: connect-fetch
connect-fetch:
	deploy/local/connect/connect.sh fetch >/dev/null

clean:
	rm -rf dist

# Soaks: long runs outside `make test` and `make bench`. `make soak` runs them all.
.PHONY: soak soak-retention soak-memory
soak: soak-retention soak-memory

# 30 minutes at half of the measured max push rate with retention on; table
# sizes must stay flat after the first retention period (curve in bench/results/).
# SOAK_ARGS="--minutes 3 --retention 30" for a short check; SOAK_ARGS="--service-defaults
# --window 3600" keeps the default dedup cache (512 MB) and wires the compactor
# as the service does, so a window beyond the budget takes the cold path (issue 38).
soak-retention: build
	$(RUN_NODE_OPTIONS) scripts/with-deps.sh --profile run -- node dist/bench/soak.js retention $(SOAK_ARGS)

# How long one retention step holds its partition row lock (p50/p99/max per
# segment size) at the default batch; RETENTION_LOCK_ARGS="500" for another row batch.
.PHONY: retention-lock-hold
retention-lock-hold: build
	scripts/with-deps.sh --profile run -- node dist/bench/retentionLock.js $(RETENTION_LOCK_ARGS)

# How fast the retention leader drains a backlog (one queue, 64 partitions) at
# step concurrency 1 vs the default; RETENTION_DRAIN_ARGS="8 4" for concurrency 8, 4 reps.
.PHONY: retention-drain
retention-drain: build
	scripts/with-deps.sh --profile run -- node dist/bench/retentionDrain.js $(RETENTION_DRAIN_ARGS)

# Mixed HTTP traffic at a real service process; RSS/heap/dedup-cache curve in bench/results/.
# QUEEN_SOAK_SECONDS (default 4200: past the longest window the traffic sets), QUEEN_SOAK_CONCURRENCY (8), QUEEN_SOAK_PARTITIONS (2000),
# QUEEN_SOAK_DEDUP_CACHE_MB, QUEEN_SOAK_WINDOW_SECONDS, QUEEN_SOAK_MAX_SLOPE_MIB_MIN (1). See docs/memory.md.
soak-memory: build
	$(RUN_NODE_OPTIONS) scripts/with-deps.sh --profile run -- node dist/bench/soak/memory.js

# Local Jaeger v2 (traces UI) and helm, built from the Go module proxy into .local/bin.
GOBIN_DIR := $(CURDIR)/.local/bin
.PHONY: jaeger helm-lint test-jaeger check-observability
# Jaeger and promtool come from pinned tools modules (observability/tools/*):
# `go install …@v1.76.0` is refused because jaeger's go.mod has replace
# directives. Each takes ~15 minutes of both cores the first time, so they are
# built once, one package at a time and niced, and the binary is reused.
GO_TOOL_BUILD := nice -n 19 env GOFLAGS=-p=1 go build
$(GOBIN_DIR)/jaeger: observability/tools/jaeger/go.mod
	mkdir -p $(GOBIN_DIR)
	cd observability/tools/jaeger && $(GO_TOOL_BUILD) -o $(GOBIN_DIR)/jaeger github.com/jaegertracing/jaeger/cmd/jaeger
$(GOBIN_DIR)/promtool: observability/tools/promtool/go.mod
	mkdir -p $(GOBIN_DIR)
	cd observability/tools/promtool && $(GO_TOOL_BUILD) -o $(GOBIN_DIR)/promtool github.com/prometheus/prometheus/cmd/promtool
# The Go module carries no UI assets: this binary serves the OTLP receiver and
# the HTTP query API (/api/services, /api/traces); for the UI use the published
# image (observability/README.md).
jaeger: $(GOBIN_DIR)/jaeger
	$(GOBIN_DIR)/jaeger --config observability/jaeger.yaml

# Kafka records and HTTP pushes carrying a producer traceparent, through the
# real service process, asserted in Jaeger's query API. Not in `make test`:
# the first Jaeger build takes minutes.
test-jaeger: build $(GOBIN_DIR)/jaeger
	JAEGER_BIN=$(GOBIN_DIR)/jaeger scripts/with-deps.sh --kafka --profile test -- npx ava --config ava.jaeger.config.mjs

# Alert rules (syntax + promtool unit tests for every alert; the chart's copy
# identical, runbook links and test coverage: test/unit/alert-rules.test.ts),
# the dashboard's queries, and `promtool check metrics` on a /metrics scrape
# taken under load.
check-observability: build $(GOBIN_DIR)/promtool
	$(GOBIN_DIR)/promtool check rules observability/prometheus/alerts.yml
	$(GOBIN_DIR)/promtool test rules observability/prometheus/alerts.test.yml
	npx ava dist/test/unit/alert-rules.test.js
	mkdir -p .local/tmp
	node scripts/dashboard-rules.mjs observability/grafana/queen-ingress.json > .local/tmp/dashboard-rules.yml
	$(GOBIN_DIR)/promtool check rules .local/tmp/dashboard-rules.yml
	scripts/with-deps.sh --kafka --profile test -- node dist/test/observability/scrapeUnderLoad.js > .local/tmp/scrape.txt
	$(GOBIN_DIR)/promtool check metrics < .local/tmp/scrape.txt


# helm v3.22.0 and k8scheck (strict decoding of rendered manifests against the
# Kubernetes API types) come from one tools module (deploy/tools), built in one
# go build so the k8s.io packages compile once. At lowest priority and one
# package at a time: the machine is shared. Cold: see deploy/README.md.
GO_TOOLS_BUILD := nice -n 19 env GOFLAGS=-p=1 go build -trimpath
$(GOBIN_DIR)/helm $(GOBIN_DIR)/k8scheck &: deploy/tools/go.mod deploy/tools/go.sum deploy/tools/k8scheck/main.go
	@mkdir -p $(GOBIN_DIR)
	cd deploy/tools && $(GO_TOOLS_BUILD) -o $(GOBIN_DIR)/ helm.sh/helm/v3/cmd/helm ./k8scheck
	@touch $(GOBIN_DIR)/helm $(GOBIN_DIR)/k8scheck
helm-lint: $(GOBIN_DIR)/helm
	$(GOBIN_DIR)/helm lint --strict deploy/helm/queen-ingress

# The chart's test: lint --strict, render a matrix of values files, decode every
# manifest strictly, hardened pods, assertions on the renders (node and the
# yaml/pg packages, hence install), and the schema refusing bad values.
.PHONY: helm-check
helm-check: install $(GOBIN_DIR)/helm $(GOBIN_DIR)/k8scheck
	deploy/helm/check.sh $(GOBIN_DIR)/helm $(GOBIN_DIR)/k8scheck

# The installable packages (packages/client, packages/queenctl) as tarballs in
# .local/packages, until they are published. npm pack runs each package's
# prepack first: the client's build.mjs makes its ESM and CommonJS builds.
.PHONY: packages
packages: install
	@mkdir -p .local/packages
	npm pack --pack-destination .local/packages ./packages/client ./packages/queenctl
