#!/bin/sh
# Writes deploy/.env with fresh random secrets for deploy/compose.yaml, once.
# Every idemkey node reads the same file, which is the point: all nodes must
# share IDEMKEY_SECRET, IDEMKEY_JWT_SECRETS and IDEMKEY_SESSION_SECRET.
# Never overwrites an existing .env (a new IDEMKEY_SECRET would change every
# key's effect id); it only adds a secret an older .env lacks.
set -eu
cd "$(dirname "$0")"
hex() { od -An -vtx1 -N"$1" /dev/urandom | tr -d ' \n'; }
if [ -e .env ]; then
  # A .env from before IDEMKEY_SESSION_SECRET existed: add it, keep the rest.
  if ! grep -q '^IDEMKEY_SESSION_SECRET=' .env; then
    printf 'IDEMKEY_SESSION_SECRET=%s\n' "$(hex 32)" >>.env
    echo "new-env: added IDEMKEY_SESSION_SECRET to deploy/.env" >&2
  fi
  echo "new-env: deploy/.env exists; keeping it" >&2
  exit 0
fi
umask 077
cat >.env <<ENV
POSTGRES_PASSWORD=$(hex 16)
# HS256 keys as kid=secret pairs; the first signs \`idemkey token\`.
IDEMKEY_JWT_SECRETS=k1=$(hex 32)
# Effect-id key: never change it while keys are live.
IDEMKEY_SECRET=$(hex 32)
# Dashboard sessions and CSRF tokens; rotate with new,old (newest first).
IDEMKEY_SESSION_SECRET=$(hex 32)
GARAGE_RPC_SECRET=$(hex 32)
GARAGE_ADMIN_TOKEN=$(hex 32)
# Garage key ids are GK + 24 hex characters; secrets 64 hex characters.
AWS_ACCESS_KEY_ID=GK$(hex 12)
AWS_SECRET_ACCESS_KEY=$(hex 32)
ENV
echo "new-env: wrote deploy/.env" >&2
