#!/usr/bin/env bash
# The quick loop, for every few minutes of work (about 2 minutes on two
# cores): gofmt, go vet, staticcheck, then the race-detector tests of the
# packages that need no test server (mem and fs stores, the codecs, the
# drivers' own helpers, the examples on file://), with -short. `make test`
# runs everything, on every driver; CI runs that.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/tools.sh
build_tool staticcheck honnef.co/go/tools/cmd/staticcheck

# The packages whose tests run on the in-memory and local stores only.
fast=(
	.
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

echo "==> gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^tools/') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
	echo "gofmt needed:"; echo "$unformatted"; exit 1
fi
echo "==> go vet"
go vet ./...
echo "==> staticcheck"
.cache/bin/staticcheck ./...
echo "==> go test -race -short (no test servers)"
go test -race -short -count=1 "$@" "${fast[@]}"
