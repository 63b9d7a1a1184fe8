#!/bin/sh
# Writes deploy/.env with fresh random secrets for deploy/compose.yaml, once.
# Every idemkey node reads the same file, which is the point: all nodes must
# share IDEMKEY_SECRET and IDEMKEY_JWT_SECRETS. Never overwrites an existing
# .env (a new IDEMKEY_SECRET would change every key's effect id).
set -eu
cd "$(dirname "$0")"
if [ -e .env ]; then
  echo "new-env: deploy/.env exists; keeping it" >&2
  exit 0
fi
hex() { od -An -vtx1 -N"$1" /dev/urandom | tr -d ' \n'; }
umask 077
cat >.env <<ENV
POSTGRES_PASSWORD=$(hex 16)
# HS256 keys as kid=secret pairs; the first signs \`idemkey token\`.
IDEMKEY_JWT_SECRETS=k1=$(hex 32)
# Effect-id key: never change it while keys are live.
IDEMKEY_SECRET=$(hex 32)
GARAGE_RPC_SECRET=$(hex 32)
GARAGE_ADMIN_TOKEN=$(hex 32)
# Garage key ids are GK + 24 hex characters; secrets 64 hex characters.
AWS_ACCESS_KEY_ID=GK$(hex 12)
AWS_SECRET_ACCESS_KEY=$(hex 32)
ENV
echo "new-env: wrote deploy/.env" >&2
