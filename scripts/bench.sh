#!/usr/bin/env bash
# Side-by-side benchmarks against the real S3 test server on loopback:
#   (a) commit and snapshot read against the raw-SDK floor (Go benchmarks),
#   (b) `publish put`/`get` against `rclone copy` on the same data and server,
#   (c) scale: a 100,000-file publish and commit latency after 10 vs 10,000
#       prior commits,
# plus the contention curve, drawn to docs/contention.svg, and
#   (gc) the collector on a backlog, this tree against a baseline commit
#       (GC_BASE, default main) side by side: GC_BENCH_GENS generations of
#       10 objects (default 10000), GC_REPS runs each (default 2), alternating.
# rclone is built from source into .cache/bin; the library never depends on it.
# Usage: scripts/bench.sh [a] [b] [c] [plot] [gc]   (default: all but gc)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/.cache/bin
mkdir -p "$bin"
RCLONE_VERSION=v1.69.1
REPS=${REPS:-3}
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(a b c plot)

want() { [[ " ${parts[*]} " == *" $1 "* ]]; }

if [ -z "${COMMITPTR_VERSITYGW:-}" ]; then
	[ -x "$bin/versitygw" ] || (cd tools && go build -o "$bin/versitygw" github.com/versity/versitygw/cmd/versitygw)
	export COMMITPTR_VERSITYGW=$bin/versitygw
fi
go build -o "$bin/publish" ./cmd/publish

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(go version | cut -d' ' -f3), $(date -u +%Y-%m-%d)"

if want a; then
	echo "== (a) floor ratios"
	go test -run - -bench 'Floor' -benchtime 100x ./internal/perf | grep -E '^Benchmark'
fi

if want plot; then
	echo "== contention curve"
	COMMITPTR_PLOT=$root/docs/contention.svg go test -run - -bench Contention -benchtime 1x ./internal/perf | grep -E '^Benchmark'
fi

if want c; then
	echo "== (c) scale"
	go test -run - -bench 'ScalePublish' -benchtime 1x -timeout 60m ./internal/perf | grep -E '^Benchmark'
	go test -run - -bench 'CommitAfterHistory' -benchtime 50x -timeout 60m ./internal/perf | grep -E '^Benchmark'
fi

if want b; then
	[ -x "$bin/rclone" ] || GOBIN=$bin go install "github.com/rclone/rclone@$RCLONE_VERSION"
	work=$(mktemp -d)
	trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	mkdir -p "$work/root/bench"
	"$COMMITPTR_VERSITYGW" --access bench --secret benchsecret --port "127.0.0.1:$port" --quiet posix "$work/root" >/dev/null 2>&1 &
	srv=$!
	for _ in $(seq 100); do curl -s "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.1; done
	export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=benchsecret AWS_REGION=us-east-1
	export RCLONE_CONFIG_VGW_TYPE=s3 RCLONE_CONFIG_VGW_PROVIDER=Other RCLONE_CONFIG_VGW_ENDPOINT=http://127.0.0.1:$port
	export RCLONE_CONFIG_VGW_ACCESS_KEY_ID=bench RCLONE_CONFIG_VGW_SECRET_ACCESS_KEY=benchsecret RCLONE_CONFIG_VGW_FORCE_PATH_STYLE=true
	ep=(--endpoint "http://127.0.0.1:$port" --path-style)

	mkdir -p "$work/small" "$work/large"
	for i in $(seq 0 1999); do head -c 4096 /dev/urandom > "$work/small/f$i"; done
	for i in 0 1 2 3; do head -c $((256 << 20)) /dev/urandom > "$work/large/f$i"; done

	t() { local s=$EPOCHREALTIME; "$@" >/dev/null; awk -v s="$s" -v e="$EPOCHREALTIME" 'BEGIN {print e - s}'; }
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
	median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
	for set in small large; do
		: > "$work/p_put"; : > "$work/r_put"; : > "$work/p_get"; : > "$work/r_get"
		for r in $(seq "$REPS"); do
			# Alternate who goes first.
			if [ $((r % 2)) = 1 ]; then
				t "$bin/publish" "${ep[@]}" put --concurrency 16 "$work/$set" "s3://bench/p-$set-$r" >> "$work/p_put"
				t "$bin/rclone" copy --transfers 16 --checkers 16 "$work/$set" "vgw:bench/r-$set-$r" >> "$work/r_put"
			else
				t "$bin/rclone" copy --transfers 16 --checkers 16 "$work/$set" "vgw:bench/r-$set-$r" >> "$work/r_put"
				t "$bin/publish" "${ep[@]}" put --concurrency 16 "$work/$set" "s3://bench/p-$set-$r" >> "$work/p_put"
			fi
			rm -rf "$work/out-p" "$work/out-r"
			t "$bin/publish" "${ep[@]}" get "s3://bench/p-$set-$r" "$work/out-p" >> "$work/p_get"
			t "$bin/rclone" copy --transfers 16 --checkers 16 "vgw:bench/r-$set-$r" "$work/out-r" >> "$work/r_get"
			diff -r "$work/$set" "$work/out-p" >/dev/null
			rm -rf "$work/out-p" "$work/out-r"
		done
		pp=$(median < "$work/p_put"); rp=$(median < "$work/r_put")
		pg=$(median < "$work/p_get"); rg=$(median < "$work/r_get")
		printf '(b) %-5s put: publish %.2fs rclone %.2fs ratio %.2f | get: publish %.2fs rclone %.2fs ratio %.2f (median of %d)\n' \
			"$set" "$pp" "$rp" "$(ratio "$pp" "$rp")" "$pg" "$rg" "$(ratio "$pg" "$rg")" "$REPS"
	done
fi

if want gc; then
	echo "== (gc) collector on a backlog: this tree against ${GC_BASE:-main}"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$work/base"
	git archive "${GC_BASE:-main}" | tar -x -C "$work/base"
	(cd "$work/base" && go test -c -o "$work/base.test" ./gc)
	go test -c -o "$work/new.test" ./gc
	gens=${GC_BENCH_GENS:-10000}
	for r in $(seq "${GC_REPS:-2}"); do
		for which in base new; do
			[ $((r % 2)) = 0 ] && which=$([ "$which" = base ] && echo new || echo base)
			echo "-- run $r: $which"
			(cd gc && GC_BENCH_GENS=$gens GC_BENCH_DRIVERS=s3 "$work/$which.test" -test.run - -test.bench BenchmarkCollect -test.benchtime 1x -test.timeout 60m) | grep -E '^Benchmark'
		done
	done
fi
