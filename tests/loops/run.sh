#!/usr/bin/env bash
# A loopkit-shaped loop runner for the tests (loopkit's run.sh, made finite): fresh "agent"
# each turn, state on disk, done when IMPLEMENTATION_PLAN.md says `STATUS: done`, and stopped
# when the agent escalated (a BLOCKED.md at the root, as loopkit's hitl-escalate leaves it).
#
#   LOOPKIT_CLI   the agent: a command taking the prompt as its last argument
#   LOOP_TURNS    at most this many turns (default 5), so a test never leaves a loop behind
#   LOOP_PAUSE    seconds before each turn (default 1): the test sees "waiting" first
#   LOOP_GATE     a file to wait for (at most 60 s) before the first turn: the test says when
set -euo pipefail

CLI="${LOOPKIT_CLI:?LOOPKIT_CLI names the agent}"
turns="${LOOP_TURNS:-5}"

if [ -n "${LOOP_GATE:-}" ]; then
  for _ in $(seq 600); do
    [ -e "$LOOP_GATE" ] && break
    sleep 0.1
  done
fi

for _ in $(seq "$turns"); do
  sleep "${LOOP_PAUSE:-1}"
  if [ -e BLOCKED.md ]; then
    echo "blocked: BLOCKED.md is open"
    exit 2
  fi
  $CLI "Read PROMPT.md and IMPLEMENTATION_PLAN.md. Do the next step. Commit on green."
  grep -q "^STATUS: done$" IMPLEMENTATION_PLAN.md && { echo "done"; exit 0; }
done
echo "gave up after $turns turns"
