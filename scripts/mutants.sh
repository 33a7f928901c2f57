#!/usr/bin/env bash
# Mutation harness: proves that the tests can fail. Each mutation in
# scripts/mutants/ (list, and one *.list file per area) is a one-spot
# breakage of safety logic (a guard, a precondition, an ambiguity rule, an
# age allowance). For each one this script applies it to a scratch copy of
# the tree, runs the packages listed with it, restores the file, and reports
# whether a test caught it.
#
#   bash scripts/mutants.sh              run every mutation
#   bash scripts/mutants.sh -n NAME ...  run the named ones (repeatable)
#   bash scripts/mutants.sh -l           list the mutations
#   bash scripts/mutants.sh --check      only check that every mutation applies
#                                        and compiles
#
# Options: --race (run the tests with -race; slower, rarely needed; a
# mutation with "race: yes" always runs with it),
# --timeout DUR (go test -timeout per package, default 6m), --baseline (run
# the packages once unmutated first), --no-confirm (see below), --logs DIR
# (default .cache/mutants).
#
# A caught mutation is confirmed: the test that caught it runs again on the
# unmutated code, and if it fails there too the mutation is reported FLAKY,
# not caught (a loaded machine makes some tests fail on their own).
#
# A mutation whose text is no longer in its file is STALE and one whose text
# is there more than once is AMBIGUOUS; a mutation that does not compile is
# BROKEN. All three fail the run, as does any survivor that the list does
# not explain (a "harmless:" field with the reason). The developer's tree is
# never modified: everything happens in a temporary copy, removed on exit.
# It is too slow for CI; see docs/TESTING.md ("Mutation testing").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }

names=() listonly=0 checkonly=0 race= timeout=6m baseline=0 confirm=1 logs=.cache/mutants
while [ $# -gt 0 ]; do
	case $1 in
	-n | --name) names+=("$2"); shift ;;
	-l | --list) listonly=1 ;;
	--check) checkonly=1 ;;
	--race) race=-race ;;
	--timeout) timeout=$2; shift ;;
	--baseline) baseline=1 ;;
	--no-confirm) confirm=0 ;;
	--logs) logs=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "mutants: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done

# --- the list ---------------------------------------------------------------
# Blocks of "key: value" lines separated by blank lines; # starts a comment.
# Keys: name, inv, file, from, to, pkgs, run, skip, race, why, harmless. In from and to,
# \n and \t stand for a newline and a tab.
M_name=() M_inv=() M_file=() M_from=() M_to=() M_pkgs=() M_run=() M_skip=() M_race=() M_why=() M_harmless=()
declare -A cur=()
flush() {
	[ ${#cur[@]} -eq 0 ] && return
	local k
	for k in name file from to pkgs; do
		if [ -z "${cur[$k]:-}" ]; then
			echo "mutants: $list: block ending at line $lineno has no $k:" >&2
			exit 2
		fi
	done
	local n
	for n in "${M_name[@]}"; do
		if [ "$n" = "${cur[name]}" ]; then
			echo "mutants: $list: mutation ${cur[name]} is listed twice" >&2
			exit 2
		fi
	done
	M_name+=("${cur[name]}") M_inv+=("${cur[inv]:-}") M_file+=("${cur[file]}")
	M_from+=("${cur[from]}") M_to+=("${cur[to]}") M_pkgs+=("${cur[pkgs]}")
	M_run+=("${cur[run]:-}") M_skip+=("${cur[skip]:-}") M_race+=("${cur[race]:-}") M_why+=("${cur[why]:-}") M_harmless+=("${cur[harmless]:-}")
	cur=()
}
# The mutations are in scripts/mutants/list and in one scripts/mutants/*.list
# file per area, read in that order.
for list in scripts/mutants/list scripts/mutants/*.list; do
[ -e "$list" ] || continue
lineno=0
last=
while IFS= read -r line || [ -n "$line" ]; do
	lineno=$((lineno + 1))
	case $line in
	'#'*) continue ;;
	'') flush; continue ;;
	esac
	key=${line%%:*}
	val=${line#*:}
	val=${val# }
	case $key in
	name | inv | file | from | to | pkgs | run | skip | race | why | harmless)
		# why and harmless may continue on further lines.
		if [ -n "${cur[$key]:-}" ]; then
			echo "mutants: $list:$lineno: $key: given twice" >&2
			exit 2
		fi
		cur[$key]=$val
		last=$key ;;
	*)
		case $line in
		[[:space:]]*)
			if [ "${last:-}" = why ] || [ "${last:-}" = harmless ]; then
				cur[$last]+=" $(echo "$line" | sed 's/^[[:space:]]*//')"
				continue
			fi ;;
		esac
		echo "mutants: $list:$lineno: unknown line: $line" >&2
		exit 2 ;;
	esac
done <"$list"
flush
done

selected=()
if [ ${#names[@]} -eq 0 ]; then
	selected=("${!M_name[@]}")
else
	for want in "${names[@]}"; do
		found=
		for i in "${!M_name[@]}"; do
			[ "${M_name[$i]}" = "$want" ] && found=$i
		done
		if [ -z "$found" ]; then
			echo "mutants: no mutation named $want (see -l)" >&2
			exit 2
		fi
		selected+=("$found")
	done
fi

if [ $listonly = 1 ]; then
	for i in "${selected[@]}"; do
		printf '%-34s %-6s %-24s %s\n' "${M_name[$i]}" "${M_inv[$i]}" "${M_file[$i]}" "${M_why[$i]}"
	done
	exit 0
fi

# --- the scratch copy -------------------------------------------------------
scratch=$(mktemp -d "${TMPDIR:-/tmp}/commitptr-mutants.XXXXXX")
cleanup() { rm -rf "$scratch"; }
trap cleanup EXIT
trap 'echo; echo "mutants: interrupted; the scratch copy is removed, your tree was never touched" >&2; exit 130' INT TERM
# Tracked and untracked (not ignored) files, as they are now in the tree.
git ls-files -z --cached --others --exclude-standard |
	tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$scratch" -xf -

# apply FILE: applies mutation $i to the scratch copy of FILE. Returns 3 if
# the text is not there (stale), 4 if it is there more than once.
apply() {
	MUT_FROM=${M_from[$i]} MUT_TO=${M_to[$i]} perl -e '
		my ($path) = @ARGV;
		open(my $fh, "<", $path) or exit 5;
		local $/; my $s = <$fh>; close $fh;
		my ($f, $t) = ($ENV{MUT_FROM}, $ENV{MUT_TO});
		for ($f, $t) { s/\\n/\n/g; s/\\t/\t/g; }
		my $n = () = $s =~ /\Q$f\E/g;
		exit 3 if $n == 0;
		exit 4 if $n > 1;
		$s =~ s/\Q$f\E/$t/;
		open($fh, ">", $path) or exit 5;
		print $fh $s; close $fh;' "$scratch/$1"
}

if [ $checkonly = 1 ]; then
	bad=0
	for i in "${selected[@]}"; do
		f=${M_file[$i]}
		cp "$scratch/$f" "$scratch/.orig"
		rc=0; apply "$f" || rc=$?
		if [ $rc = 0 ] && ! (cd "$scratch" && go build "./$(dirname "$f")") >/dev/null 2>&1; then
			rc=6
		fi
		cp "$scratch/.orig" "$scratch/$f"
		case $rc in
		0) echo "ok        ${M_name[$i]}" ;;
		6) echo "BROKEN    ${M_name[$i]}: the mutated code does not compile"; bad=1 ;;
		3) echo "STALE     ${M_name[$i]}: its text is no longer in $f"; bad=1 ;;
		4) echo "AMBIGUOUS ${M_name[$i]}: its text is in $f more than once"; bad=1 ;;
		*) echo "STALE     ${M_name[$i]}: $f cannot be read"; bad=1 ;;
		esac
	done
	exit $bad
fi

use_versitygw_here() {
	# shellcheck source=tools.sh
	. scripts/tools.sh
	use_versitygw
	install_azurite
	export COMMITPTR_AZURITE="$PWD/.cache/azurite/node_modules/.bin/azurite-blob"
}
use_versitygw_here
export AWS_EC2_METADATA_DISABLED=true
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)

# fails LOG: the names of the failed tests in a go test log, most specific
# first, at most three.
fails() {
	local all
	all=$(sed -n 's/^[[:space:]]*--- FAIL: \([^ ]*\).*/\1/p' "$1" | sort -u)
	[ -z "$all" ] && return
	# Drop a parent when one of its subtests failed.
	echo "$all" | awk '{ n[NR] = $0 } END {
		for (i = 1; i <= NR; i++) { leaf = 1
			for (j = 1; j <= NR; j++) if (index(n[j], n[i] "/") == 1) leaf = 0
			if (leaf) print n[i] }
	}' | head -3 | paste -sd, -
}

# runpkgs LOG PKG...: go test the packages one by one in the scratch copy,
# stopping at the first that fails. Returns go test's status.
runpkgs() {
	local log=$1 rc=0 p
	shift
	: >"$log"
	for p in "$@"; do
		echo "### go test $race -run '${run:-}' -skip '${skip:-}' $p" >>"$log"
		(cd "$scratch" && go test -count=1 -failfast $race -timeout "$timeout" ${run:+-run "$run"} ${skip:+-skip "$skip"} "$p") >>"$log" 2>&1 || rc=$?
		[ $rc -ne 0 ] && return $rc
	done
	return 0
}

# confirm LOG: runs the first test that failed in LOG again, on the
# unmutated code; fails if it fails there too.
confirm() {
	local t pkg pat
	t=$(fails "$1" | cut -d, -f1)
	pkg=$(sed -n 's/^### go test .* \([^ ]*\)$/\1/p' "$1" | tail -1)
	[ -z "$t" ] || [ -z "$pkg" ] && return 0
	# -run takes one anchored, escaped regexp per level of subtest.
	pat=$(echo "$t" | tr '/' '\n' | sed 's/[][\.*^$+?(){}|]/\\&/g; s/.*/^&$/' | paste -sd/ -)
	echo "### confirm: go test $race -run '$pat' $pkg, unmutated" >>"$1"
	(cd "$scratch" && go test -count=1 $race -timeout "$timeout" -run "$pat" "$pkg") >>"$1" 2>&1
}

if [ $baseline = 1 ]; then
	pkgs=$(for i in "${selected[@]}"; do echo "${M_pkgs[$i]}"; done | tr ' ' '\n' | sort -u)
	echo "==> baseline: the packages unmutated"
	for p in $pkgs; do
		run= skip=
		if ! runpkgs "$logs/baseline.log" "$p"; then
			echo "mutants: $p fails without any mutation; fix that first (log: $logs/baseline.log):"
			grep -E -- '--- FAIL|^FAIL|panic:' "$logs/baseline.log" | head -10
			exit 1
		fi
	done
fi

race_opt=$race
caught=0 survived=0 explained=0 stale=0 broken=0 flaky=0
survivors=() start=$(date +%s)
for i in "${selected[@]}"; do
	name=${M_name[$i]} f=${M_file[$i]} run=${M_run[$i]} skip=${M_skip[$i]} log=$logs/${M_name[$i]}.log
	race=$race_opt
	[ -n "${M_race[$i]}" ] && race=-race
	cp "$scratch/$f" "$scratch/.orig"
	rc=0; apply "$f" || rc=$?
	if [ $rc -ne 0 ]; then
		cp "$scratch/.orig" "$scratch/$f"
		stale=$((stale + 1))
		if [ $rc = 4 ]; then
			printf '%-9s %-34s its text is in %s more than once: make it distinctive\n' AMBIGUOUS "$name" "$f"
		else
			printf '%-9s %-34s its text is no longer in %s: update the list\n' STALE "$name" "$f"
		fi
		continue
	fi
	t0=$(date +%s)
	if ! (cd "$scratch" && go build "./$(dirname "$f")") >"$log" 2>&1; then
		cp "$scratch/.orig" "$scratch/$f"
		broken=$((broken + 1))
		printf '%-9s %-34s the mutated code does not compile (log: %s)\n' BROKEN "$name" "$log"
		continue
	fi
	# shellcheck disable=SC2086 # pkgs is a list
	trc=0; runpkgs "$log" ${M_pkgs[$i]} || trc=$?
	cp "$scratch/.orig" "$scratch/$f"
	secs=$(($(date +%s) - t0))
	if [ $trc -ne 0 ]; then
		by=$(fails "$log")
		if [ -z "$by" ]; then
			if grep -q 'panic: test timed out' "$log"; then
				by="timeout $timeout"
			elif grep -qE '\[build failed\]|\[setup failed\]' "$log"; then
				broken=$((broken + 1))
				printf '%-9s %-34s a test package does not compile with it (log: %s)\n' BROKEN "$name" "$log"
				continue
			else
				by="$(grep -m1 -E '^(panic|FAIL|fatal)' "$log" || echo "exit $trc")"
			fi
		fi
		if [ $confirm = 1 ] && ! confirm "$log"; then
			flaky=$((flaky + 1))
			survivors+=("$name")
			printf '%-9s %-34s %4ss  %s fails without the mutation too: no verdict (log: %s)\n' FLAKY "$name" "$secs" "$by" "$log"
			continue
		fi
		caught=$((caught + 1))
		printf '%-9s %-34s %4ss  by %s\n' caught "$name" "$secs" "$by"
		if [ -n "${M_harmless[$i]}" ]; then
			echo "          (it is listed as harmless, but a test catches it now: drop the harmless: field)"
		fi
	elif [ -n "${M_harmless[$i]}" ]; then
		explained=$((explained + 1))
		printf '%-9s %-34s %4ss  harmless: %s\n' explained "$name" "$secs" "${M_harmless[$i]}"
	else
		survived=$((survived + 1))
		survivors+=("$name")
		printf '%-9s %-34s %4ss  SURVIVED: %s (%s: %s)\n' SURVIVED "$name" "$secs" "${M_why[$i]}" "$f" "${M_pkgs[$i]}"
	fi
done

total=$((caught + survived + explained + flaky))
echo
echo "mutants: $caught caught, $survived survived, $explained explained as harmless, $flaky flaky, $stale stale, $broken broken; $(($(date +%s) - start))s"
if [ $total -gt 0 ]; then
	echo "mutants: score $caught/$total = $((100 * caught / total))% (caught / applied and compiled)"
fi
[ ${#survivors[@]} -gt 0 ] && echo "mutants: unexplained survivors and flaky: ${survivors[*]}"
echo "mutants: logs in $logs"
[ $survived -eq 0 ] && [ $flaky -eq 0 ] && [ $stale -eq 0 ] && [ $broken -eq 0 ]
