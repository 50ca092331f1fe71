#!/usr/bin/env bash
# A fake agent for run.sh: reads the operator's latest decision from PROMPT.md's `## Decisions`,
# then either does the work (writes DECISION.txt, marks the plan done, commits) or, with
# FAKE_AGENT_MODE=escalate, asks the same question again (copies FAKE_AGENT_BLOCKED to
# BLOCKED.md, as loopkit's hitl-escalate does, and commits nothing).
set -euo pipefail

decision="$(sed -n '/^## Decisions/,/^## /p' PROMPT.md | grep '^- ' | tail -n 1 || true)"
if [ -z "$decision" ]; then
  echo "agent: no decision in PROMPT.md" >&2
  exit 1
fi

if [ "${FAKE_AGENT_MODE:-commit}" = escalate ]; then
  cp "${FAKE_AGENT_BLOCKED:?the BLOCKED.md to write again}" BLOCKED.md.tmp
  mv BLOCKED.md.tmp BLOCKED.md
  echo "agent: escalated again"
  exit 0
fi

printf '%s\n' "$decision" > DECISION.txt
printf 'STATUS: done\n' >> IMPLEMENTATION_PLAN.md
git add -A
git -c user.name="fake agent" -c user.email="agent@example.invalid" commit -q -m "do the next step: $decision"
echo "agent: committed"
