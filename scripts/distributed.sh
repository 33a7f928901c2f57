#!/usr/bin/env bash
# The distributed run: two S3 deployments of several processes on loopback,
# SeaweedFS (a master, three volume servers with replication 001, a filer
# and two S3 gateways over it) and versitygw (three gateways over one
# shared directory). For each, one after the other: `publish probe` on
# every endpoint, then the linearizability and soak workloads
# (TestDistributed, tests/reliability/distributed_test.go, clients spread
# across the endpoints) while this script kills a random node with SIGKILL
# and restarts it, and pauses another with SIGSTOP and resumes it, at
# random, for the whole run. Once the workloads end it brings every node
# back and the test checks porcupine's verdict and the invariants. The
# report (operations, kills, pauses, unknown outcomes, violations, objects
# lost) goes to .cache/distributed/report.txt or --report.
#
# Not part of `make test`: with the default duration it takes about 25
# minutes.
#
#   scripts/distributed.sh [--duration 10m] [--only seaweedfs|versitygw]
#                          [--seed N] [--report FILE] [--no-faults]
#
# --no-faults runs the same workloads on the same deployments with every
# node up throughout: what goes wrong then is the deployment's own doing,
# not the failures'.
#
# --only versitygw-nolock runs the versitygw deployment with its gateways'
# shared lock files disabled (--disable-object-lock-file, as on a shared
# filesystem without advisory locks across hosts): the control that shows
# the run finds conditional writes that are not atomic across gateways.
# It is not part of the default run.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=10m
only=""
seed=$((RANDOM * 32768 + RANDOM))
report=""
faults=on
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration="$2"; shift 2 ;;
	--only) only="$2"; shift 2 ;;
	--seed) seed="$2"; shift 2 ;;
	--report) report="$2"; shift 2 ;;
	--no-faults) faults=off; shift ;;
	*) echo "usage: $0 [--duration 10m] [--only seaweedfs|versitygw] [--seed N] [--report FILE] [--no-faults]" >&2; exit 2 ;;
	esac
done
case "$only" in "" | seaweedfs | versitygw | versitygw-nolock) ;; *) echo "--only: seaweedfs, versitygw or versitygw-nolock" >&2; exit 2 ;; esac
case "$duration" in
*m) dur_s=$((${duration%m} * 60)) ;;
*s) dur_s=${duration%s} ;;
*) echo "--duration: minutes (10m) or seconds (90s)" >&2; exit 2 ;;
esac

out="$PWD/.cache/distributed"
mkdir -p "$out"
report=${report:-$out/report.txt}
RANDOM=$seed # the faults' choices follow the seed

# Loopback only, explicit endpoints, no instance metadata.
export AWS_EC2_METADATA_DISABLED=true
export AWS_ACCESS_KEY_ID=commitptr-dist
export AWS_SECRET_ACCESS_KEY=commitptr-dist-secret
export AWS_REGION=us-east-1
unset AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_PROFILE

. scripts/tools.sh
build_tool versitygw github.com/versity/versitygw/cmd/versitygw
if { [ -z "$only" ] || [ "$only" = seaweedfs ]; } && [ ! -x .cache/bin/weed ]; then
	echo "==> building weed (SeaweedFS, pinned in tools/seaweedfs/go.mod)"
	(cd tools/seaweedfs && go build -o ../../.cache/bin/weed github.com/seaweedfs/seaweedfs/weed)
fi
echo "==> building publish and checking the distributed test compiles"
go build -o "$out/publish" ./cmd/publish
go vet -tags distributed ./tests/reliability

# Nodes: node_cmd[NAME] is the command line that starts NAME, node_pid[NAME]
# its process while it runs; nodes lists the names of the deployment.
declare -A node_cmd node_pid
nodes=()
work=""
testpid=""

# free_port prints a loopback port nothing listens on (nor on port+10000,
# where SeaweedFS puts a server's gRPC port unless told otherwise).
used_ports=" "
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		case "$used_ports" in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			used_ports="$used_ports$p "
			echo "$p"
			return
		fi
	done
}

# start_node NAME starts NAME's command, appending to its log.
start_node() {
	local name=$1
	# shellcheck disable=SC2086
	${node_cmd[$name]} >>"$work/logs/$name.log" 2>&1 &
	node_pid[$name]=$!
}

add_node() {
	local name=$1
	shift
	node_cmd[$name]="$*"
	nodes+=("$name")
	start_node "$name"
}

alive() { kill -0 "${node_pid[$1]}" 2>/dev/null; }

# wait_port PORT waits up to 60 s for something to listen on PORT.
wait_port() {
	local i
	for i in $(seq 600); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "nothing listens on 127.0.0.1:$1" >&2
	return 1
}

stop_all() {
	local n
	if [ -n "$testpid" ] && kill -0 "$testpid" 2>/dev/null; then
		kill -- "-$testpid" 2>/dev/null || true
	fi
	for n in "${nodes[@]}"; do
		[ -n "${node_pid[$n]:-}" ] || continue
		kill -CONT "${node_pid[$n]}" 2>/dev/null || true
		kill -KILL "${node_pid[$n]}" 2>/dev/null || true
		wait "${node_pid[$n]}" 2>/dev/null || true
	done
	nodes=()
	node_cmd=()
	node_pid=()
}
trap stop_all EXIT

# rnd LO HI prints a random duration in [LO, HI) seconds, in tenths of a
# second; nap sleeps that many tenths.
rnd() { echo $(($1 * 10 + RANDOM % (($2 - $1) * 10))); }
nap() { sleep "$(($1 / 10)).$(($1 % 10))"; }

# inject runs the faults until the workloads say they are done (or the test
# ends): after a random healthy interval, it kills one node and pauses
# another, brings them back after random intervals, and counts them.
kills=0
pauses=0
declare -A killed_by
inject() {
	local sync=$1 a b down stopped n
	while [ ! -e "$sync/done" ] && kill -0 "$testpid" 2>/dev/null; do
		nap "$(rnd 3 12)"
		[ "$faults" = on ] || continue
		[ -e "$sync/done" ] && break
		for n in "${nodes[@]}"; do
			if ! alive "$n"; then
				echo "$(date +%T) $n had exited; starting it again" >>"$work/faults.log"
				start_node "$n"
			fi
		done
		a=${nodes[RANDOM % ${#nodes[@]}]}
		b=$a
		while [ "$b" = "$a" ]; do b=${nodes[RANDOM % ${#nodes[@]}]}; done
		down=$(rnd 2 12)
		stopped=$(rnd 1 10)
		echo "$(date +%T) kill $a for $down/10 s, pause $b for $stopped/10 s" >>"$work/faults.log"
		kill -KILL "${node_pid[$a]}" 2>/dev/null || true
		wait "${node_pid[$a]}" 2>/dev/null || true
		kills=$((kills + 1))
		killed_by[$a]=$((${killed_by[$a]:-0} + 1))
		kill -STOP "${node_pid[$b]}" 2>/dev/null || true
		pauses=$((pauses + 1))
		if [ "$down" -lt "$stopped" ]; then
			nap "$down"
			start_node "$a"
			nap $((stopped - down))
			kill -CONT "${node_pid[$b]}" 2>/dev/null || true
		else
			nap "$stopped"
			kill -CONT "${node_pid[$b]}" 2>/dev/null || true
			nap $((down - stopped))
			start_node "$a"
		fi
	done
}

# heal resumes every node and restarts any that is not running.
heal() {
	local n
	for n in "${nodes[@]}"; do
		kill -CONT "${node_pid[$n]}" 2>/dev/null || true
		alive "$n" || start_node "$n"
	done
}

# probe runs `publish probe` on every endpoint and prints what it said.
probe() {
	local bucket=$1 ep
	shift
	for ep in "$@"; do
		echo "probe $ep:"
		"$out/publish" --endpoint "$ep" --path-style probe "s3://$bucket/probe" 2>&1 | sed 's/^/  /' || true
		echo "  exit status ${PIPESTATUS[0]}"
	done
}

# json_field FILE KEY prints KEY's value from the test's figures.
json_field() {
	sed -n -e "s/^ *\"$2\": \"\(.*\)\",\{0,1\}$/\1/p" -e "s/^ *\"$2\": \([0-9-]*\),\{0,1\}$/\1/p" "$1" | head -1
}

# run_workload NAME DESCRIPTION BUCKET ENDPOINT... runs the test against the
# deployment while injecting faults, and appends its section to the report.
run_workload() {
	local name=$1 desc=$2 bucket=$3
	shift 3
	local eps=("$@")
	local sync="$work/sync" result="$work/result.json" log="$work/test.log"
	mkdir -p "$sync"
	kills=0
	pauses=0
	killed_by=()

	echo "==> $name: publish probe"
	probe "$bucket" "${eps[@]}" | tee "$work/probe.txt"

	echo "==> $name: workloads for $duration under node failures (log: $log)"
	local joined
	joined=$(IFS=,; echo "${eps[*]}")
	COMMITPTR_DIST_ENDPOINTS="$joined" COMMITPTR_DIST_BUCKET="$bucket" \
		COMMITPTR_DIST_DURATION="$duration" COMMITPTR_DIST_SYNC="$sync" \
		COMMITPTR_DIST_RESULT="$result" COMMITPTR_SEED="$seed" COMMITPTR_ARTIFACTS="$work/artifacts" \
		setsid go test -race -count=1 -tags distributed -run '^TestDistributed$' \
		-timeout "$((dur_s + 2400))s" -v ./tests/reliability >"$log" 2>&1 &
	testpid=$!
	while [ ! -e "$sync/started" ] && kill -0 "$testpid" 2>/dev/null; do sleep 1; done
	inject "$sync"
	echo "==> $name: $kills kills, $pauses pauses; bringing every node back"
	heal
	touch "$sync/healed"
	local status=0
	wait "$testpid" || status=$?
	testpid=""

	local verdict=PASS
	[ "$status" = 0 ] || verdict="FAIL (go test exit status $status)"
	local per_node="" n
	for n in "${nodes[@]}"; do per_node="$per_node $n=${killed_by[$n]:-0}"; done
	{
		echo "== $name: $desc"
		echo
		sed 's/^/    /' "$work/probe.txt"
		echo
		if [ -s "$result" ]; then
			echo "    workloads ran:      $(json_field "$result" ran) (requested $duration)"
			echo "    operations:         $(json_field "$result" operations) (linearizability $(json_field "$result" lin_operations) in $(json_field "$result" lin_rounds) rounds, soak $(json_field "$result" soak_operations))"
			echo "    node kills:         $kills (by node:$per_node)"
			echo "    node pauses:        $pauses"
			echo "    unknown outcomes:   $(json_field "$result" unknown_outcomes)"
			echo "    violations:         $(json_field "$result" violations) ($(json_field "$result" not_linearizable_rounds) rounds not linearizable, $(json_field "$result" lease_violations) of the lease)"
			echo "    objects lost:       $(json_field "$result" objects_lost) of $(json_field "$result" objects_checked) checked"
			echo "    verifications that could not finish: $(json_field "$result" verifications_failed)"
			echo "    linearizability commits: ok $(json_field "$result" lin_commits_ok), lost $(json_field "$result" lin_commits_lost), unknown $(json_field "$result" lin_commits_unknown), aborted $(json_field "$result" lin_commits_aborted); rebased $(json_field "$result" lin_rebased), carried $(json_field "$result" lin_carried)"
			echo "    soak: $(json_field "$result" soak)"
		else
			echo "    the test wrote no figures; see its log"
			echo "    node kills: $kills, node pauses: $pauses"
		fi
		echo "    test: $verdict"
		if grep -q VIOLATION "$log"; then
			echo "    first violations:"
			grep -o 'VIOLATION.*' "$log" | head -20 | sed 's/^/      /'
		fi
		local flags=""
		[ "$faults" = on ] || flags=" --no-faults"
		echo "    reproduce: scripts/distributed.sh --only $name --duration $duration --seed $seed$flags"
		echo "    log: $log"
		echo
	} >>"$report"
	tail -n 3 "$log"
}

seaweedfs() {
	work="$out/seaweedfs"
	rm -rf "$work"
	mkdir -p "$work/logs" "$work/master" "$work/filer" "$work/v1" "$work/v2" "$work/v3"
	local weed="$PWD/.cache/bin/weed" mp mg fp fg
	mp=$(free_port) mg=$(free_port) fp=$(free_port) fg=$(free_port)
	cat >"$work/s3.json" <<-EOF
		{"identities": [{"name": "commitptr", "credentials": [{"accessKey": "$AWS_ACCESS_KEY_ID", "secretKey": "$AWS_SECRET_ACCESS_KEY"}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
	EOF
	echo "==> seaweedfs: master, 3 volume servers (replication 001), filer, 2 S3 gateways"
	add_node master "$weed master -ip=127.0.0.1 -ip.bind=127.0.0.1 -port=$mp -port.grpc=$mg -mdir=$work/master -defaultReplication=001 -volumeSizeLimitMB=64"
	wait_port "$mp"
	local i vp vg
	for i in 1 2 3; do
		vp=$(free_port) vg=$(free_port)
		add_node "volume$i" "$weed volume -ip=127.0.0.1 -ip.bind=127.0.0.1 -port=$vp -port.grpc=$vg -dir=$work/v$i -max=30 -master=127.0.0.1:$mp.$mg -dataCenter=dc1 -rack=rack1"
		wait_port "$vp"
	done
	add_node filer "$weed filer -ip=127.0.0.1 -ip.bind=127.0.0.1 -port=$fp -port.grpc=$fg -master=127.0.0.1:$mp.$mg -defaultStoreDir=$work/filer"
	wait_port "$fp"
	local eps=() sp sg
	for i in 1 2; do
		sp=$(free_port) sg=$(free_port)
		add_node "s3-$i" "$weed s3 -ip.bind=127.0.0.1 -port=$sp -port.grpc=$sg -port.iceberg=0 -port.lance=0 -filer=127.0.0.1:$fp.$fg -config=$work/s3.json"
		wait_port "$sp"
		eps+=("http://127.0.0.1:$sp")
	done
	echo "s3.bucket.create -name commitptr" | "$weed" shell -master="127.0.0.1:$mp.$mg" -filer="127.0.0.1:$fp.$fg" >>"$work/logs/shell.log" 2>&1
	run_workload seaweedfs "SeaweedFS $(awk '$1 == "github.com/seaweedfs/seaweedfs" {print $2}' tools/seaweedfs/go.mod): a master, 3 volume servers (replication 001), a filer (leveldb), 2 S3 gateways; clients spread across the gateways" commitptr "${eps[@]}"
	stop_all
}

# versitygw NAME [POSIX-FLAG...] runs three gateways over one directory.
versitygw() {
	local name=$1
	shift
	work="$out/$name"
	rm -rf "$work"
	mkdir -p "$work/logs" "$work/root/commitptr"
	echo "==> $name: 3 gateways over one directory $*"
	local eps=() i p
	for i in 1 2 3; do
		p=$(free_port)
		add_node "gw$i" "$PWD/.cache/bin/versitygw --access $AWS_ACCESS_KEY_ID --secret $AWS_SECRET_ACCESS_KEY --port 127.0.0.1:$p --quiet --keep-alive posix $* $work/root"
		wait_port "$p"
		eps+=("http://127.0.0.1:$p")
	done
	run_workload "$name" "versitygw $(awk '$1 == "github.com/versity/versitygw" {print $2}' tools/go.mod): 3 gateways (posix backend${*:+ $*}) over one shared directory; clients spread across the gateways" commitptr "${eps[@]}"
	stop_all
}

{
	echo "Distributed run $(date -u +%FT%TZ), seed $seed, $duration per deployment, node failures $faults"
	echo
} >"$report"
case "$only" in
"") seaweedfs; versitygw versitygw ;;
seaweedfs) seaweedfs ;;
versitygw) versitygw versitygw ;;
versitygw-nolock) versitygw versitygw-nolock --disable-object-lock-file ;;
esac
echo "==> report: $report"
cat "$report"
