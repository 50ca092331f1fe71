#!/usr/bin/env bash
# The `[[loop]] restart` of the tests: start run.sh in REPO in a session of its own, detached,
# so it outlives the restart command (hitl waits for this script only, with a timeout).
#   start.sh REPO PIDFILE LOG
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$1"
export LOOPKIT_CLI="${LOOPKIT_CLI:-bash $here/agent.sh}"
setsid nohup bash "$here/run.sh" >"$3" 2>&1 </dev/null &
echo $! >"$2"
echo "started run.sh in $1"
