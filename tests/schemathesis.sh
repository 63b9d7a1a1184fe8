#!/usr/bin/env bash
# Schemathesis against a live server: every operation of the document the
# server serves (GET /openapi.json) is called with generated requests, and
# every answer is checked against that document — no server error (5xx
# other than a documented 503), a documented status code, content type,
# headers and schema. Any finding, or a server that does not start, fails
# the run (non-zero exit).
#
# The server is target/debug/idemkey on its embedded default (SQLite, local
# archive) in a fresh data dir, on a port the OS picks. Schemathesis is
# installed from PyPI into a cached venv, once.
#
#   bash tests/schemathesis.sh            # scripts/test.sh runs it
#   IDEMKEY_SCHEMATHESIS_EXAMPLES=200 bash tests/schemathesis.sh   # longer
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${IDEMKEY_BIN:-target/debug/idemkey}"
VERSION="4.32.5"
VENV="${IDEMKEY_TOOLS:-$HOME/.cache/idemkey-tools}/schemathesis-$VERSION"
EXAMPLES="${IDEMKEY_SCHEMATHESIS_EXAMPLES:-50}"

if [[ ! -x "$BIN" ]]; then
  echo "schemathesis: $BIN not found: run 'cargo build --workspace --bins' (or set IDEMKEY_BIN)" >&2
  exit 1
fi
if [[ ! -x "$VENV/bin/schemathesis" ]]; then
  echo "schemathesis: installing schemathesis $VERSION into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$VERSION"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/idemkey-schemathesis.XXXXXX")"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" && wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

export IDEMKEY_DATA_DIR="$work/data"
IDEMKEY_LISTEN=127.0.0.1:0 IDEMKEY_LOG_FORMAT=json RUST_LOG=info \
  "$BIN" serve >"$work/server.log" 2>&1 &
server_pid=$!

# The server logs "idemkey listening" with its address once it accepts
# connections (start-up migrates the SQLite file first).
port=""
for _ in $(seq 1 600); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "schemathesis: idemkey exited during start-up; its log:" >&2
    tail -n 40 "$work/server.log" >&2
    exit 1
  fi
  port="$(grep -m1 '"idemkey listening"' "$work/server.log" |
    sed -n 's/.*"addr":"127\.0\.0\.1:\([0-9]*\)".*/\1/p' || true)"
  [[ -n "$port" ]] && break
  sleep 0.1
done
if [[ -z "$port" ]]; then
  echo "schemathesis: idemkey did not start listening within 60 s; its log:" >&2
  tail -n 40 "$work/server.log" >&2
  exit 1
fi
base="http://127.0.0.1:$port"
curl -fsS "$base/readyz" >/dev/null || {
  echo "schemathesis: $base/readyz does not answer 200" >&2
  exit 1
}

# Same data dir, so the same generated development secret signs the token.
token="$("$BIN" token --tenant schemathesis --roles client,viewer,admin,metrics --ttl 2h)"

# The run's events (every request and answer), kept for a look afterwards.
report="$PWD/target/schemathesis/events.ndjson"
mkdir -p "$(dirname "$report")"
echo "schemathesis: $("$VENV/bin/schemathesis" --version) against $base/openapi.json, up to $EXAMPLES cases per operation and phase"
status=0
# From the scratch dir, where schemathesis may leave its crash cache.
(cd "$work" && "$VENV/bin/schemathesis" run "$base/openapi.json" \
  --header "Authorization: Bearer $token" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
  --phases examples,coverage,fuzzing,stateful \
  --mode all \
  --max-examples "$EXAMPLES" \
  --workers 1 \
  --seed 1 \
  --request-timeout 20 \
  --generation-database none \
  --suppress-health-check all \
  --no-color \
  --report ndjson --report-ndjson-path "$report") || status=$?

# The answers by operation and status, from the run's events.
"$VENV/bin/python" - "$report" <<'PY'
import collections, json, sys
answers = collections.defaultdict(collections.Counter)
for line in open(sys.argv[1]):
    event = json.loads(line).get("ScenarioFinished")
    if not event:
        continue
    recorder = event["recorder"]
    for interaction in recorder.get("interactions", {}).values():
        status = (interaction.get("response") or {}).get("status_code", "none")
        answers[recorder["label"]][status] += 1
print(f"schemathesis: answers by operation ({len(answers)} operations, "
      f"{sum(sum(c.values()) for c in answers.values())} calls):")
for label in sorted(answers):
    counts = ", ".join(f"{s}: {n}" for s, n in sorted(answers[label].items(), key=str))
    print(f"  {label:48} {counts}")
PY

if [[ $status -ne 0 ]]; then
  echo "schemathesis: FAILED (exit $status): the answers above break the document, or the server failed" >&2
  if grep -q '"level":"ERROR"' "$work/server.log"; then
    echo "schemathesis: the server's errors:" >&2
    grep '"level":"ERROR"' "$work/server.log" | tail -n 20 >&2
  fi
  exit "$status"
fi
echo "schemathesis: passed"
