#!/usr/bin/env bash
# A single-node Garage (S3-compatible object store) for tests and local use.
#
# Starts it when it is not already running, applies a one-node layout,
# creates an access key and the bucket `idemkey-test` with read/write, and
# writes the AWS_* variables a client needs to "$dir/env". Every step is
# idempotent: a second run reuses the running server, its layout, its key and
# its bucket. Fails loudly when Garage cannot be started or set up.
#
# Settings (all optional):
#   IDEMKEY_GARAGE_DIR       state dir (config, data, env, pid, log)
#                            default: $IDEMKEY_TOOLS_DIR/garage or ~/.cache/idemkey-tools/garage
#   IDEMKEY_GARAGE_S3_PORT   S3 API port on 127.0.0.1 (default 3900)
#   IDEMKEY_GARAGE_RPC_PORT  RPC port on 127.0.0.1 (default 3901)
#   IDEMKEY_GARAGE_BUCKET    bucket to create (default idemkey-test)
#
# Tests start private instances (for stop/restart tests) by calling this
# script with their own dir and free ports.
set -euo pipefail
cd "$(dirname "$0")/.."

tools=${IDEMKEY_TOOLS_DIR:-$HOME/.cache/idemkey-tools}
dir=${IDEMKEY_GARAGE_DIR:-$tools/garage}
s3_port=${IDEMKEY_GARAGE_S3_PORT:-3900}
rpc_port=${IDEMKEY_GARAGE_RPC_PORT:-3901}
bucket=${IDEMKEY_GARAGE_BUCKET:-idemkey-test}
key_name=idemkey-test
region=garage

garage_bin=$(bash scripts/install-garage.sh)
mkdir -p "$dir/meta" "$dir/data"
chmod 700 "$dir"

# The RPC secret is generated once and kept, so a restarted node keeps
# talking to its own metadata.
if [ ! -s "$dir/rpc_secret" ]; then
  (umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$dir/rpc_secret")
fi

config=$dir/garage.toml
(umask 077 && cat >"$config" <<EOF
metadata_dir = "$dir/meta"
data_dir = "$dir/data"
db_engine = "sqlite"
replication_factor = 1

rpc_bind_addr = "127.0.0.1:$rpc_port"
rpc_public_addr = "127.0.0.1:$rpc_port"
rpc_secret = "$(cat "$dir/rpc_secret")"

[s3_api]
s3_region = "$region"
api_bind_addr = "127.0.0.1:$s3_port"
root_domain = ".s3.garage.localhost"
EOF
)

g() { "$garage_bin" -c "$config" "$@"; }
running() { [ -s "$dir/garage.pid" ] && kill -0 "$(cat "$dir/garage.pid")" 2>/dev/null; }
answers() { g status >/dev/null 2>&1; }

if ! running || ! answers; then
  if running; then
    echo "garage: pid $(cat "$dir/garage.pid") is alive but does not answer; stopping it" >&2
    kill "$(cat "$dir/garage.pid")" || true
    sleep 1
  fi
  echo "garage: starting on 127.0.0.1:$s3_port (state in $dir)" >&2
  # setsid: the server outlives this script and the test run that called it.
  setsid "$garage_bin" -c "$config" server >"$dir/garage.log" 2>&1 </dev/null &
  echo $! >"$dir/garage.pid"
  for _ in $(seq 1 100); do answers && break; sleep 0.1; done
fi
if ! answers; then
  echo "garage: the server did not come up; last lines of $dir/garage.log:" >&2
  tail -n 20 "$dir/garage.log" >&2 || true
  exit 1
fi

# One node, one zone, applied once (layout version 0 means none yet).
if g layout show 2>/dev/null | grep -qi "current cluster layout version: 0"; then
  node=$(g node id -q | cut -d@ -f1)
  g layout assign -z dc1 -c 1G "$node" >/dev/null
  g layout apply --version 1 >/dev/null
fi

if ! g key info "$key_name" --key-id >/dev/null 2>&1; then
  g key create "$key_name" >/dev/null
fi
key_id=$(g key info "$key_name" --key-id | tr -d '[:space:]')
secret=$(g key info "$key_name" --secret-key | tr -d '[:space:]')

if ! g bucket info "$bucket" >/dev/null 2>&1; then
  g bucket create "$bucket" >/dev/null
fi
g bucket allow --read --write --owner "$bucket" --key "$key_name" >/dev/null

(umask 077 && cat >"$dir/env.tmp" <<EOF
AWS_ENDPOINT_URL=http://127.0.0.1:$s3_port
AWS_REGION=$region
AWS_ACCESS_KEY_ID=$key_id
AWS_SECRET_ACCESS_KEY=$secret
IDEMKEY_TEST_ARCHIVE_BUCKET=$bucket
EOF
)
mv "$dir/env.tmp" "$dir/env"

# The S3 API serves once the layout is live. An anonymous request gets an
# error document (403) then, and 503 or no answer before.
s3_status() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$s3_port/$bucket" || true; }
for _ in $(seq 1 100); do
  case $(s3_status) in 000 | 5*) sleep 0.1 ;; *) break ;; esac
done
case $(s3_status) in
  000 | 5*)
    echo "garage: the S3 API does not serve on 127.0.0.1:$s3_port (HTTP $(s3_status)); see $dir/garage.log" >&2
    exit 1 ;;
esac
echo "garage: ready on 127.0.0.1:$s3_port, bucket $bucket, variables in $dir/env" >&2
