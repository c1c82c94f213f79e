# The README's two commands: `make run` and `make test`. Both do their own
# set-up on a fresh machine (npm packages, PostgreSQL 15, Apache Kafka jars).
SHELL := /bin/bash
.DEFAULT_GOAL := help
STAMP := node_modules/.install-stamp

.PHONY: help install build test test-unit run bench bench-quick clean lint-sql

help:
	@echo "make run         start PostgreSQL + Kafka locally (unless DATABASE_URL / KAFKA_BROKERS are set) and the service"
	@echo "make test        every test (unit + integration) against real PostgreSQL and Kafka"
	@echo "make bench       full side-by-side benchmarks (results in bench/results/)"
	@echo "make bench-quick the same benchmarks at small sizes"
	@echo "make soak        long soaks (make soak-retention: 30 min, table sizes flat under retention)"
	@echo "make chaos       1 M records under kill -9, PostgreSQL restarts, rebalances, a paused broker; JSON report (not in make test)"
	@echo "make helm-check  the Helm chart's test (builds helm + k8scheck into .local/bin the first time)"
	@echo "make packages    pack @queen-ingress/client and @queen-ingress/queenctl into .local/packages"

$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $(STAMP)

install: $(STAMP)

build: install
	npx tsc -p tsconfig.json

test: build
	scripts/with-deps.sh --kafka --profile test -- npx ava

test-unit: build
	npx ava 'dist/test/unit/**/*.test.js'

# Without QUEEN_INGRESS_TOPICS, the local service consumes the topic "events".
run: build
	QUEEN_INGRESS_TOPICS="$${QUEEN_INGRESS_TOPICS:-events}" scripts/with-deps.sh --kafka --profile run -- node dist/src/main.js

bench: build
	scripts/with-deps.sh --kafka --profile run -- node dist/bench/run.js --full

bench-quick: build
	scripts/with-deps.sh --kafka --profile run -- node dist/bench/run.js --quick

# Chaos (not part of `make test`): 1 M records, 10 % re-sent ids, kill -9 x10, PostgreSQL
# restarts x2, rebalances x5, broker SIGSTOP 20 s, compressed batches; report in
# bench/results/chaos/. Smaller: make chaos CHAOS_ARGS="--records 100000".
.PHONY: chaos
chaos: build
	scripts/with-deps.sh --kafka --profile run -- node dist/test/chaos/chaos.js $(CHAOS_ARGS)

clean:
	rm -rf dist

# Soaks: long runs outside `make test` and `make bench`. `make soak` runs them all.
.PHONY: soak soak-retention
soak: soak-retention

# 30 minutes at half of the measured max push rate with retention on; table
# sizes must stay flat after the first retention period (curve in bench/results/).
# SOAK_ARGS="--minutes 3 --retention 30" for a short check.
soak-retention: build
	scripts/with-deps.sh --profile run -- node dist/bench/soak.js retention $(SOAK_ARGS)

# Local Jaeger v2 (traces UI) and helm, built from the Go module proxy into .local/bin.
GOBIN_DIR := $(CURDIR)/.local/bin
.PHONY: jaeger helm-lint
$(GOBIN_DIR)/jaeger:
	GOBIN=$(GOBIN_DIR) go install github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0
jaeger: $(GOBIN_DIR)/jaeger
	$(GOBIN_DIR)/jaeger --config observability/jaeger.yaml

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
# manifest strictly, hardened pods, and the schema refusing bad values.
.PHONY: helm-check
helm-check: $(GOBIN_DIR)/helm $(GOBIN_DIR)/k8scheck
	deploy/helm/check.sh $(GOBIN_DIR)/helm $(GOBIN_DIR)/k8scheck

# The installable packages (packages/client, packages/queenctl) as tarballs in .local/packages.
.PHONY: packages
packages: install
	@mkdir -p .local/packages
	npm pack --pack-destination .local/packages ./packages/client ./packages/queenctl
