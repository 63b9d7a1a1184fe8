#!/usr/bin/env bash
# cargo-deny over the workspace, configured by deny.toml: licences, banned
# and duplicate versions, and sources always; advisories when the RustSec
# advisory database can be had. That database is a git repository on
# GitHub: a machine that cannot reach it checks advisories against the copy
# it already has (in $CARGO_HOME/advisory-dbs), and one with no copy skips
# them and says so loudly, rather than failing CI on the network.
set -euo pipefail
cd "$(dirname "$0")/.."

deny="$(bash scripts/tools.sh)/cargo-deny"

# Every crate of the graph, for every target (licences are read from the
# crates themselves), from crates.io; then cargo-deny itself stays offline.
cargo fetch --quiet
"$deny" --offline check --hide-inclusion-graph bans licenses sources

dbs=${CARGO_HOME:-$HOME/.cargo}/advisory-dbs
db_date() { git -C "$(compgen -G "$dbs/advisory-db-*" | head -n 1)" log -1 --format=%cs 2>/dev/null || echo "unknown"; }
if timeout 120 "$deny" fetch db >/dev/null 2>&1; then
  echo "deny: advisory database fetched (last change $(db_date))" >&2
elif compgen -G "$dbs/advisory-db-*/crates" >/dev/null; then
  echo "deny: could not fetch the advisory database; checking against the copy on this machine (last change $(db_date))" >&2
else
  echo "deny: ADVISORIES NOT CHECKED: the advisory database could not be fetched and this machine has no copy" >&2
  exit 0
fi
"$deny" --offline check --hide-inclusion-graph advisories
