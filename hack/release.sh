#!/usr/bin/env bash
# make release: writes the release of VERSION into RELEASE_DIR (see docs/clusterctl.md).
#
# With RELEASE_SOURCE=<git revision> the release is made of that revision's tree (its manager,
# config/, metadata.yaml and templates/), with this tree's release tooling: how a release older
# than the tooling is made again, e.g. v0.1.0, the one `clusterctl upgrade` starts from. The
# revision's tree is exported into a temporary directory; the checkout is not touched.
#
# Called by the Makefile with KUSTOMIZE, HELM, CYCLONEDX_GOMOD, VERSION, RELEASE_DIR,
# RELEASE_IMAGE_REPOSITORY, RELEASE_SOURCE (empty: this tree) and RELEASE_METADATA (empty: the
# released tree's metadata.yaml).
set -euo pipefail

: "${KUSTOMIZE:?}" "${HELM:?}" "${CYCLONEDX_GOMOD:?}" "${VERSION:?}" "${RELEASE_DIR:?}"
: "${RELEASE_IMAGE_REPOSITORY:=localhost/dockyard}" "${RELEASE_SOURCE:=}" "${RELEASE_METADATA:=}"

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "$RELEASE_DIR")
if [ -e "$out" ]; then
	echo "release: $RELEASE_DIR exists: a release is written once; remove it to write it again" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

src=$repo
if [ -n "$RELEASE_SOURCE" ]; then
	rev=$(git -C "$repo" rev-parse --verify --quiet "$RELEASE_SOURCE^{commit}") ||
		{ echo "release: RELEASE_SOURCE=$RELEASE_SOURCE is no commit of $repo" >&2; exit 1; }
	src=$tmp/src
	mkdir -p "$src"
	git -C "$repo" archive "$rev" | tar -x -C "$src"
	echo "release: $VERSION of $(git -C "$repo" log -1 --format='%h (%cs) %s' "$rev" | cut -c1-100)"
fi

# The components as the release's tree renders them (its config/ and go.mod), by this tree's
# script, which leaves the tree alone.
(cd "$src" && KUSTOMIZE="$KUSTOMIZE" HELM="$HELM" VERSION="$VERSION" RENDER_ONLY="$tmp/components" \
	IMAGE_REPOSITORY="$RELEASE_IMAGE_REPOSITORY" "$repo/hack/release-manifests.sh" >/dev/null)

cd "$repo"
go run ./cmd/dockyard-build release --version "$VERSION" --repo "$src" --sbom-tool "$CYCLONEDX_GOMOD" \
	--components "$tmp/components/infrastructure-dockyard/$VERSION/infrastructure-components.yaml" \
	--metadata "$(realpath "${RELEASE_METADATA:-$src/metadata.yaml}")" --flavors "$src/templates" \
	--manager-image "$RELEASE_IMAGE_REPOSITORY/manager:$VERSION" --out "$out"
