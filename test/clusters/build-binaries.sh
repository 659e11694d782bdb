#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries used by the integration
# clusters (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# kubelet and kube-proxy for the real node, etcd), the kwok node simulator, and the Argo Rollouts, External Secrets (Vault provider only) and Vault Secrets
# Operator controllers and kube-router (its NetworkPolicy firewall, for the real node) from their Go modules, caches them outside the checkout and symlinks them into
# <repo>/.local/bin/.
#
# Idempotent: a component whose cache dir carries a complete stamp is reused.
# Needs only Go (>= 1.26) and access to the Go module proxy.
#
# Environment:
#   K8S_VERSION   Kubernetes version of the main clusters (default v1.37.2, the newest on the module proxy)
#   K8S_COMPAT_VERSION  a second, older Kubernetes for the compatibility lane (default v1.32.13, the oldest
#                 minor EKS still supports); linked into .local/bin/kubernetes-<version>/; empty: none
#   ETCD_VERSION  etcd version (default v3.6.8, the one Kubernetes 1.36 pins)
#   KWOK_VERSION  sigs.k8s.io/kwok version (default v0.8.0, built on k8s.io/* v0.36)
#   ARGO_ROLLOUTS_VERSION  github.com/argoproj/argo-rollouts version (default v1.10.1;
#                 v1.10.2 asks for Go >= 1.26.10)
#   ESO_VERSION   github.com/external-secrets/external-secrets version (default v0.20.4: from v1.0
#                 its providers, apis and runtime are nested modules the module proxy does not serve)
#   VSO_VERSION   github.com/hashicorp/vault-secrets-operator version (default v0.10.0, the version
#                 the module proxy serves here)
#   KUBE_ROUTER_VERSION  github.com/cloudnativelabs/kube-router/v2 version (default v2.1.0, the only one the module
#                 proxy serves here); only its NetworkPolicy firewall runs, on the real node
#   GO            go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   BUILD_P       go build -p value (default 2)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
K8S_COMPAT_VERSION="${K8S_COMPAT_VERSION-v1.32.13}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.8}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
ARGO_ROLLOUTS_VERSION="${ARGO_ROLLOUTS_VERSION:-v1.10.1}"
ESO_VERSION="${ESO_VERSION:-v0.20.4}"
VSO_VERSION="${VSO_VERSION:-v0.10.0}"
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../go-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/../go-env.sh"


log() { printf '[build-binaries] %s\n' "$*" >&2; }
now() { date +%s; }
T_START=$(now)

mkdir -p "$CACHE_ROOT" "$BIN_DIR"

# Serialise concurrent invocations (e.g. a manual `clusters:up` and a test run).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_ROOT/.build.lock"
  if ! flock -n 9; then
    log "another build holds $CACHE_ROOT/.build.lock; waiting..."
    flock 9
  fi
fi

# The set of Kubernetes binaries is part of the directory name, not only of the
# stamp: checkouts of an older revision (other worktrees, CI caches) build the
# old set into `kubernetes-<version>` and would otherwise rebuild it in turn
# each time one or the other runs.
K8S_DIR="$CACHE_ROOT/kubernetes-$K8S_VERSION-node"
ETCD_DIR="$CACHE_ROOT/etcd-$ETCD_VERSION"
KWOK_DIR="$CACHE_ROOT/kwok-$KWOK_VERSION"
# kubelet and kube-proxy run the real node of each lane's cluster alpha (test/clusters/real-node.ts); in the same
# `go build` they add mostly their own packages, the rest is the control plane's.
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
# The compatibility lane runs only its control plane on the older version; every lane's kubectl is the main one.
K8S_COMPAT_BINS=(kube-apiserver kube-controller-manager kube-scheduler)
# The stamp records what was built; a different stamp means rebuild.
K8S_STAMP="kubernetes $K8S_VERSION; ${K8S_BINS[*]}; v2"
K8S_COMPAT_DIR="$CACHE_ROOT/kubernetes-$K8S_COMPAT_VERSION-sched"
K8S_COMPAT_STAMP="kubernetes $K8S_COMPAT_VERSION; ${K8S_COMPAT_BINS[*]}; v3"
ETCD_STAMP="etcd $ETCD_VERSION; etcd; v1"
KWOK_STAMP="kwok $KWOK_VERSION; kwok; v1"
ARGO_DIR="$CACHE_ROOT/argo-rollouts-$ARGO_ROLLOUTS_VERSION"
ARGO_STAMP="argo-rollouts $ARGO_ROLLOUTS_VERSION; rollouts-controller crds; v1"
ESO_DIR="$CACHE_ROOT/external-secrets-$ESO_VERSION"
ESO_STAMP="external-secrets $ESO_VERSION; external-secrets (vault provider only) crds; v1"
VSO_DIR="$CACHE_ROOT/vault-secrets-operator-$VSO_VERSION"
VSO_STAMP="vault-secrets-operator $VSO_VERSION; vault-secrets-operator crds; v1"
KUBE_ROUTER_DIR="$CACHE_ROOT/kube-router-$KUBE_ROUTER_VERSION"
KUBE_ROUTER_STAMP="kube-router $KUBE_ROUTER_VERSION; kube-router; v1"

is_complete() { # dir stamp bins...
  local dir="$1" stamp="$2"; shift 2
  [[ -f "$dir/.complete" ]] || return 1
  [[ "$(cat "$dir/.complete")" == "$stamp" ]] || return 1
  local b; for b in "$@"; do [[ -x "$dir/$b" ]] || return 1; done
}

# The staging module's tag for this release, or — when the module proxy does not serve that one (it answers 403 for
# k8s.io/endpointslice v0.32.13) — the newest earlier patch of the same minor it does serve; said in the log.
served_staging_version() { # src-dir module version
  local probe="$1.probe" module="$2" want="$3" patch candidate
  # A module of its own to ask from: the wrapper's go.mod is being written meanwhile.
  mkdir -p "$probe"; printf 'module vault-rollout.local/probe\n\ngo 1.26\n' > "$probe/go.mod"
  patch="${want##*.}"
  for (( candidate = patch; candidate >= 0; candidate-- )); do
    if (cd "$probe" && "$GO" mod download "$module@${want%.*}.$candidate" >/dev/null 2>&1); then
      [[ $candidate == "$patch" ]] || log "$module@$want is not served here; using ${want%.*}.$candidate"
      echo "${want%.*}.$candidate"
      return 0
    fi
  done
  log "$module: no ${want%.*}.x is served here"
  return 1
}

build_kubernetes() { # version dir stamp bins...
  local version="$1" dir="$2" stamp="$3"; shift 3
  local bins=("$@")
  local t0; t0=$(now)
  find_go
  local k8s_minor="${version#v1.}"; k8s_minor="${k8s_minor%%.*}"
  local staging_version="v0.${version#v1.}"
  log "building kubernetes $version (staging modules at $staging_version) with $("$GO" version)"

  local src="$CACHE_ROOT/src/kubernetes-$version"
  rm -rf "$src" "$dir"
  mkdir -p "$src"

  # The kubernetes go.mod says `replace k8s.io/<x> => ./staging/src/k8s.io/<x>`
  # and requires them at v0.0.0; replaces of a dependency are ignored, so the
  # wrapper module must map each required staging module to its published tag.
  local modfile
  modfile="$(cd "$src" && "$GO" mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -f "$modfile" ]] || { log "could not download k8s.io/kubernetes@$version"; return 1; }
  local staging=()
  mapfile -t staging < <(awk '
    /^replace[[:space:]]*\(/ { inrep=1; next }
    inrep && /^\)/ { inrep=0; next }
    inrep && $2 == "=>" && $3 ~ /^\.\/staging\// { rep[$1]=1 }
    /^require[[:space:]]*\(/ { inreq=1; next }
    inreq && /^\)/ { inreq=0; next }
    inreq && $2 == "v0.0.0" { req[$1]=1 }
    END { for (m in rep) if (m in req) print m }' "$modfile" | sort)
  [[ ${#staging[@]} -gt 0 ]] || { log "found no staging modules in $modfile"; return 1; }
  log "wrapper module replaces ${#staging[@]} staging modules"

  local go_directive godebug
  go_directive="$(awk '$1 == "go" { print $2; exit }' "$modfile")"
  godebug="$(awk '$1 == "godebug" { $1=""; sub(/^ /, ""); print; exit }' "$modfile")"
  {
    echo "module vault-rollout.local/k8s-binaries"
    echo
    echo "go ${go_directive:-1.26.0}"
    [[ -n "$godebug" ]] && { echo; echo "godebug $godebug"; }
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo "replace ("
    local m; for m in "${staging[@]}"; do echo "	$m => $m $(served_staging_version "$src" "$m" "$staging_version")"; done
    echo ")"
  } > "$src/go.mod"

  local build_date; build_date="$(date -u +'%Y-%m-%dT%H:%M:%SZ')"
  local ldflags="-s -w" key val
  for kv in "gitVersion=$version" "gitMajor=1" "gitMinor=$k8s_minor" \
            "gitTreeState=clean" "buildDate=$build_date"; do
    key="${kv%%=*}"; val="${kv#*=}"
    ldflags+=" -X k8s.io/component-base/version.$key=$val -X k8s.io/client-go/pkg/version.$key=$val"
  done

  local out="$dir.partial"
  rm -rf "$out"; mkdir -p "$out"
  # One `go build` for all of them: one link runs while the next binary's own packages compile, where one build per
  # binary left a core idle through each link.
  local b pkgs=()
  for b in "${bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  log "go build ${bins[*]}"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath -ldflags "$ldflags" -o "$out/" "${pkgs[@]}")
  echo "$stamp" > "$out/.complete"
  mv "$out" "$dir"
  log "kubernetes $version done in $(( $(now) - t0 ))s"
}

build_etcd() {
  local t0; t0=$(now)
  find_go
  log "building etcd $ETCD_VERSION with $("$GO" version)"
  local src="$CACHE_ROOT/src/etcd-$ETCD_VERSION"
  rm -rf "$src" "$ETCD_DIR"
  mkdir -p "$src"
  # The etcd server module's own replaces (../api etc.) are ignored when it is
  # a dependency; its requirements name the published sibling modules.
  cat > "$src/go.mod" <<EOF
module vault-rollout.local/etcd-binaries

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  local out="$ETCD_DIR.partial"
  rm -rf "$out"; mkdir -p "$out"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
  echo "$ETCD_STAMP" > "$out/.complete"
  mv "$out" "$ETCD_DIR"
  log "etcd $ETCD_VERSION done in $(( $(now) - t0 ))s"
}

build_kwok() {
  local t0; t0=$(now)
  find_go
  log "building kwok $KWOK_VERSION with $("$GO" version)"
  local src="$CACHE_ROOT/src/kwok-$KWOK_VERSION"
  rm -rf "$src" "$KWOK_DIR"
  mkdir -p "$src"
  # sigs.k8s.io/kwok has no replace directives: its own requirements (k8s.io/*
  # v0.36) resolve as they are. Only the `kwok` command is built (not kwokctl).
  cat > "$src/go.mod" <<EOF
module vault-rollout.local/kwok-binaries

go 1.26.0

require sigs.k8s.io/kwok $KWOK_VERSION
EOF
  local out="$KWOK_DIR.partial"
  rm -rf "$out"; mkdir -p "$out"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
    -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok)
  echo "$KWOK_STAMP" > "$out/.complete"
  mv "$out" "$KWOK_DIR"
  log "kwok $KWOK_VERSION done in $(( $(now) - t0 ))s"
}

build_argo_rollouts() {
  local t0; t0=$(now)
  find_go
  log "building argo-rollouts $ARGO_ROLLOUTS_VERSION rollouts-controller with $("$GO" version)"
  local src="$CACHE_ROOT/src/argo-rollouts-$ARGO_ROLLOUTS_VERSION"
  rm -rf "$src" "$ARGO_DIR"
  mkdir -p "$src"
  local info modfile moddir
  info="$(cd "$src" && "$GO" mod download -json "github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION")"
  modfile="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
  moddir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
  [[ -f "$modfile" && -d "$moddir" ]] || { log "could not download argo-rollouts@$ARGO_ROLLOUTS_VERSION"; return 1; }
  # The controller serves metrics and healthz on 0.0.0.0 (controller/controller.go
  # `listenAddr`, no flag): the one change made to its source, so that it
  # listens on loopback only. Built from that copy through a replace.
  cp -r "$moddir" "$src/argo-rollouts"
  chmod -R u+w "$src/argo-rollouts"
  grep -q 'listenAddr *= "0.0.0.0:%d"' "$src/argo-rollouts/controller/controller.go" ||
    { log "argo-rollouts $ARGO_ROLLOUTS_VERSION: listenAddr not found in controller/controller.go"; return 1; }
  sed -i 's/listenAddr *= "0.0.0.0:%d"/listenAddr = "127.0.0.1:%d"/' "$src/argo-rollouts/controller/controller.go"
  # Its go.mod pins k8s.io/* (and k8s.io/kubernetes' staging modules) with a
  # replace block, which is ignored for a dependency: the wrapper repeats it.
  {
    echo "module vault-rollout.local/argo-rollouts-binaries"
    echo
    echo "go $(awk '$1 == "go" { print $2; exit }' "$modfile")"
    echo
    echo "require github.com/argoproj/argo-rollouts $ARGO_ROLLOUTS_VERSION"
    echo
    echo "replace github.com/argoproj/argo-rollouts => ./argo-rollouts"
    echo
    sed -n '/^replace (/,/^)/p' "$modfile"
  } > "$src/go.mod"
  cp "$moddir/go.sum" "$src/go.sum"
  local out="$ARGO_DIR.partial"
  rm -rf "$out"; mkdir -p "$out/crds"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath \
    -ldflags "-s -w -X github.com/argoproj/argo-rollouts/utils/version.version=${ARGO_ROLLOUTS_VERSION#v}" \
    -o "$out/rollouts-controller" github.com/argoproj/argo-rollouts/cmd/rollouts-controller)
  # The full CRDs the controller needs (Rollout, AnalysisRun, AnalysisTemplate,
  # ClusterAnalysisTemplate, Experiment), from the same checksum-verified module.
  cp "$moddir"/manifests/crds/*-crd.yaml "$out/crds/"
  chmod u+w "$out/crds/"*
  echo "$ARGO_STAMP" > "$out/.complete"
  mv "$out" "$ARGO_DIR"
  log "argo-rollouts $ARGO_ROLLOUTS_VERSION done in $(( $(now) - t0 ))s"
}

# Downloads module@version (checksum-verified against go.sum's database) and sets MOD_FILE (its go.mod) and MOD_DIR
# (the read-only extracted module).
download_module() { # src-dir module version
  local info
  info="$(cd "$1" && "$GO" mod download -json "$2@$3")"
  MOD_FILE="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
  MOD_DIR="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
  [[ -f "$MOD_FILE" && -d "$MOD_DIR" ]] || { log "could not download $2@$3"; return 1; }
}

# A wrapper module that builds <module> from the copy ./<copy> and repeats the module's own replace directives (single
# and block form), which Go ignores for a dependency.
write_wrapper_module() { # src-dir wrapper-name module version copy-dir
  local src="$1" name="$2" module="$3" version="$4" copy="$5"
  {
    echo "module vault-rollout.local/$name"
    echo
    echo "go $(awk '$1 == "go" { print $2; exit }' "$MOD_FILE")"
    echo
    echo "require $module $version"
    echo
    echo "replace $module => ./$copy"
    echo
    awk '/^replace[[:space:]]*\(/ { inb=1; print; next }
         inb { print; if ($0 ~ /^\)/) inb=0; next }
         /^replace[[:space:]]/ { print }' "$MOD_FILE"
  } > "$src/go.mod"
  cp "$MOD_DIR/go.sum" "$src/go.sum"
}

build_external_secrets() {
  local t0; t0=$(now)
  find_go
  log "building external-secrets $ESO_VERSION (vault provider only) with $("$GO" version)"
  local src="$CACHE_ROOT/src/external-secrets-$ESO_VERSION"
  rm -rf "$src" "$ESO_DIR"
  mkdir -p "$src"
  download_module "$src" github.com/external-secrets/external-secrets "$ESO_VERSION"
  cp -r "$MOD_DIR" "$src/external-secrets"
  chmod -R u+w "$src/external-secrets"
  # Two files changed in the copy, so that only the Vault provider is compiled: the package that registers every
  # provider (≈ 40 of them, each with its cloud SDK) by blank imports keeps only vault's, and the generators' one
  # keeps none (the tests use no generator). Nothing else imports a provider.
  local reg="$src/external-secrets/pkg/provider/register/register.go" gen="$src/external-secrets/pkg/generator/register/register.go"
  grep -q '"github.com/external-secrets/external-secrets/pkg/provider/vault"' "$reg" ||
    { log "external-secrets $ESO_VERSION: the vault provider is not registered in $reg"; return 1; }
  [[ -f "$gen" ]] || { log "external-secrets $ESO_VERSION: $gen not found"; return 1; }
  printf '%s\n' '// Package register: trimmed by vault-rollout'"'"'s build-binaries.sh to the Vault provider.' 'package register' '' \
    'import _ "github.com/external-secrets/external-secrets/pkg/provider/vault"' > "$reg"
  printf '%s\n' '// Package register: trimmed by vault-rollout'"'"'s build-binaries.sh to no generator.' 'package register' > "$gen"
  write_wrapper_module "$src" external-secrets-binaries github.com/external-secrets/external-secrets "$ESO_VERSION" external-secrets
  local out="$ESO_DIR.partial"
  rm -rf "$out"; mkdir -p "$out/crds"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath -ldflags "-s -w" \
    -o "$out/external-secrets" github.com/external-secrets/external-secrets)
  # Every CRD of the module (the controller watches ExternalSecrets, (Cluster)SecretStores, ClusterExternalSecrets,
  # PushSecrets, ClusterPushSecrets and the generators' kinds); infra/crds/external-secrets/ commits the three the
  # product reads.
  cp "$MOD_DIR"/config/crds/bases/*.yaml "$out/crds/"
  rm -f "$out/crds/kustomization.yaml"
  chmod u+w "$out/crds/"*
  echo "$ESO_STAMP" > "$out/.complete"
  mv "$out" "$ESO_DIR"
  log "external-secrets $ESO_VERSION done in $(( $(now) - t0 ))s"
}

build_vault_secrets_operator() {
  local t0; t0=$(now)
  find_go
  log "building vault-secrets-operator $VSO_VERSION with $("$GO" version)"
  local src="$CACHE_ROOT/src/vault-secrets-operator-$VSO_VERSION"
  rm -rf "$src" "$VSO_DIR"
  mkdir -p "$src"
  download_module "$src" github.com/hashicorp/vault-secrets-operator "$VSO_VERSION"
  cp -r "$MOD_DIR" "$src/vault-secrets-operator"
  chmod -R u+w "$src/vault-secrets-operator"
  write_wrapper_module "$src" vault-secrets-operator-binaries github.com/hashicorp/vault-secrets-operator "$VSO_VERSION" vault-secrets-operator
  local out="$VSO_DIR.partial"
  rm -rf "$out"; mkdir -p "$out/crds"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath \
    -ldflags "-s -w -X github.com/hashicorp/vault-secrets-operator/internal/version.GitVersion=$VSO_VERSION" \
    -o "$out/vault-secrets-operator" github.com/hashicorp/vault-secrets-operator)
  # All nine CRDs: the manager starts a controller for each kind and fails without its CRD.
  cp "$MOD_DIR"/config/crd/bases/*.yaml "$out/crds/"
  chmod u+w "$out/crds/"*
  echo "$VSO_STAMP" > "$out/.complete"
  mv "$out" "$VSO_DIR"
  log "vault-secrets-operator $VSO_VERSION done in $(( $(now) - t0 ))s"
}

# kube-router, for its NetworkPolicy firewall alone (iptables and ipset) in the real node's network namespace. The
# reference implementation, sigs.k8s.io/kube-network-policies v0.8.0, cannot run here: it hands packets to user space
# with nftables' `queue` expression, which this kernel lacks (CONFIG_NFT_QUEUE is not set and no module can be
# loaded; adding such a rule answers ENOENT). v2.1.0 is the only kube-router the module proxy serves here, and later
# releases fix security flaws reported in it: acceptable only as a test-only component, on loopback and inside the
# node's own namespace, never as something to deploy. Its go.mod has no replace directives, so its requirements
# (k8s.io/* v0.29) resolve as they are; the whole command is built, its router and service proxy stay off at run time.
build_kube_router() {
  local t0; t0=$(now)
  find_go
  log "building kube-router $KUBE_ROUTER_VERSION with $("$GO" version)"
  local src="$CACHE_ROOT/src/kube-router-$KUBE_ROUTER_VERSION"
  rm -rf "$src" "$KUBE_ROUTER_DIR"
  mkdir -p "$src"
  printf 'module vault-rollout.local/kube-router-binaries\n\ngo 1.26.0\n\nrequire github.com/cloudnativelabs/kube-router/v2 %s\n' \
    "$KUBE_ROUTER_VERSION" > "$src/go.mod"
  local out="$KUBE_ROUTER_DIR.partial"
  rm -rf "$out"; mkdir -p "$out"
  (cd "$src" && "$GO" build -p "$BUILD_P" -trimpath \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
    -o "$out/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
  echo "$KUBE_ROUTER_STAMP" > "$out/.complete"
  mv "$out" "$KUBE_ROUTER_DIR"
  log "kube-router $KUBE_ROUTER_VERSION done in $(( $(now) - t0 ))s"
}

# The operators (kwok, Argo Rollouts, External Secrets, VSO) and kube-router build beside etcd and Kubernetes, each under its own
# lock: the builds are CPU-bound on the whole, but one alone leaves a core idle through downloads, links and the narrow
# parts of its package graph, and another build fills it. A failure in either stream fails the script.
build_locked() { # name dir stamp build-function bins...
  local name="$1" dir="$2" stamp="$3" fn="$4"; shift 4
  is_complete "$dir" "$stamp" "$@" && { log "reusing $dir"; return 0; }
  exec 8>"$CACHE_ROOT/.build-$name.lock"
  if ! flock -n 8; then log "another build holds $CACHE_ROOT/.build-$name.lock; waiting..."; flock 8; fi
  if is_complete "$dir" "$stamp" "$@"; then log "reusing $dir"; else "$fn"; fi
  exec 8>&-
}
build_operators() {
  build_locked kwok "$KWOK_DIR" "$KWOK_STAMP" build_kwok kwok
  build_locked argo-rollouts "$ARGO_DIR" "$ARGO_STAMP" build_argo_rollouts rollouts-controller
  build_locked external-secrets "$ESO_DIR" "$ESO_STAMP" build_external_secrets external-secrets
  build_locked vault-secrets-operator "$VSO_DIR" "$VSO_STAMP" build_vault_secrets_operator vault-secrets-operator
  build_locked kube-router "$KUBE_ROUTER_DIR" "$KUBE_ROUTER_STAMP" build_kube_router kube-router
}
# Not under the shared lock (fd 9 closed): a long operator build does not hold up a checkout that needs only the
# clusters.
build_operators 9>&- &
OPERATORS_PID=$!
# Stops the operator builds (the subshell and every go command under it) if this script ends first, failed or killed.
kill_tree() { local child; for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done; kill "$1" 2>/dev/null || true; }
trap '[[ -n "${OPERATORS_PID:-}" ]] && kill_tree "$OPERATORS_PID"; true' EXIT

if is_complete "$ETCD_DIR" "$ETCD_STAMP" etcd; then
  log "reusing $ETCD_DIR"
else
  build_etcd
fi
if is_complete "$K8S_DIR" "$K8S_STAMP" "${K8S_BINS[@]}"; then
  log "reusing $K8S_DIR"
else
  build_kubernetes "$K8S_VERSION" "$K8S_DIR" "$K8S_STAMP" "${K8S_BINS[@]}"
fi
if [[ -n "$K8S_COMPAT_VERSION" ]]; then
  if is_complete "$K8S_COMPAT_DIR" "$K8S_COMPAT_STAMP" "${K8S_COMPAT_BINS[@]}"; then
    log "reusing $K8S_COMPAT_DIR"
  else
    build_kubernetes "$K8S_COMPAT_VERSION" "$K8S_COMPAT_DIR" "$K8S_COMPAT_STAMP" "${K8S_COMPAT_BINS[@]}"
  fi
fi

for b in "${K8S_BINS[@]}"; do ln -sfn "$K8S_DIR/$b" "$BIN_DIR/$b"; done
if [[ -n "$K8S_COMPAT_VERSION" ]]; then
  mkdir -p "$BIN_DIR/kubernetes-$K8S_COMPAT_VERSION"
  rm -f "$BIN_DIR/kubernetes-$K8S_COMPAT_VERSION/kubectl"
  for b in "${K8S_COMPAT_BINS[@]}"; do ln -sfn "$K8S_COMPAT_DIR/$b" "$BIN_DIR/kubernetes-$K8S_COMPAT_VERSION/$b"; done
fi
ln -sfn "$ETCD_DIR/etcd" "$BIN_DIR/etcd"
exec 9>&-

OPERATORS_STATUS=0
wait "$OPERATORS_PID" || OPERATORS_STATUS=$?
OPERATORS_PID=
(( OPERATORS_STATUS == 0 )) || { log "building the operators failed (exit $OPERATORS_STATUS)"; exit 1; }
ln -sfn "$KWOK_DIR/kwok" "$BIN_DIR/kwok"
ln -sfn "$ARGO_DIR/rollouts-controller" "$BIN_DIR/rollouts-controller"
ln -sfn "$ARGO_DIR/crds" "$BIN_DIR/argo-rollouts-crds"
ln -sfn "$ESO_DIR/external-secrets" "$BIN_DIR/external-secrets"
ln -sfn "$ESO_DIR/crds" "$BIN_DIR/external-secrets-crds"
ln -sfn "$VSO_DIR/vault-secrets-operator" "$BIN_DIR/vault-secrets-operator"
ln -sfn "$VSO_DIR/crds" "$BIN_DIR/vault-secrets-operator-crds"
ln -sfn "$KUBE_ROUTER_DIR/kube-router" "$BIN_DIR/kube-router"
log "binaries linked into $BIN_DIR (total $(( $(now) - T_START ))s)"
