#!/usr/bin/env bash
# Run the ACP conformance kit (acp-tck, rebuilt locally under .dev/acp-tck, never committed)
# against this agent with the offline echo provider.
#   scripts/tck.sh [1|2] [extra acp-tck options...]    e.g. scripts/tck.sh 2 -k initialize
# Writes the JSON report to .dev/tck-v<N>.json. Exit code 0 iff the verdict is CONFORMANT.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kit="$root/.dev/acp-tck/src"
if [ ! -d "$kit/tck" ]; then
  echo "no kit at $kit: rebuild it first (README.md, 'Development')" >&2
  exit 2
fi
version="${1:-1}"
shift || true
# A throwaway HOME so the runs never touch real sessions, logins or config.
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
# The cancel tests need a turn that is still streaming when session/cancel lands: the echo
# provider's @slow directive paces its words.
cancel_prompt=$'Count slowly.\n@slow 0.2\none two three four five six seven eight nine ten eleven twelve'
# The kit runs pytest here: one process, not this project's `-n auto` (its workers would
# leave the kit's own report empty, every requirement NOT TESTED).
PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -n 0" PYTHONPATH="$kit" "$root/.venv/bin/python" -m tck \
  --protocol-version "$version" \
  --agent-env "HOME=$home" \
  --agent-env "ACP_AGENT_CONFIG=$root/configs/echo.toml" \
  --timeout 10 --startup-timeout 20 --close-grace 1 \
  --cancel-prompt "$cancel_prompt" \
  --report-json "$root/.dev/tck-v$version.json" \
  "$@" \
  -- "$root/.venv/bin/acp-agent"
