#!/usr/bin/env bash
# Builds the GitOps helpers of test/gitops/ (gitops-flux: Flux's kustomize-controller server-side apply with
# github.com/fluxcd/pkg/ssa; gitops-argo: Argo CD's client-side apply and diff with github.com/argoproj/gitops-engine),
# caches them in ~/.cache/vault-rollout/gitops-helpers-<hash of their sources>/ and symlinks them into
# <repo>/.local/bin/. A sibling of build-binaries.sh, called by the integration global setup (test/components.ts):
# only test/integration/gitops-safe.test.ts runs them, so starting the clusters does not wait for them.
#
# Two modules, two binaries: gitops-engine v0.7.3 pins every k8s.io module to v0.23.1 with a replace block (which
# only the main module's go.mod can carry), while fluxcd/pkg/ssa v0.60.0 needs k8s.io/* v0.34: one module cannot
# hold both.
#
# Idempotent: reused when the cache dir carries a complete stamp. The sources are copied out of the checkout before
# building (GOFLAGS=-mod=mod may rewrite a go.mod), so a build never touches the work tree. Exits non-zero when it
# cannot build.
#
# Environment:
#   GO, BUILD_P   as in build-binaries.sh
set -euo pipefail

# shellcheck source=../go-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/../go-env.sh"

log() { printf '[build-gitops] %s\n' "$*" >&2; }
now() { date +%s; }

HELPERS=(flux argo)
SRC_ROOT="$REPO_ROOT/test/gitops"
# The folder is named after the sources: worktrees at other revisions keep their own build beside this one.
HASH="$(cd "$SRC_ROOT" && cat $(for h in "${HELPERS[@]}"; do echo "$h/go.mod" "$h/go.sum" "$h/main.go"; done) | sha256sum | cut -c1-12)"
GITOPS_DIR="$CACHE_ROOT/gitops-helpers-$HASH"
GITOPS_STAMP="gitops-helpers $HASH; ${HELPERS[*]}; v1"

is_complete() {
  [[ -f "$GITOPS_DIR/.complete" && "$(cat "$GITOPS_DIR/.complete")" == "$GITOPS_STAMP" ]] || return 1
  local h; for h in "${HELPERS[@]}"; do [[ -x "$GITOPS_DIR/gitops-$h" ]] || return 1; done
}

build_gitops() {
  local t0; t0=$(now)
  find_go
  log "building the GitOps helpers (${HELPERS[*]}) with $("$GO" version)"
  local src="$CACHE_ROOT/src/gitops-helpers-$HASH"
  rm -rf "$src" "$GITOPS_DIR"
  mkdir -p "$src"
  local out="$GITOPS_DIR.partial"
  rm -rf "$out"; mkdir -p "$out"
  local h
  for h in "${HELPERS[@]}"; do
    cp -r "$SRC_ROOT/$h" "$src/$h"
    log "go build gitops-$h"
    (cd "$src/$h" && "$GO" build -p "$BUILD_P" -trimpath -ldflags "-s -w" -o "$out/gitops-$h" .)
  done
  echo "$GITOPS_STAMP" > "$out/.complete"
  mv "$out" "$GITOPS_DIR"
  log "GitOps helpers done in $(( $(now) - t0 ))s"
}

mkdir -p "$CACHE_ROOT" "$BIN_DIR"
exec 9>"$CACHE_ROOT/.build-gitops.lock"
if ! flock -n 9; then log "another build holds $CACHE_ROOT/.build-gitops.lock; waiting..."; flock 9; fi
if is_complete; then log "reusing $GITOPS_DIR"; else build_gitops; fi
exec 9>&-
for h in "${HELPERS[@]}"; do ln -sfn "$GITOPS_DIR/gitops-$h" "$BIN_DIR/gitops-$h"; done
