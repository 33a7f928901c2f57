#!/usr/bin/env bash
# The whole test suite, on a fresh machine: builds the pinned test servers
# (versitygw for S3, fake-gcs-server for Cloud Storage, from tools/go.mod)
# into .cache/bin and installs the Azure Blob test server (Azurite, from
# tools/azurite) into .cache/azurite, then runs every test with the race
# detector and, beside them, the static checks (building golangci-lint the
# same way) and govulncheck: the tests mostly wait on servers and timers,
# so the checks fit in their idle time. Built tools are kept between runs in the
# tool cache (scripts/tools.sh). Tests start their own server instances on
# loopback; a test that needs a server fails if it cannot start.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/tools.sh
build_tool versitygw github.com/versity/versitygw/cmd/versitygw
build_tool fake-gcs-server github.com/fsouza/fake-gcs-server
export COMMITPTR_VERSITYGW="$PWD/.cache/bin/versitygw"
install_azurite
export COMMITPTR_AZURITE="$PWD/.cache/azurite/node_modules/.bin/azurite-blob"
export COMMITPTR_FAKE_GCS_SERVER="$PWD/.cache/bin/fake-gcs-server"
install_clients

checks=$(mktemp)
trap 'rm -f "$checks"' EXIT
# Niced, so that the tests, some of which time themselves, keep the CPU.
nice -n 19 bash -c 'set -euo pipefail; . scripts/tools.sh; static_checks; vulncheck' >"$checks" 2>&1 &
checks_pid=$!
echo "==> go test -race (the static checks and govulncheck run beside it)"
tests=0
go test -race -count=1 -timeout 20m "$@" ./... || tests=$?
checked=0
wait "$checks_pid" || checked=$?
cat "$checks"
if [ "$checked" -ne 0 ]; then
	echo "test: the static checks or govulncheck failed (above)" >&2
fi
[ "$tests" -eq 0 ] && [ "$checked" -eq 0 ]
