#!/usr/bin/env bash
# Installs the Python SDK (with its pinned test extras) into a cached venv and
# runs its tests against real idemkey servers. Run from anywhere;
# scripts/test.sh runs it from the repo root.
set -euo pipefail
cd "$(dirname "$0")"

BIN="${IDEMKEY_BIN:-../../target/debug/idemkey}"
if [[ ! -x "$BIN" ]]; then
  echo "sdk/python: idemkey binary not found at $BIN: run 'cargo build --workspace --bins' (or set IDEMKEY_BIN)" >&2
  exit 1
fi
export IDEMKEY_BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null || { echo "sdk/python: $PYTHON (>= 3.9) is required" >&2; exit 1; }

# The venv is recreated only when pyproject.toml (and so the pins) changes.
VENV="${IDEMKEY_TOOLS_DIR:-$HOME/.cache/idemkey-tools}/python-sdk-venv"
hash="$(sha256sum pyproject.toml | cut -d' ' -f1)"
stamp="$VENV/.pyproject.sha256"
if [[ ! -x "$VENV/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$hash" ]]; then
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'
  echo "$hash" > "$stamp"
fi
# The venv is shared between checkouts: make sure its editable install is this one.
if ! "$VENV/bin/python" -c 'import os, sys, idemkey
sys.exit(os.path.realpath(idemkey.__file__) != os.path.realpath(sys.argv[1]))' "$PWD/src/idemkey/__init__.py" 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e .
fi

# The package is typed (py.typed): hold it to mypy --strict.
"$VENV/bin/python" -m mypy src/idemkey

# pytest exits 5 when it collected no test: that is a failure here too
# (set -e fails on every non-zero exit code).
"$VENV/bin/python" -m pytest "$@"
