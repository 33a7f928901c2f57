# Sourced by scripts/test.sh and scripts/mutants.sh, from the repository
# root: builds the tools pinned in tools/go.mod into .cache/bin once.

# tool_cache names the directory that keeps built tools between runs,
# outside the checkout: below COMMITPTR_TOOL_CACHE (default the user's cache
# directory), one directory per content of the tools modules and Go
# version, so that a change of either builds the tools afresh.
tool_cache() {
	local key
	key=$(cat tools/go.mod tools/go.sum tools/vuln/go.mod tools/vuln/go.sum | sha256sum | cut -c1-16)
	echo "${COMMITPTR_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/commitptr/tools}/$key-$(go env GOVERSION GOOS GOARCH | paste -sd-)"
}

# build_tool BIN PACKAGE [MODULE] builds PACKAGE from the tools module
# MODULE (default tools) into .cache/bin/BIN unless it is there already,
# taking it from the tool cache when it holds it, and leaving it there.
build_tool() {
	mkdir -p .cache/bin
	[ -x ".cache/bin/$1" ] && return
	local cached
	cached="$(tool_cache)/$1"
	if [ -x "$cached" ]; then
		cp "$cached" ".cache/bin/$1"
		return
	fi
	echo "==> building $1 (pinned in ${3:-tools}/go.mod)"
	(cd "${3:-tools}" && go build -o "$OLDPWD/.cache/bin/$1" "$2")
	# The cache is a convenience: a run that cannot fill it goes on.
	mkdir -p "$(dirname "$cached")" 2>/dev/null &&
		cp ".cache/bin/$1" "$cached.$$" 2>/dev/null && mv "$cached.$$" "$cached" || true
}

# vulncheck runs govulncheck on every package against the Go vulnerability
# database at the version pinned in tools/vuln/go.mod, indexed offline by
# the database's own indexdb. A called vulnerability in a module fails; one
# in the standard library is reported with the Go release that fixes it,
# as the toolchain is the machine's (scripts/vulngate.py).
vulncheck() {
	build_tool govulncheck golang.org/x/vuln/cmd/govulncheck tools/vuln
	local db=.cache/vulndb version src
	version=$(cd tools/vuln && go list -m -f '{{.Version}}' golang.org/x/vulndb)
	if [ "$(cat "$db/version" 2>/dev/null)" != "$version" ]; then
		build_tool vulndb-index golang.org/x/vulndb/cmd/indexdb tools/vuln
		src=$(cd tools/vuln && go mod download golang.org/x/vulndb && go list -m -f '{{.Dir}}' golang.org/x/vulndb)
		rm -rf "$db"
		.cache/bin/vulndb-index -vulns "$src/data/osv" -out "$db"
		echo "$version" >"$db/version"
	fi
	echo "==> govulncheck (database $version)"
	.cache/bin/govulncheck -db "file://$PWD/$db" -format json ./... | python3 scripts/vulngate.py
}

# use_versitygw points COMMITPTR_VERSITYGW at the S3 test server, building
# it first unless the variable already names an executable.
use_versitygw() {
	if [ -n "${COMMITPTR_VERSITYGW:-}" ] && [ -x "$COMMITPTR_VERSITYGW" ]; then
		export COMMITPTR_VERSITYGW
		return
	fi
	build_tool versitygw github.com/versity/versitygw/cmd/versitygw
	export COMMITPTR_VERSITYGW="$PWD/.cache/bin/versitygw"
}

# install_azurite installs the Azure Blob test server (Azurite), pinned in
# tools/azurite/package-lock.json, into .cache/azurite with `npm ci`, unless
# the installed lock file is the pinned one already. Install scripts are not
# run: Azurite needs none.
install_azurite() {
	if [ -x .cache/azurite/node_modules/.bin/azurite-blob ] &&
		cmp -s tools/azurite/package-lock.json .cache/azurite/package-lock.json; then
		return
	fi
	echo "==> installing azurite (pinned in tools/azurite)"
	rm -rf .cache/azurite
	mkdir -p .cache/azurite
	cp tools/azurite/package.json tools/azurite/package-lock.json .cache/azurite/
	(cd .cache/azurite && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
}

# static_checks runs gofmt, go vet (on Linux and macOS, which must build
# too, and the distributed run's build tag) and golangci-lint (.golangci.yml:
# errcheck, and staticcheck with its own default checks, among others),
# which it builds first if need be. The standalone staticcheck stays pinned
# in tools/go.mod for a developer who wants its output alone.
static_checks() {
	build_tool golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	echo "==> gofmt"
	local unformatted
	unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^tools/') 2>/dev/null || true)
	if [ -n "$unformatted" ]; then
		echo "gofmt needed:"; echo "$unformatted"; return 1
	fi
	echo "==> go vet (linux, macOS, and the distributed run)"
	go vet ./...
	GOOS=darwin go vet ./...
	go vet -tags distributed ./tests/reliability
	echo "==> golangci-lint"
	.cache/bin/golangci-lint run ./...
}

# install_clients installs the S3 clients the serve tests drive (Debian's
# awscli, python3-boto3 and rclone), and for a user other than root the
# fusermount3 the mount tests need (fuse3), with apt-get where one is missing, and
# exports their paths: COMMITPTR_AWS, COMMITPTR_PYTHON (a python3 that
# imports boto3) and COMMITPTR_RCLONE. The paths are the system's own, as
# another aws or python3 may come first on PATH.
install_clients() {
	local missing=()
	[ -x /usr/bin/aws ] || missing+=(awscli)
	/usr/bin/python3 -c 'import boto3' 2>/dev/null || missing+=(python3-boto3)
	[ -x /usr/bin/rclone ] || missing+=(rclone)
	# publish mount: root mounts FUSE directly; another user needs fusermount3.
	[ "$(id -u)" -eq 0 ] || command -v fusermount3 >/dev/null || missing+=(fuse3)
	if [ ${#missing[@]} -gt 0 ]; then
		echo "==> installing ${missing[*]} (apt-get)"
		local sudo=()
		[ "$(id -u)" -eq 0 ] || sudo=(sudo)
		export DEBIAN_FRONTEND=noninteractive
		"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
		"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
	fi
	export COMMITPTR_AWS=/usr/bin/aws COMMITPTR_PYTHON=/usr/bin/python3 COMMITPTR_RCLONE=/usr/bin/rclone
}
