#!/usr/bin/env bash
# Installs the CI's cargo tools into the cached tools directory (the one
# scripts/install-garage.sh uses) once, and reuses them afterwards:
# cargo-machete (unused dependencies) and cargo-deny (licences, advisories,
# duplicate versions). Each is built from crates.io with its own lock file
# (`cargo install --locked`) at a pinned version; a tool already present at
# that version is skipped. The first build of both takes a few minutes on a
# 2-core machine. Prints the tools' bin directory.
set -euo pipefail

machete_version=0.9.2
deny_version=0.20.2
tools=${IDEMKEY_TOOLS_DIR:-$HOME/.cache/idemkey-tools}

install() { # crate version binary
  local bin=$tools/bin/$3
  if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qF "$2"; then
    return 0
  fi
  echo "tools: building $1 $2 into $tools (once)" >&2
  nice -n 19 cargo install "$1" --version "$2" --locked --root "$tools" >&2
}

install cargo-machete "$machete_version" cargo-machete
install cargo-deny "$deny_version" cargo-deny
echo "$tools/bin"
