#!/usr/bin/env bash
# The quick loop, for every few minutes of work (about 2 minutes on two
# cores): gofmt, go vet, golangci-lint (staticcheck and errcheck among its
# linters), then the race-detector tests of the
# packages that need no test server (mem and fs stores, the codecs, the
# drivers' own helpers, the examples on file://), with -short. `make test`
# runs everything, on every driver; CI runs that.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/tools.sh
# The packages whose tests run on the in-memory and local stores only.
fast=(
	.
	./commit/internal/group
	./internal/bench
	./examples/...
	./generation
	./internal/localfile
	./internal/strictjson
	./pointer
	./store
	./store/fs
	./store/internal/...
	./store/mem
)

static_checks
echo "==> go test -race -short (no test servers)"
go test -race -short -count=1 "$@" "${fast[@]}"
