#!/bin/sh
# One-time set-up of the single Garage node of deploy/compose.yaml, through
# Garage's admin API (v2): a layout for the node, the access key the idemkey
# nodes use (imported, so it is the one in deploy/.env), and the bucket with
# read/write for that key. Each step is skipped when already done, so a
# second `docker compose up` changes nothing. GARAGE_ADMIN_URL (default
# http://garage:3903) points it at another node, to run it outside Compose.
set -eu

api=${GARAGE_ADMIN_URL:-http://garage:3903}/v2
call() {
  curl -fsS -H "Authorization: Bearer $GARAGE_ADMIN_TOKEN" \
    -H 'Content-Type: application/json' "$@"
}
# The first 64-hex `"id"` of a JSON answer (Garage answers pretty-printed).
first_id() { grep -o '"id": *"[0-9a-f]\{64\}"' | head -n 1 | grep -o '[0-9a-f]\{64\}'; }

status=$(call "$api/GetClusterStatus")
if echo "$status" | grep -q '"layoutVersion": *0[,}[:space:]]'; then
  node=$(echo "$status" | first_id)
  call -X POST "$api/UpdateClusterLayout" \
    -d "{\"roles\": [{\"id\": \"$node\", \"zone\": \"dc1\", \"capacity\": 10000000000, \"tags\": []}]}" >/dev/null
  call -X POST "$api/ApplyClusterLayout" -d '{"version": 1}' >/dev/null
  echo "garage-init: layout applied for node $node"
fi

if ! call "$api/GetKeyInfo?id=$AWS_ACCESS_KEY_ID" >/dev/null 2>&1; then
  call -X POST "$api/ImportKey" \
    -d "{\"accessKeyId\": \"$AWS_ACCESS_KEY_ID\", \"secretAccessKey\": \"$AWS_SECRET_ACCESS_KEY\", \"name\": \"idemkey\"}" >/dev/null
  echo "garage-init: key $AWS_ACCESS_KEY_ID imported"
fi

bucket=$(call "$api/GetBucketInfo?globalAlias=$BUCKET" 2>/dev/null \
  || call -X POST "$api/CreateBucket" -d "{\"globalAlias\": \"$BUCKET\"}")
bucket_id=$(echo "$bucket" | first_id)
call -X POST "$api/AllowBucketKey" \
  -d "{\"bucketId\": \"$bucket_id\", \"accessKeyId\": \"$AWS_ACCESS_KEY_ID\", \"permissions\": {\"read\": true, \"write\": true, \"owner\": true}}" >/dev/null
echo "garage-init: bucket $BUCKET ready for key $AWS_ACCESS_KEY_ID"
