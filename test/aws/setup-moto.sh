#!/usr/bin/env bash
# Installs moto's server (a local AWS emulator, Apache-2.0, from PyPI) into a venv cached outside the checkout,
# ${XDG_CACHE_HOME:-~/.cache}/vault-rollout/moto-<version>/, like the other test components. The tests start
# `bin/moto_server` on 127.0.0.1 as the STS endpoint of Vault's `aws` auth method. Idempotent: a venv carrying a
# matching `.complete` stamp is reused. Prints the path of moto_server.
#
#   MOTO_VERSION  default 5.2.5        PYTHON  default python3
set -euo pipefail
MOTO_VERSION="${MOTO_VERSION:-5.2.5}"
PYTHON="${PYTHON:-python3}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/vault-rollout"
DIR="$CACHE_ROOT/moto-$MOTO_VERSION"
STAMP="$DIR/.complete"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "moto[server]==$MOTO_VERSION" && -x "$DIR/bin/moto_server" ]]; then
  echo "$DIR/bin/moto_server"
  exit 0
fi
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.setup-moto.lock"
command -v flock >/dev/null 2>&1 && flock 9
rm -rf "$DIR"
"$PYTHON" -m venv "$DIR" >&2
"$DIR/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
"$DIR/bin/moto_server" --help >/dev/null
echo "moto[server]==$MOTO_VERSION" >"$STAMP"
echo "$DIR/bin/moto_server"
