#!/usr/bin/env bash
# Installs Garage (an S3-compatible object store, from crates.io) into a
# cached tools directory once, and reuses it afterwards. The first build takes
# 15-20 minutes on a 2-core machine. Prints the binary's path.
set -euo pipefail

version=2.5.0
tools=${IDEMKEY_TOOLS_DIR:-$HOME/.cache/idemkey-tools}
bin=$tools/bin/garage

if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "$version"; then
  echo "$bin"
  exit 0
fi
echo "install-garage: building garage $version into $tools (once; 15-20 minutes)" >&2
# Only what a single test node needs: the SQLite metadata engine, bundled
# C libraries; no metrics exporter, no K2V.
nice -n 19 cargo install garage --version "$version" --locked --root "$tools" \
  --no-default-features --features bundled-libs,sqlite >&2
echo "$bin"
