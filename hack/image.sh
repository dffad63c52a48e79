#!/usr/bin/env bash
# make image: the manager for each of PLATFORMS (static, stamped with VERSION
# and REVISION by VERSION_LDFLAGS), then its OCI image by bin/imagebuild
# (hack/tools/image), with no container engine: dist/image (an OCI image
# layout), dist/image.tar (the same, as one file) and dist/image.digest;
# pushed to each reference of IMAGE, if any. The image's creation time is
# the commit's, and the binary carries nothing of the machine or checkout
# (-trimpath, -buildvcs=false: VERSION and REVISION are stamped), so that a
# commit builds the same digest each time with the same Go.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
: "${VERSION:?set by make}" "${REVISION:?set by make}" "${VERSION_LDFLAGS:?set by make}"
platforms="${PLATFORMS:-linux/amd64 linux/arm64}"
dist="${DIST:-${root}/dist}"
source_url="${SOURCE_URL:-https://github.com/trainjob-operator/trainjob-operator}"
created="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
mkdir -p "${dist}"

args=()
for p in ${platforms}; do
	os="${p%%/*}" arch="${p#*/}"
	bin="${root}/bin/image/${os}_${arch//\//_}/manager"
	echo "image: building the manager for ${p} ..."
	CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch%%/*}" go build -trimpath -buildvcs=false -ldflags "-s -w ${VERSION_LDFLAGS}" -o "${bin}" ./cmd/manager
	args+=(--binary "${p}=${bin}")
done
for ref in ${IMAGE:-}; do
	args+=(--push "${ref}")
done
"${root}/bin/imagebuild" "${args[@]}" --version "${VERSION}" --revision "${REVISION}" \
	--source "${source_url}" --created "${created}" \
	--layout "${dist}/image" --archive "${dist}/image.tar" --digest-file "${dist}/image.digest" >/dev/null
echo "image: ${VERSION} is $(cat "${dist}/image.digest") (dist/image, dist/image.tar)"
