#!/usr/bin/env bash
# The whole test suite, as CI runs it: services up, binaries built (the
# multi-process tests launch target/debug/idemkey), then every test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/services.sh

# Each test creates its own database; drop the ones earlier runs left behind.
psql -h 127.0.0.1 -U postgres -d postgres -Atqc \
  "select datname from pg_database where datname like 'idemkey\_test\_%'" |
  while read -r db; do dropdb -h 127.0.0.1 -U postgres --if-exists "$db"; done

# ... and the SQLite files and scratch directories they left in the temp dir.
rm -rf "${TMPDIR:-/tmp}"/idemkey-tests "${TMPDIR:-/tmp}"/idemkey-embedded-* "${TMPDIR:-/tmp}"/idemkey-cli-*

cargo build --workspace --bins
cargo test --workspace "$@"
