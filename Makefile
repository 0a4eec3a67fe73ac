SHELL := /bin/bash

MYSQL_PORT ?= 3306
REDIS_PORT ?= 6379
FUZZTIME   ?= 30s
export MYSQL_PORT REDIS_PORT

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build services services-down test run lint fuzz clean

all: build

build:
	go build -ldflags "-X main.version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/paygw ./cmd/paygw

services:
	scripts/services.sh up

services-down:
	scripts/services.sh down

test: export PAYGW_TEST_MYSQL_DSN = root@tcp(127.0.0.1:$(MYSQL_PORT))/
test: export PAYGW_TEST_REDIS_ADDR = 127.0.0.1:$(REDIS_PORT)
test: services
	go test -race -count=1 -timeout 8m ./...

run: services build
	scripts/demo.sh

lint:
	go vet ./...
	go run $(STATICCHECK) ./...

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

clean:
	rm -rf bin/
