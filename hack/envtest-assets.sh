#!/usr/bin/env bash
# Makes kube-apiserver and etcd available to envtest and prints the directory to
# use as KUBEBUILDER_ASSETS (the only thing written to stdout; progress goes to stderr).
#
# 1. If KUBEBUILDER_ASSETS already holds both binaries, that directory is used.
# 2. If the cache (per version, under the user's cache directory) holds them, the
#    cached directory is used: after the first run, every run is instant.
# 3. Otherwise the prebuilt envtest binaries are fetched with controller-runtime's
#    setup-envtest (itself built through the Go module proxy), bounded by
#    MCR_ENVTEST_PREBUILT_TIMEOUT seconds (default 30), so that a machine without
#    access to the download site falls through quickly. MCR_ENVTEST_PREBUILT=0
#    skips this step.
# 4. Otherwise both are built from Go modules through the module proxy and cached.
#    A cold build takes several minutes on two cores.
#
# Safe to run concurrently: each run builds into its own temp dir and renames it
# into place; the loser of a race discards its copy and uses the winner's.
set -euo pipefail

KUBE_VERSION="${ENVTEST_KUBE_VERSION:-v1.37.1}"

log() { printf '[envtest-assets] %s\n' "$*" >&2; }
die() { printf '[envtest-assets] ERROR: %s\n' "$*" >&2; exit 1; }

has_bins() { [ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ]; }

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && has_bins "$KUBEBUILDER_ASSETS"; then
  printf '%s\n' "$KUBEBUILDER_ASSETS"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "go is not on PATH; Go 1.26 is the only prerequisite"

case "$(uname -s)" in
  Darwin) cache_root="${XDG_CACHE_HOME:-$HOME/Library/Caches}" ;;
  *) cache_root="${XDG_CACHE_HOME:-$HOME/.cache}" ;;
esac
base="${MCR_ENVTEST_CACHE:-$cache_root/multicluster-runtime/envtest}"
dest="$base/kube-$KUBE_VERSION-$(go env GOOS)-$(go env GOARCH)"

if has_bins "$dest"; then
  printf '%s\n' "$dest"
  exit 0
fi

mkdir -p "$base"
# One build at a time: concurrent runs (test packages, several checkouts) wait
# for the first and use its binaries, rather than each compiling its own copy.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$base/.lock"
  log "waiting for another run building the binaries, if any"
  flock 9
  if has_bins "$dest"; then
    printf '%s\n' "$dest"
    exit 0
  fi
fi
work="$(mktemp -d "$base/.build-XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# publish moves a directory holding both binaries into the cache atomically. If
# another run won the race, its copy is kept.
publish() {
  if mv -T "$1" "$dest" 2>/dev/null || has_bins "$dest"; then
    log "cached in $dest"
    printf '%s\n' "$dest"
    exit 0
  fi
  die "could not move the binaries into $dest"
}

SETUP_ENVTEST_VERSION="${MCR_SETUP_ENVTEST_VERSION:-v0.25.1}"
if [ "${MCR_ENVTEST_PREBUILT:-1}" != 0 ]; then
  prebuilt_start=$SECONDS
  tool="$base/tools/setup-envtest-$SETUP_ENVTEST_VERSION"
  if [ ! -x "$tool" ]; then
    log "building setup-envtest $SETUP_ENVTEST_VERSION (once)"
    mkdir -p "$base/tools"
    GOBIN="$work/tools" GOWORK=off GOFLAGS= go install \
      "sigs.k8s.io/controller-runtime/tools/setup-envtest@$SETUP_ENVTEST_VERSION" >&2 \
      && mv -f "$work/tools/setup-envtest" "$tool" || log "could not build setup-envtest"
  fi
  if [ -x "$tool" ]; then
    limit="${MCR_ENVTEST_PREBUILT_TIMEOUT:-30}"
    log "fetching prebuilt kube-apiserver and etcd ${KUBE_VERSION#v} (at most ${limit}s)"
    if path="$(timeout "$limit" "$tool" use -p path --bin-dir "$work/prebuilt" "${KUBE_VERSION#v}")" \
        && has_bins "$path"; then
      mkdir -p "$work/bin"
      cp "$path/kube-apiserver" "$path/etcd" "$work/bin/"
      log "fetched prebuilt binaries in $((SECONDS - prebuilt_start))s"
      publish "$work/bin"
    fi
    log "prebuilt binaries unavailable after $((SECONDS - prebuilt_start))s; building from source"
  fi
fi

minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
staging_version="v0.${KUBE_VERSION#v1.}"

log "building kube-apiserver $KUBE_VERSION and etcd from Go modules (a cold build takes a few minutes)"
mod="$work/mod"
mkdir -p "$mod" "$work/bin"
cd "$mod"

log "resolving k8s.io/kubernetes@$KUBE_VERSION"
kube_gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
[ -f "$kube_gomod" ] || die "could not fetch go.mod of k8s.io/kubernetes@$KUBE_VERSION through the module proxy"

# k8s.io/kubernetes lists its staging modules at v0.0.0 and replaces them with
# local paths; outside its repo we point each at the published vX.Y.Z instead.
staging="$(awk '/^require[[:space:]]*\(/{r=1;next} r&&/^\)/{r=0} r&&$2=="v0.0.0"{print $1} /^require[[:space:]]+[^(]/&&$3=="v0.0.0"{print $2}' "$kube_gomod" | sort -u)"
[ -n "$staging" ] || die "found no staging modules in k8s.io/kubernetes go.mod"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "$kube_gomod")"
[ -n "$etcd_version" ] || die "k8s.io/kubernetes@$KUBE_VERSION does not require go.etcd.io/etcd/server/v3"
go_directive="$(awk '$1=="go"{print $2; exit}' "$kube_gomod")"

{
  echo "module envtest.local/build"
  echo
  echo "go ${go_directive:-1.26}"
  echo
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  echo
  for m in $staging; do echo "replace $m => $m $staging_version"; done
} > go.mod

log "downloading modules (etcd $etcd_version)"
GOFLAGS=-mod=mod go mod download k8s.io/kubernetes >&2 || die "module download failed"

date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit=module-$KUBE_VERSION"
done

log "compiling kube-apiserver $KUBE_VERSION"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$work/bin/kube-apiserver" \
  k8s.io/kubernetes/cmd/kube-apiserver >&2 || die "building kube-apiserver failed (see output above)"

log "compiling etcd $etcd_version"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$work/bin/etcd" \
  go.etcd.io/etcd/server/v3 >&2 || die "building etcd failed (see output above)"

"$work/bin/kube-apiserver" --version >&2 || die "the built kube-apiserver does not run"
"$work/bin/etcd" --version >&2 || die "the built etcd does not run"

publish "$work/bin"
