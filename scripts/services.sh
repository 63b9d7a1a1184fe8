#!/usr/bin/env bash
# Makes sure the services the tests talk to are up: PostgreSQL on
# 127.0.0.1:5432 (trust auth for the postgres user), Redis on
# 127.0.0.1:6379 and Garage, an S3-compatible store, on 127.0.0.1:3900
# (scripts/garage.sh; built once into a cached tools directory). Starts
# each when it is installed but stopped, installs it when missing (Garage
# from crates.io, the others from Debian's packages), and fails loudly when
# it still cannot be reached. Also installs Debian's Chromium and ChromeDriver for the
# dashboard's browser test when missing (the test starts chromedriver itself,
# on a free port).
set -euo pipefail

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }

if ! pg_up; then
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "services: installing PostgreSQL" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "services: starting PostgreSQL $version" >&2
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 30); do pg_up && break; pg_isready -h 127.0.0.1 -p 5432 -t 1 -q || true; done
fi
if ! pg_up; then
  echo "services: PostgreSQL is not reachable at 127.0.0.1:5432" >&2
  exit 1
fi
if ! psql -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null; then
  echo "services: PostgreSQL answers but user postgres cannot log in over TCP (trust auth expected)" >&2
  exit 1
fi
echo "services: PostgreSQL ready" >&2

# Redis on 127.0.0.1:6379, a read cache only (nothing kept on disk). The
# tests that stop and restart Redis start private servers on free ports with
# the same binary, so redis-server must be installed even when 6379 answers.
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "services: installing Redis" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
if ! redis_up; then
  echo "services: starting Redis" >&2
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 1 50); do redis_up && break; sleep 0.1; done
fi
if ! redis_up; then
  echo "services: Redis is not reachable at 127.0.0.1:6379" >&2
  exit 1
fi
echo "services: Redis ready" >&2

# Garage for the archive's tests: the shared node, its bucket and key; the
# AWS variables for it land in ~/.cache/idemkey-tools/garage/env.
if ! command -v curl >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
fi
bash "$(dirname "$0")/garage.sh"

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  echo "services: installing chromium and chromium-driver" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
echo "services: $(/usr/bin/chromedriver --version | head -n 1)" >&2
