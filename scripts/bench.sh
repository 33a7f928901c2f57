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
#   (wan) `publish put` of 1 file and of 10 files with 1 changed, into
#       datasets with history, and `publish get` of the 1 file (get1: the
#       manifest cache holds its manifest; getc: --no-cache), against
#       `rclone copy` of the same, each run direct and through
#       internal/wanproxy (WAN_DELAY each way, in ms, default 10ms) in front
#       of the same server; with WAN_BASE=<commit>, the publish built from
#       that commit runs in the same pairs. Median of REPS (default 9 for
#       wan alone); then the proxy's request log of one run of each, as a
#       timeline.
#   (transfers) `publish put`/`get` of 2,000 × 4 KiB through
#       internal/wanproxy (WAN_DELAY each way, default 10ms) with its
#       adaptive window and with --transfers 16, against rclone at
#       --transfers 16 and 64; and on loopback, against rclone and, with
#       TRANSFERS_BASE=<commit>, the publish built from that commit.
#       Rotating order, median of REPS.
#   (durable) `publish get` of one 256 MiB file while dd writes 1 GiB to the
#       same file system, and of 2,000 × 4 KiB, against rclone and against a
#       baseline commit (DURABLE_BASE, default main), paired, REPS runs.
#   (large) `publish put`/`get` of 4 files of LARGE_MIB MiB (default 1024)
#       against rclone: wall, user and system CPU, paired, REPS runs.
#   (memory) `publish put` of MEM_FILES small files (default 100000, in
#       1,000 directories) against rclone: peak RSS and wall, alternating,
#       REPS runs.
# rclone is built from source into .cache/bin; the library never depends on it.
# Usage: scripts/bench.sh [a] [b] [c] [plot] [gc] [wan] [transfers] [durable] [large] [memory]
#        (default: all but gc, wan, transfers, durable, large and memory)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/.cache/bin
mkdir -p "$bin"
RCLONE_VERSION=v1.69.1
parts=("$@")
if [ "${parts[*]}" = wan ]; then REPS=${REPS:-9}; else REPS=${REPS:-3}; fi
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
	go test -run - -bench 'Floor' -benchtime 100x ./tests/perf | grep -E '^Benchmark'
fi

if want plot; then
	echo "== contention curve"
	COMMITPTR_PLOT=$root/docs/contention.svg go test -run - -bench Contention -benchtime 1x ./tests/perf | grep -E '^Benchmark'
fi

if want c; then
	echo "== (c) scale"
	go test -run - -bench 'ScalePublish' -benchtime 1x -timeout 60m ./tests/perf | grep -E '^Benchmark'
	go test -run - -bench 'CommitAfterHistory' -benchtime 50x -timeout 60m ./tests/perf | grep -E '^Benchmark'
fi

t() { local s=$EPOCHREALTIME; "$@" >/dev/null; awk -v s="$s" -v e="$EPOCHREALTIME" 'BEGIN {print e - s}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# server starts versitygw on loopback with its root in $work/root (bucket
# "bench") and sets up publish (ep) and rclone (remote vgw:) to reach it.
server() {
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
}

if want b; then
	server
	mkdir -p "$work/small" "$work/large"
	for i in $(seq 0 1999); do head -c 4096 /dev/urandom > "$work/small/f$i"; done
	for i in 0 1 2 3; do head -c $((256 << 20)) /dev/urandom > "$work/large/f$i"; done
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

if want transfers; then
	server
	go build -o "$work/wanproxy" ./internal/wanproxy/cmd/wanproxy
	"$work/wanproxy" -target "http://127.0.0.1:$port" -delay "${WAN_DELAY:-10ms}" > "$work/wan.url" &
	proxy=$!
	trap 'kill $srv $proxy 2>/dev/null || true; rm -rf "$work"' EXIT
	for _ in $(seq 100); do [ -s "$work/wan.url" ] && break; sleep 0.1; done
	wan=$(cat "$work/wan.url")
	export RCLONE_CONFIG_WAN_TYPE=s3 RCLONE_CONFIG_WAN_PROVIDER=Other RCLONE_CONFIG_WAN_ENDPOINT=$wan
	export RCLONE_CONFIG_WAN_ACCESS_KEY_ID=bench RCLONE_CONFIG_WAN_SECRET_ACCESS_KEY=benchsecret RCLONE_CONFIG_WAN_FORCE_PATH_STYLE=true
	export AWS_EC2_METADATA_DISABLED=true PUBLISH_NO_CACHE=true RCLONE_CONFIG=$work/rclone.conf
	: > "$work/rclone.conf"
	cp "$bin/publish" "$work/publish-new"
	runs=("publish wan" "publish16 wan" "rclone16 wan" "rclone64 wan" "publish lo" "rclone16 lo")
	if [ -n "${TRANSFERS_BASE:-}" ]; then
		mkdir -p "$work/base"
		git archive "$TRANSFERS_BASE" | tar -x -C "$work/base"
		(cd "$work/base" && go build -o "$work/publish-base" ./cmd/publish)
		runs+=("base lo")
	fi
	mkdir -p "$work/small"
	for i in $(seq 0 1999); do head -c 4096 /dev/urandom > "$work/small/f$i"; done
	echo "== (transfers) 2,000 x 4 KiB, ${WAN_DELAY:-10ms} each way (wan) and on loopback (lo); median of $REPS"
	# one NAME VIA REP: a put then a get, timed into $work/NAME-VIA-put and -get.
	one() {
		local name=$1 via=$2 r=$3 remote=vgw endpoint=http://127.0.0.1:$port ds=$1-$2-$3
		[ "$via" = wan ] && remote=wan endpoint=$wan
		local pub=("$work/publish-new" --endpoint "$endpoint" --path-style)
		rm -rf "$work/out"
		case $name in
		publish | base)
			[ "$name" = base ] && pub[0]=$work/publish-base
			t "${pub[@]}" put "$work/small" "s3://bench/$ds" >> "$work/$name-$via-put"
			t "${pub[@]}" get "s3://bench/$ds" "$work/out" >> "$work/$name-$via-get" ;;
		publish16)
			t "${pub[@]}" --transfers 16 put "$work/small" "s3://bench/$ds" >> "$work/$name-$via-put"
			t "${pub[@]}" --transfers 16 get "s3://bench/$ds" "$work/out" >> "$work/$name-$via-get" ;;
		rclone*)
			local n=${name#rclone}
			t "$bin/rclone" copy --transfers "$n" --checkers "$n" "$work/small" "$remote:bench/$ds" >> "$work/$name-$via-put"
			t "$bin/rclone" copy --transfers "$n" --checkers "$n" "$remote:bench/$ds" "$work/out" >> "$work/$name-$via-get" ;;
		esac
		diff -r "$work/small" "$work/out" >/dev/null
	}
	for r in $(seq "$REPS"); do
		n=${#runs[@]}
		for i in $(seq 0 $((n - 1))); do
			read -r name via <<< "${runs[$(((i + r) % n))]}"
			one "$name" "$via" "$r"
		done
	done
	printf '%-10s %-4s %9s %9s %14s %14s\n' run via put get "put/rclone16" "get/rclone16"
	for run in "${runs[@]}"; do
		read -r name via <<< "$run"
		for op in put get; do eval "m_$op=$(median < "$work/$name-$via-$op")"; eval "r_$op=$(median < "$work/rclone16-$via-$op")"; done
		printf '%-10s %-4s %8.2fs %8.2fs %14.2f %14.2f\n' "$name" "$via" "$m_put" "$m_get" "$(ratio "$m_put" "$r_put")" "$(ratio "$m_get" "$r_get")"
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

if want wan; then
	[ -x "$bin/rclone" ] || GOBIN=$bin go install "github.com/rclone/rclone@$RCLONE_VERSION"
	delay=${WAN_DELAY:-10ms}
	work=$(mktemp -d)
	trap 'kill $srv $proxy $proxy0 2>/dev/null || true; rm -rf "$work"' EXIT
	go build -o "$work/wanproxy" ./internal/wanproxy/cmd/wanproxy
	pubs=(new)
	go build -o "$work/publish-new" ./cmd/publish
	if [ -n "${WAN_BASE:-}" ]; then
		mkdir -p "$work/base"
		git archive "$WAN_BASE" | tar -x -C "$work/base"
		(cd "$work/base" && go build -o "$work/publish-base" ./cmd/publish)
		pubs=(base new)
	fi
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	mkdir -p "$work/root/bench"
	"$COMMITPTR_VERSITYGW" --access bench --secret benchsecret --port "127.0.0.1:$port" --quiet posix "$work/root" >/dev/null 2>&1 &
	srv=$!
	for _ in $(seq 100); do curl -s "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.1; done
	# Two proxies: one that delays, and one that does not, for the direct
	# runs, so that both have a request log (its hop on loopback costs well
	# under a millisecond per request).
	"$work/wanproxy" -target "http://127.0.0.1:$port" -delay "$delay" -log "$work/proxy-wan.log" > "$work/wan.url" &
	proxy=$!
	"$work/wanproxy" -target "http://127.0.0.1:$port" -delay 0 -log "$work/proxy-direct.log" > "$work/direct.url" &
	proxy0=$!
	for _ in $(seq 100); do [ -s "$work/wan.url" ] && [ -s "$work/direct.url" ] && break; sleep 0.1; done
	wan=$(cat "$work/wan.url") direct=$(cat "$work/direct.url")
	export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=benchsecret AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
	# publish's manifest cache starts empty, and fills as it would on the
	# writer's machine; getc reads without it, as a machine that never saw
	# the dataset does.
	export XDG_CACHE_HOME=$work/cache
	for r in VGW WAN; do
		export "RCLONE_CONFIG_${r}_TYPE=s3" "RCLONE_CONFIG_${r}_PROVIDER=Other" "RCLONE_CONFIG_${r}_ACCESS_KEY_ID=bench"
		export "RCLONE_CONFIG_${r}_SECRET_ACCESS_KEY=benchsecret" "RCLONE_CONFIG_${r}_FORCE_PATH_STYLE=true"
	done
	export RCLONE_CONFIG_VGW_ENDPOINT=$direct RCLONE_CONFIG_WAN_ENDPOINT=$wan RCLONE_CONFIG=$work/rclone.conf
	: > "$work/rclone.conf"
	rtt=$(awk -v d="${delay%ms}" 'BEGIN {print 2 * d / 1000}')
	echo "== (wan) files of 4 KiB, $delay each way (a round trip: ${rtt}s); median of $REPS"

	t() { local s=$EPOCHREALTIME; "$@" >/dev/null; awk -v s="$s" -v e="$EPOCHREALTIME" 'BEGIN {print e - s}'; }
	median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
	# src1: one file; src10: ten files, of which f0 changes before each put.
	mkdir -p "$work/src1" "$work/src10"
	for i in $(seq 0 9); do head -c 4096 /dev/urandom > "$work/src10/f$i"; done
	tools=()
	for p in "${pubs[@]}"; do tools+=("$p"); done
	tools+=(rclone)
	# op TOOL VIA OP: one run of OP (put1, put10, get1 or getc) by TOOL, direct
	# or through the delaying proxy, timed into $work/TOOL-VIA-OP, and its
	# time on the wire (from the first request's arrival at the proxy to
	# the last answer's return, plus the delay the first request spent on
	# its way in) into $work/TOOL-VIA-wire-OP.
	op() {
		local tool=$1 via=$2 what=$3 ep remote from d=0
		from=$(wc -l < "$work/proxy-$via.log")
		if [ "$via" = direct ]; then ep=$direct; remote=vgw; else ep=$wan; remote=wan; d=${delay%ms}; fi
		case $what in
		put1) head -c 4096 /dev/urandom > "$work/src1/f0"; src=$work/src1 ds=$tool-1 ;;
		put10) head -c 4096 /dev/urandom > "$work/src10/f0"; src=$work/src10 ds=$tool-10 ;;
		get1 | getc) rm -rf "$work/out"; ds=$tool-1 ;;
		esac
		if [ "$tool" = rclone ]; then
			case $what in
			put*) t "$bin/rclone" copy --transfers 16 --checkers 16 "$src" "$remote:bench/$ds" ;;
			get1 | getc) t "$bin/rclone" copy --transfers 16 --checkers 16 "$remote:bench/$ds" "$work/out" ;;
			esac
		else
			case $what in
			put*) t "$work/publish-$tool" --endpoint "$ep" --path-style put "$src" "s3://bench/$ds" ;;
			get1) t "$work/publish-$tool" --endpoint "$ep" --path-style get "s3://bench/$ds" "$work/out" ;;
			getc) PUBLISH_NO_CACHE=true t "$work/publish-$tool" --endpoint "$ep" --path-style get "s3://bench/$ds" "$work/out" ;;
			esac
		fi >> "$work/$tool-$via-$what"
		tail -n +$((from + 1)) "$work/proxy-$via.log" | awk -v d="$d" 'NR == 1 {t0 = $1} {t1 = $1} END {print t1 - t0 + d / 1000}' >> "$work/$tool-$via-wire-$what"
		if [ "$what" = get1 ] || [ "$what" = getc ]; then
			cmp -s "$work/src1/f0" "$work/out/f0" || { echo "$tool $via: get did not return the file just put" >&2; exit 1; }
		fi
	}
	# The datasets get history first: three commits each.
	for tool in "${tools[@]}"; do
		for h in 1 2 3; do op "$tool" direct put1; op "$tool" direct put10; done
	done
	rm -f "$work"/*-direct-*
	# Each rep: every tool once direct and once through the proxy, the
	# tools in an order that rotates.
	for r in $(seq "$REPS"); do
		n=${#tools[@]}
		for i in $(seq 0 $((n - 1))); do
			tool=${tools[$(((i + r) % n))]}
			for via in direct wan; do
				op "$tool" $via put1; op "$tool" $via get1; op "$tool" $via getc; op "$tool" $via put10
			done
		done
	done
	echo "(extra: through the proxy less direct; round trips: extra / ${rtt}s. wall: the whole process; wire: its requests, from the proxy's log)"
	printf '%-16s %-6s %11s %11s %11s %6s | %11s %11s %11s %6s\n' tool op "wall direct" "wall wan" extra trips "wire direct" "wire wan" extra trips
	for what in put1 put10 get1 getc; do
		for tool in "${tools[@]}"; do
			name=$tool
			[ "$tool" = rclone ] || name="publish ($tool)"
			d=$(median < "$work/$tool-direct-$what"); w=$(median < "$work/$tool-wan-$what")
			xd=$(median < "$work/$tool-direct-wire-$what"); xw=$(median < "$work/$tool-wan-wire-$what")
			awk -v n="$name" -v o="$what" -v d="$d" -v w="$w" -v xd="$xd" -v xw="$xw" -v rtt="$rtt" \
				'BEGIN {printf "%-16s %-6s %9.1fms %9.1fms %9.1fms %6.2f | %9.1fms %9.1fms %9.1fms %6.2f\n", n, o, d * 1000, w * 1000, (w - d) * 1000, (w - d) / rtt, xd * 1000, xw * 1000, (xw - xd) * 1000, (xw - xd) / rtt}'
		done
	done
	for tool in "${pubs[@]}"; do
		for what in put1 put10 get1 getc; do
			echo "-- timeline of one publish $what through the proxy ($tool): ms from the first request's arrival; -> sent on to the server, <- answer handed back"
			from=$(wc -l < "$work/proxy-wan.log")
			op "$tool" wan $what
			tail -n +$((from + 1)) "$work/proxy-wan.log" | awk 'NR == 1 {t0 = $1} {$1 = sprintf("%7.1f", ($1 - t0) * 1000); print}' |
				sed -E "s#/bench/$tool-1?0?/#/#; s#\?x-id=[A-Za-z]+##; s#_gen/[0-9a-f-]{36}/#_gen/G/#; s#/bench\?list-type=2[^ ]*#/bench?list-type=2 (LIST)#"
		done
	done
fi

if want durable; then
	echo "== (durable) get under another writer, and many files: this tree against ${DURABLE_BASE:-main} and rclone"
	server
	mkdir -p "$work/base" "$work/one" "$work/small"
	git archive "${DURABLE_BASE:-main}" | tar -x -C "$work/base"
	(cd "$work/base" && go build -o "$work/publish-base" ./cmd/publish)
	head -c $((256 << 20)) /dev/urandom > "$work/one/f"
	for i in $(seq 0 1999); do head -c 4096 /dev/urandom > "$work/small/f$i"; done
	for set in one small; do
		"$bin/publish" "${ep[@]}" put --concurrency 16 "$work/$set" "s3://bench/p-$set" >/dev/null
		"$bin/rclone" copy --transfers 16 --checkers 16 "$work/$set" "vgw:bench/r-$set"
	done
	# get_new, get_base and get_rclone download set $1 to $work/out; with
	# $2 = dd, dd writes 1 GiB to the same file system meanwhile, starting
	# with the download.
	get_new() { "$bin/publish" "${ep[@]}" get "s3://bench/p-$1" "$work/out"; }
	get_base() { "$work/publish-base" "${ep[@]}" get "s3://bench/p-$1" "$work/out"; }
	get_rclone() { "$bin/rclone" copy --transfers 16 --checkers 16 "vgw:bench/r-$1" "$work/out" 2>/dev/null; }
	timed() {
		local which=$1 set=$2 dd=$3 d
		rm -rf "$work/out" "$work/dd"
		sync
		if [ "$dd" = dd ]; then
			dd if=/dev/zero of="$work/dd" bs=1M count=1024 status=none &
			d=$!
		fi
		t "get_$which" "$set" >> "$work/t-$which-$set-$dd"
		[ "$dd" = dd ] && wait "$d"
		rm -rf "$work/out" "$work/dd"
	}
	for case in "one dd" "small -"; do
		set -- $case
		: > "$work/t-new-$1-$2"; : > "$work/t-base-$1-$2"; : > "$work/t-rclone-$1-$2"
		for r in $(seq "$REPS"); do
			# Rotate who goes first.
			case $((r % 3)) in
			1) order="new rclone base" ;;
			2) order="rclone base new" ;;
			0) order="base new rclone" ;;
			esac
			for which in $order; do timed "$which" "$1" "$2"; done
		done
		n=$(median < "$work/t-new-$1-$2"); b=$(median < "$work/t-base-$1-$2"); r=$(median < "$work/t-rclone-$1-$2")
		label=$([ "$1" = one ] && echo "1 x 256 MiB, 1 GiB dd beside" || echo "2,000 x 4 KiB")
		printf '(durable) get %-30s publish %.2fs | rclone %.2fs ratio %.2f | base %.2fs ratio %.2f (median of %d)\n' \
			"$label:" "$n" "$r" "$(ratio "$n" "$r")" "$b" "$(ratio "$n" "$b")" "$REPS"
		for which in new rclone base; do echo "  $which: $(tr '\n' ' ' < "$work/t-$which-$1-$2")"; done
	done
fi

if want large; then
	mib=${LARGE_MIB:-1024}
	echo "== (large) 4 x $mib MiB put and get against rclone: wall, user, system (s)"
	server
	mkdir -p "$work/large"
	for i in 0 1 2 3; do head -c $((mib << 20)) /dev/urandom > "$work/large/f$i"; done
	# wus runs a command and appends "wall user sys" to file $1.
	wus() { local f=$1; shift; /usr/bin/time -f "%e %U %S" -a -o "$f" "$@" >/dev/null; }
	for op in put get; do for who in p r; do : > "$work/$op-$who"; done; done
	for r in $(seq "$REPS"); do
		if [ $((r % 2)) = 1 ]; then
			wus "$work/put-p" "$bin/publish" "${ep[@]}" put --concurrency 16 "$work/large" "s3://bench/p-$r"
			wus "$work/put-r" "$bin/rclone" copy --transfers 16 --checkers 16 "$work/large" "vgw:bench/r-$r"
		else
			wus "$work/put-r" "$bin/rclone" copy --transfers 16 --checkers 16 "$work/large" "vgw:bench/r-$r"
			wus "$work/put-p" "$bin/publish" "${ep[@]}" put --concurrency 16 "$work/large" "s3://bench/p-$r"
		fi
		rm -rf "$work/out-p" "$work/out-r"
		wus "$work/get-p" "$bin/publish" "${ep[@]}" get "s3://bench/p-$r" "$work/out-p"
		rm -rf "$work/out-p"
		wus "$work/get-r" "$bin/rclone" copy --transfers 16 --checkers 16 "vgw:bench/r-$r" "$work/out-r"
		rm -rf "$work/out-r" "$work/root/bench/r-$r" "$work/root/bench/p-$r/_gen"
	done
	for op in put get; do
		pw=$(cut -d' ' -f1 < "$work/$op-p" | median); rw=$(cut -d' ' -f1 < "$work/$op-r" | median)
		pc=$(awk '{print $2 + $3}' < "$work/$op-p" | median); rc=$(awk '{print $2 + $3}' < "$work/$op-r" | median)
		ps=$(cut -d' ' -f3 < "$work/$op-p" | median); rs=$(cut -d' ' -f3 < "$work/$op-r" | median)
		printf '(large) %s: wall publish %.2fs rclone %.2fs ratio %.2f | cpu publish %.2fs rclone %.2fs ratio %.2f | sys publish %.2fs rclone %.2fs (median of %d)\n' \
			"$op" "$pw" "$rw" "$(ratio "$pw" "$rw")" "$pc" "$rc" "$(ratio "$pc" "$rc")" "$ps" "$rs" "$REPS"
	done
fi

if want memory; then
	n=${MEM_FILES:-100000}
	echo "== (memory) put of $n small files (1,000 directories) against rclone: peak RSS (MB), wall (s)"
	server
	for d in $(seq 0 999); do
		mkdir -p "$work/many/d$d"
		for f in $(seq 0 $((n / 1000 - 1))); do echo "file $d $f" > "$work/many/d$d/f$f"; done
	done
	: > "$work/mem-p"; : > "$work/mem-r"
	rss() { local f=$1; shift; /usr/bin/time -f "%M %e" -a -o "$f" "$@" >/dev/null; }
	for r in $(seq "$REPS"); do
		if [ $((r % 2)) = 1 ]; then
			rss "$work/mem-p" "$bin/publish" "${ep[@]}" put "$work/many" "s3://bench/p-$r"
			rss "$work/mem-r" "$bin/rclone" copy --transfers 16 --checkers 16 "$work/many" "vgw:bench/r-$r"
		else
			rss "$work/mem-r" "$bin/rclone" copy --transfers 16 --checkers 16 "$work/many" "vgw:bench/r-$r"
			rss "$work/mem-p" "$bin/publish" "${ep[@]}" put "$work/many" "s3://bench/p-$r"
		fi
		rm -rf "$work/root/bench/p-$r" "$work/root/bench/r-$r"
	done
	pm=$(awk '{print $1 / 1024}' < "$work/mem-p" | median); rm_=$(awk '{print $1 / 1024}' < "$work/mem-r" | median)
	pw=$(cut -d' ' -f2 < "$work/mem-p" | median); rw=$(cut -d' ' -f2 < "$work/mem-r" | median)
	printf '(memory) %d files: peak RSS publish %.0f MB rclone %.0f MB ratio %.2f | wall publish %.1fs rclone %.1fs (median of %d)\n' \
		"$n" "$pm" "$rm_" "$(ratio "$pm" "$rm_")" "$pw" "$rw" "$REPS"
fi
