#!/usr/bin/env bash
# Release the modules of this repository at one version, in the order Go
# needs: the root module first, then the provider modules and the
# compatibility module (compat/, module path sigs.k8s.io/multicluster-runtime),
# which require the root by that released version (never through a replace,
# which Go ignores in a dependency).
#
#   hack/release.sh root VERSION        tag the root module (then push the tag)
#   hack/release.sh providers VERSION   once the proxy serves the root at VERSION:
#                                       bump the providers and compat to it,
#                                       commit, tag them (compat/VERSION included)
#   hack/release.sh compat-providers VERSION
#                                       once the proxy serves the providers at
#                                       VERSION: bump compat/providers/kind and
#                                       compat/providers/cluster-api (upstream's
#                                       paths of the separate providers) to
#                                       them, commit, tag them
#
# VERSION is a semantic version such as v0.1.0. Nothing is pushed: each step
# prints the `git push` to run. docs/contributing/releasing.md explains the
# steps and how to check a release from outside the workspace.
set -euo pipefail

ROOT_MODULE=github.com/mcruntime/multicluster-runtime
# The modules that require the root: the providers with modules of their own,
# and the compatibility module, whose tag compat/VERSION lets a program write
# replace sigs.k8s.io/multicluster-runtime => github.com/mcruntime/multicluster-runtime/compat VERSION.
PROVIDERS=(providers/kind providers/cluster-api compat)
# The providers with modules of their own, whose compatibility modules
# (compat/<dir>) require them: released once the proxy serves them.
SEPARATE_PROVIDERS=(providers/kind providers/cluster-api)
PLUGIN=cmd/kubebuilder-plugin

die() { echo "release: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: hack/release.sh root|providers|compat-providers VERSION"
step=$1 version=$2
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "version $version is not a semantic version like v0.1.0"

cd "$(git rev-parse --show-toplevel)"
[ -z "$(git status --porcelain)" ] || die "the work tree has changes: commit or stash them first"

case $step in
root)
	git rev-parse -q --verify "refs/tags/$version" >/dev/null && die "tag $version exists"
	git tag -a "$version" -m "multicluster-runtime $version"
	echo "tagged $version at $(git rev-parse --short HEAD)"
	echo "next: git push origin $version"
	echo "then, once 'GOWORK=off go list -m $ROOT_MODULE@$version' answers: hack/release.sh providers $version"
	;;
providers)
	git rev-parse -q --verify "refs/tags/$version" >/dev/null || die "tag the root first: hack/release.sh root $version"
	GOWORK=off GOFLAGS=-mod=mod go list -m "$ROOT_MODULE@$version" >/dev/null ||
		die "the module proxy does not serve $ROOT_MODULE@$version yet: push the tag and retry"
	for dir in "${PROVIDERS[@]}"; do
		git rev-parse -q --verify "refs/tags/$dir/$version" >/dev/null && die "tag $dir/$version exists"
		# Outside the workspace, as a user's build sees the module: the
		# requirement and its checksum come from the proxy.
		(cd "$dir" && go mod edit -require="$ROOT_MODULE@$version" && GOWORK=off go mod tidy && GOWORK=off go build ./...)
	done
	# Inside the workspace, the version the providers require is this checkout.
	sed -i -E "s#^replace $ROOT_MODULE v[^ ]+ => \./\$#replace $ROOT_MODULE $version => ./#" go.work
	grep -q "^replace $ROOT_MODULE $version => ./\$" go.work || die "go.work: no 'replace $ROOT_MODULE <version> => ./' line to update"
	go build ./... && for dir in "${PROVIDERS[@]}"; do (cd "$dir" && go build ./...); done
	git add go.work "${PROVIDERS[@]/%//go.mod}" "${PROVIDERS[@]/%//go.sum}"
	git commit -q -m "providers: require $ROOT_MODULE $version"
	tags=()
	for dir in "${PROVIDERS[@]}"; do
		git tag -a "$dir/$version" -m "$dir $version"
		tags+=("$dir/$version")
	done
	# The kubebuilder plugin requires none of them, but the projects it
	# scaffolds require the root and providers/cluster-api at its own version.
	git rev-parse -q --verify "refs/tags/$PLUGIN/$version" >/dev/null && die "tag $PLUGIN/$version exists"
	git tag -a "$PLUGIN/$version" -m "$PLUGIN $version"
	tags+=("$PLUGIN/$version")
	echo "committed the bump and tagged ${tags[*]} at $(git rev-parse --short HEAD)"
	echo "next: git push origin HEAD ${tags[*]}"
	;;
compat-providers)
	for dir in "${PROVIDERS[@]}"; do
		git rev-parse -q --verify "refs/tags/$dir/$version" >/dev/null || die "tag the providers first: hack/release.sh providers $version"
	done
	for dir in "${SEPARATE_PROVIDERS[@]}"; do
		module="$ROOT_MODULE/$dir"
		GOWORK=off GOFLAGS=-mod=mod go list -m "$module@$version" >/dev/null ||
			die "the module proxy does not serve $module@$version yet: push the tags and retry"
		git rev-parse -q --verify "refs/tags/compat/$dir/$version" >/dev/null && die "tag compat/$dir/$version exists"
		(cd "compat/$dir" && go mod edit -require="$module@$version" && GOWORK=off go mod tidy && GOWORK=off go build ./...)
		sed -i -E "s#^replace $module v[^ ]+ => \./$dir\$#replace $module $version => ./$dir#" go.work
		grep -q "^replace $module $version => ./$dir\$" go.work || die "go.work: no 'replace $module <version> => ./$dir' line to update"
	done
	(cd compat && go build ./...)
	git add go.work "${SEPARATE_PROVIDERS[@]/#/compat/}"
	git commit -q -m "compat: the separate providers' compatibility modules require them at $version"
	tags=()
	for dir in "${SEPARATE_PROVIDERS[@]}"; do
		git tag -a "compat/$dir/$version" -m "compat/$dir $version"
		tags+=("compat/$dir/$version")
	done
	echo "committed the bump and tagged ${tags[*]} at $(git rev-parse --short HEAD)"
	echo "next: git push origin HEAD ${tags[*]}"
	;;
*) die "unknown step $step: root, providers or compat-providers" ;;
esac
