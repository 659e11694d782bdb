#!/usr/bin/env bash
# Builds helm (the v3 CLI, for the chart's lint/template/apply tests) from its Go module, caches it in
# ~/.cache/vault-rollout/helm-<version>/ and symlinks it into <repo>/.local/bin/helm. A sibling of build-binaries.sh,
# called by the chart's integration test (test/integration/helm.ts): only that test needs helm, so starting the
# clusters does not wait for it.
#
# Idempotent: reused when the cache dir carries a complete stamp. Exits non-zero when it cannot build.
#
# Environment:
#   HELM_VERSION  helm.sh/helm/v3 version (default v3.22.0, go 1.26.0)
#   GO, BUILD_P   as in build-binaries.sh
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"

# shellcheck source=../go-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/../go-env.sh"

log() { printf '[build-helm] %s\n' "$*" >&2; }
now() { date +%s; }

# -b2: built with the Kubernetes version ldflags below; a folder of its own, so that a checkout without them (which
# would rebuild over it, and back) and this one each keep theirs.
HELM_DIR="$CACHE_ROOT/helm-$HELM_VERSION-b2"
HELM_STAMP="helm $HELM_VERSION; helm; v2"

is_complete() {
  [[ -f "$HELM_DIR/.complete" && "$(cat "$HELM_DIR/.complete")" == "$HELM_STAMP" && -x "$HELM_DIR/helm" ]]
}

build_helm() {
  local t0; t0=$(now)
  find_go
  log "building helm $HELM_VERSION with $("$GO" version)"
  local src="$CACHE_ROOT/src/helm-$HELM_VERSION"
  rm -rf "$src" "$HELM_DIR"
  mkdir -p "$src"
  local info modfile moddir
  info="$(cd "$src" && "$GO" mod download -json "helm.sh/helm/v3@$HELM_VERSION")"
  modfile="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
  moddir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
  [[ -f "$modfile" && -d "$moddir" ]] || { log "could not download helm.sh/helm/v3@$HELM_VERSION"; return 1; }
  # helm's go.mod has no replace directives: its own requirements (and go.sum) resolve as they are.
  if grep -q '^replace' "$modfile"; then log "helm $HELM_VERSION has replace directives; extend build-helm.sh"; return 1; fi
  {
    echo "module vault-rollout.local/helm-binaries"
    echo
    echo "go $(awk '$1 == "go" { print $2; exit }' "$modfile")"
    echo
    echo "require helm.sh/helm/v3 $HELM_VERSION"
  } > "$src/go.mod"
  cp "$moddir/go.sum" "$src/go.sum"
  # The Kubernetes version helm assumes without a cluster (`helm template`, `helm lint`; what a chart's kubeVersion
  # is checked against), set as helm's own Makefile sets it: client-go v0.X.Y -> 1.X. Without it helm says v1.20.0.
  local client_go k8s_minor k8s_flags
  client_go="$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$modfile")"
  k8s_minor="$(cut -d. -f2 <<<"${client_go#v}")"
  [[ "$k8s_minor" =~ ^[0-9]+$ ]] || { log "no k8s.io/client-go version in helm's go.mod"; return 1; }
  k8s_flags=""
  for pkg in pkg/chartutil pkg/lint/rules; do
    k8s_flags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
  done
  local out="$HELM_DIR.partial"
  rm -rf "$out"; mkdir -p "$out"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean$k8s_flags" \
    -o "$out/helm" helm.sh/helm/v3/cmd/helm)
  echo "$HELM_STAMP" > "$out/.complete"
  mv "$out" "$HELM_DIR"
  log "helm $HELM_VERSION done in $(( $(now) - t0 ))s"
}

mkdir -p "$CACHE_ROOT" "$BIN_DIR"
exec 9>"$CACHE_ROOT/.build-helm.lock"
if ! flock -n 9; then log "another build holds $CACHE_ROOT/.build-helm.lock; waiting..."; flock 9; fi
if is_complete; then log "reusing $HELM_DIR"; else build_helm; fi
exec 9>&-
ln -sfn "$HELM_DIR/helm" "$BIN_DIR/helm"
