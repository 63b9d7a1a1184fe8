#!/usr/bin/env bash
# The benchmark suite (issue 8), in one command: Postgres up, release build,
# every measurement, results in bench/results/ (latest.json, latest.svg,
# latest.md) and in the README's Performance section; prints the table.
#
# Extra arguments go to idemkey-bench and override the defaults below (the
# README is then left alone), e.g.
#   bash scripts/bench.sh --only new-keys,limit-db-claim-complete
#   bash scripts/bench.sh --only new-keys-sqlite,limit-app-sqlite-new-keys  # the embedded default
#   BENCH_QUICK=1 bash scripts/bench.sh        # short windows, 100k-row growth
# `target/release/idemkey-bench --help` lists every flag.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/services.sh
if ! command -v pgbench >/dev/null 2>&1; then
  echo "bench: pgbench is missing (Debian package postgresql-client)" >&2
  exit 1
fi

# One build for both binaries, so they share one set of compiled features.
cargo build --release -p idemkey-web -p idemkey-bench

if [ "${BENCH_QUICK:-0}" = 1 ]; then
  defaults=(--warmup-secs 1 --measure-secs 3 --growth-rows 100000)
else
  defaults=(--warmup-secs 5 --measure-secs 15 --growth-rows 10000000)
  # Only a full run with the full settings rewrites the README's table.
  if [ $# -eq 0 ]; then defaults+=(--readme README.md); fi
fi
echo "bench: load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" >&2
exec target/release/idemkey-bench "${defaults[@]}" "$@"
