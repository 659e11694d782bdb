# Sourced by test/clusters/build-binaries.sh and test/vault/build-server.sh: finding Go and building in generated
# wrapper modules, cached per user outside the checkout and linked into it. The caller defines log().

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/vault-rollout"
BIN_DIR="$REPO_ROOT/.local/bin"
BUILD_P="${BUILD_P:-2}"

# Go is only needed when something must be built.
find_go() {
  if [[ -n "${GO:-}" ]]; then :
  elif command -v go >/dev/null 2>&1; then GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else log "no Go toolchain found (install Go >= 1.26 or set GO=)"; return 1
  fi
  "$GO" version >/dev/null || { log "$GO does not run"; return 1; }
}

# Module-aware builds in generated wrapper modules; never touch the checkout.
export GOFLAGS="-mod=mod"
export GOWORK=off
export CGO_ENABLED=0
# Let the go command fetch a newer toolchain through the module proxy if the local one is older than a go.mod asks.
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
