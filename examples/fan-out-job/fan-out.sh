#!/usr/bin/env bash
# fan-out.sh: a fan-out job whose output appears all at once.
#
#   fan-out.sh URL [TASKS] [PARALLEL]
#
# Opens a job on the dataset at URL, runs TASKS tasks (default 64), PARALLEL
# at a time (default 16) with xargs -P, each writing one part and committing
# its task with 'publish job put', then publishes every part with one
# 'publish job commit'. Task 0 also runs a second, speculative attempt at
# the same time: one of the two wins the task, the other exits 3, which a
# task runner counts as done. Readers see none of the parts before the
# commit, and all of them after it. PUBLISH names the binary (default:
# publish on PATH).
set -euo pipefail
url=${1:?usage: fan-out.sh URL [TASKS] [PARALLEL]}
tasks=${2:-64}
parallel=${3:-16}
publish=${PUBLISH:-publish}
export publish url

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export work

job=$("$publish" job begin "$url")
export job
echo "job $job: $tasks tasks, $parallel at a time"

# One task: write its part, then stage and commit it. Exit 3 (another
# attempt of the task won) counts as done.
task() {
	local t=$1 attempt=$2
	mkdir -p "$work/$t-$attempt"
	printf 'part %s\n' "$t" >"$work/$t-$attempt/part-$t.txt"
	local rc=0
	"$publish" --quiet job put --job "$job" --task "$t" --attempt "$attempt" "$work/$t-$attempt" "$url" || rc=$?
	[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]
}
export -f task

{
	seq 0 $((tasks - 1)) | sed 's/$/ a1/'
	echo "0 a2"
} | xargs -P "$parallel" -L 1 bash -c 'task $0 $1'

"$publish" job status --job "$job" "$url" | sed -n 1p # reads it all: no SIGPIPE under pipefail
"$publish" job commit --job "$job" --expect-tasks "$tasks" "$url"
