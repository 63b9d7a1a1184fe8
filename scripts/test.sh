#!/usr/bin/env bash
# The whole test suite, as CI runs it: services up, binaries built (the
# multi-process tests launch target/debug/idemkey), then every test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/services.sh

# Each test creates its own database; drop the ones earlier runs left behind
# (one still in use by a concurrent run is left alone).
psql -h 127.0.0.1 -U postgres -d postgres -Atqc \
  "select datname from pg_database where datname like 'idemkey\_test\_%'" |
  while read -r db; do dropdb -h 127.0.0.1 -U postgres --if-exists "$db" 2>/dev/null || true; done

# Tests keep SQLite files and scratch directories in the temp dir: give this
# checkout its own, emptied at every run.
export TMPDIR="$PWD/target/test-tmp"
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"

# A plain `cargo test` at the root fails, pointing here (web/tests/whole_suite.rs).
export IDEMKEY_TEST_SUITE=1

cargo build --workspace --bins
cargo test --workspace "$@"

# Schemathesis against a live server: every answer conforms to the served
# OpenAPI document, and none is a server error.
bash tests/schemathesis.sh

# The SDKs' own test runners (Python, TypeScript), against real servers they
# start from target/debug/idemkey; each installs its dependencies into a cache.
for sdk_test in sdk/*/test.sh; do
  [ -e "$sdk_test" ] || continue
  bash "$sdk_test"
done
