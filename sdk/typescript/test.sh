#!/usr/bin/env bash
# Builds the TypeScript SDK and runs its tests against real idemkey servers.
# Run from anywhere; scripts/test.sh runs it from the repo root.
set -euo pipefail
cd "$(dirname "$0")"

BIN="${IDEMKEY_BIN:-../../target/debug/idemkey}"
if [[ ! -x "$BIN" ]]; then
  echo "sdk/typescript: idemkey binary not found at $BIN: run 'cargo build --workspace --bins' (or set IDEMKEY_BIN)" >&2
  exit 1
fi
command -v node >/dev/null || { echo "sdk/typescript: node (>= 18) is required" >&2; exit 1; }

# npm ci only when node_modules is missing or package-lock.json changed.
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)"
stamp="node_modules/.package-lock.sha256"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_hash" ]]; then
  npm ci --no-audit --no-fund
  echo "$lock_hash" > "$stamp"
fi

rm -rf build dist
npm run build --silent
node --test --test-concurrency=3 build/test/*.test.js
