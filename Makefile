SHELL := /bin/bash

MYSQL_PORT ?= 3306
REDIS_PORT ?= 6379
FUZZTIME   ?= 30s
export MYSQL_PORT REDIS_PORT

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOSEC       := github.com/securego/gosec/v2/cmd/gosec@v2.30.0

.PHONY: all build services services-down test run lint doccheck fuzz clean bench chaos chaos-cluster

all: build

build:
	go build -ldflags "-X main.version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/paygw ./cmd/paygw

services:
	scripts/services.sh up

services-down:
	scripts/services.sh down

# The full -v log goes to .test.log (the terminal shows go test's summary lines and failures);
# then every secret the tests configured (.test.secrets) must be absent from it and from the
# services' logs (.services/).
test: export PAYGW_TEST_MYSQL_DSN = root@tcp(127.0.0.1:$(MYSQL_PORT))/
test: export PAYGW_TEST_REDIS_ADDR = 127.0.0.1:$(REDIS_PORT)
test: export PAYGW_TEST_SECRETS_FILE = $(CURDIR)/.test.secrets
test: services
	rm -f .test.secrets .test.log
	scripts/prometheus.sh
	scripts/promtool.sh
	scripts/chromium.sh
	go test -race -count=1 -timeout 8m -v ./... 2>&1 | tee .test.log | grep -E '^(ok|FAIL|--- FAIL|panic:|\?)'; \
	  status=$${PIPESTATUS[0]}; \
	  [ "$$status" = 0 ] || grep -E -B25 '^\s*--- FAIL|^panic:' .test.log | grep -v '^redis: ' | head -300; \
	  exit $$status
	go run ./internal/secretscan -secrets .test.secrets -log .test.log -log .services
	@# The spin model (CPU, one core) runs beside the short chaos drill (mostly waiting on its
	@# faults); its output follows the drill's.
	scripts/model.sh > .model.log 2>&1 & model=$$!; \
	  scripts/chaos.sh --short; chaos=$$?; \
	  wait $$model; spin=$$?; cat .model.log; \
	  echo "make test: chaos.sh --short exit $$chaos, model.sh exit $$spin"; \
	  [ "$$chaos" = 0 ] && [ "$$spin" = 0 ]

run: services build
	scripts/demo.sh

lint: doccheck
	go vet ./...
	go run $(STATICCHECK) ./...
	go run $(GOSEC) -quiet -exclude-generated ./...

# Doc comments name what they document (staticcheck ST1020-ST1022; .ci/run runs it).
doccheck:
	go run $(STATICCHECK) -checks ST1020,ST1021,ST1022 ./...

# Runs every `func FuzzXxx` found in *_test.go files for FUZZTIME each.
fuzz:
	@set -euo pipefail; found=0; \
	while IFS= read -r file; do \
	  pkg="./$$(dirname "$${file#./}")"; \
	  for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
	    found=1; \
	    echo "go test -run '^\$$' -fuzz '^$${name}\$$' -fuzztime $(FUZZTIME) $$pkg"; \
	    go test -run '^$$' -fuzz "^$${name}\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
	  done; \
	done < <(find . -mindepth 1 \( -name '.*' -o -name vendor -o -name testdata \) -prune -o -type f -name '*_test.go' -print | LC_ALL=C sort); \
	[ "$$found" = 1 ] || echo "fuzz: no Fuzz targets found"

# Faults with nothing lost, on its own MariaDB/Redis (CHAOS_MYSQL_PORT 3407, CHAOS_REDIS_PORT 6479);
# writes the figures into docs/reliability.md. `scripts/chaos.sh --short` is the CI version.
chaos:
	scripts/chaos.sh

# The same on its own 3-node Galera cluster (3321..3323, one replica per node) and 6-node Redis
# Cluster (7201..7206): storm with and without the guard, a Galera node SIGKILL (back by IST), a
# Redis master SIGKILL (failover), replica SIGKILLs; figures into docs/reliability.md.
# `scripts/chaos.sh --cluster --short` is the CI version: .ci/run runs it after make test (it takes
# over 3 minutes with its cluster's start, so it stays out of make test's 12).
chaos-cluster:
	scripts/chaos.sh --cluster

# The Promela model of the apply protocol, checked by spin (installed if missing); about a minute.
# See apply/model/README.md. Part of make test.
.PHONY: model
model:
	scripts/model.sh

# promtool check rules and promtool test rules on deploy/prometheus/ (installs Debian's
# prometheus package for promtool if missing). Part of make test.
.PHONY: rules
rules:
	scripts/promtool.sh

clean:
	rm -rf bin/

# Load test with ceiling ratios: the real gateway against the raw-SQL and verify-only
# ceilings on the same MariaDB and the tool's own Redis. BENCH_SCALE=0.1 for a quick run.
bench: services
	go run ./cmd/paygw-load --mysql 'root@tcp(127.0.0.1:$(MYSQL_PORT))/'

# The Galera tests alone, on the 3-node cluster scripts/galera.sh starts if it is not up (they
# also run in make test). `scripts/galera.sh down` stops the cluster.
.PHONY: galera-test
galera-test: export PAYGW_TEST_MYSQL_DSN = root@tcp(127.0.0.1:$(MYSQL_PORT))/
galera-test: services
	go test -race -count=1 -timeout 5m -run Galera -v ./apply/ ./repository/
