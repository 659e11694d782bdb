#!/usr/bin/env bash
# Installs the Python tool NAME for the tests into a venv cached outside the checkout,
# ${XDG_CACHE_HOME:-~/.cache}/vault-rollout/NAME-<version>-<requirements hash>/, and prints that directory.
# Installs exactly test/requirements/NAME.txt (compile.sh writes it): every package pinned with ==, each file
# checked against its SHA-256 there (--require-hashes), wheels only (no setup.py runs). Idempotent: a venv carrying
# a matching `.complete` stamp is reused; a changed requirements file gets a new venv.
#
#   install-venv.sh NAME [PROBE...]   PROBE: a command (relative to the venv) that must succeed before the stamp
#   PYTHON  default python3 (the requirements were resolved for the version their header names)
set -euo pipefail
NAME=${1:?usage: install-venv.sh NAME [PROBE...]}
shift
PYTHON="${PYTHON:-python3}"
REQUIREMENTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$NAME.txt"
[[ -f "$REQUIREMENTS" ]] || { echo "install-venv: no $REQUIREMENTS" >&2; exit 1; }
VERSION=$(sed -n "s/^$NAME==\\([^ ]*\\) .*/\\1/p" "$REQUIREMENTS")
[[ -n "$VERSION" ]] || { echo "install-venv: no $NAME==<version> line in $REQUIREMENTS" >&2; exit 1; }
REQUIREMENTS_SHA=$(sha256sum <"$REQUIREMENTS" | cut -c1-12)
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/vault-rollout"
DIR="$CACHE_ROOT/$NAME-$VERSION-$REQUIREMENTS_SHA"
STAMP="$DIR/.complete"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$REQUIREMENTS_SHA" ]]; then
  echo "$DIR"
  exit 0
fi
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.install-$NAME.lock"
command -v flock >/dev/null 2>&1 && flock 9
# Installed meanwhile by the holder of the lock.
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$REQUIREMENTS_SHA" ]]; then
  echo "$DIR"
  exit 0
fi
rm -rf "$DIR"
"$PYTHON" -m venv "$DIR" >&2
"$DIR/bin/pip" install --quiet --disable-pip-version-check --require-hashes --only-binary=:all: -r "$REQUIREMENTS" >&2
if [[ $# -gt 0 ]]; then
  probe=$1
  shift
  "$DIR/$probe" "$@" >/dev/null
fi
echo "$REQUIREMENTS_SHA" >"$STAMP"
echo "$DIR"
