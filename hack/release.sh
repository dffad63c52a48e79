#!/usr/bin/env bash
# make release: the release manifests, from config/ with kustomize (kubectl's):
#   dist/install.yaml   everything config/default installs (CRDs, RBAC, the
#                       webhook, the manager and its configuration, the
#                       runtimes), the manager's image by digest, every
#                       object labelled app.kubernetes.io/version=VERSION
#   dist/runtimes.yaml  the runtimes alone (config/runtimes), to update them
#                       apart from the rest
#   dist/kubeflow-sdk.yaml
#                       opt-in: the ConfigMap the Kubeflow SDK reads the
#                       version from (config/kubeflow-sdk), saying VERSION
#   dist/trainjob-operator-<version>.tgz
#                       the Helm chart (charts/), of the release's version,
#                       its default image the release's, by digest
#   dist/trainctl-<version>-<os>-<arch>.tar.gz
#                       trainctl (and LICENSE) for each of TRAINCTL_PLATFORMS
#                       (default linux/amd64 linux/arm64 darwin/amd64
#                       darwin/arm64; empty: none), with
#                       dist/trainctl-<version>.sha256 their SHA-256 sums
#   dist/trainjob.yaml  the krew plugin manifest of kubectl trainjob: those
#                       archives, as uploaded to RELEASE_URL (default: the
#                       GitHub release of the version), with their sums
# The image is the one make image built (dist/image.digest), in the
# repository IMAGE_REPO.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
: "${VERSION:?set by make}" "${IMAGE_REPO:?the image repository (registry.example.com/trainjob-operator)}"
dist="${DIST:-${root}/dist}"
kubectl="${KUBECTL:-${root}/bin/kubectl}"
if [ ! -f "${dist}/image.digest" ]; then
	echo "release: no ${dist}/image.digest: run make image first" >&2
	exit 1
fi
digest="$(cat "${dist}/image.digest")"
case "${digest}" in
sha256:*) ;;
*) echo "release: ${dist}/image.digest holds no digest: run make image first" >&2; exit 1 ;;
esac

overlay="$(mktemp -d "${root}/.release.XXXXXX")"
trap 'rm -rf "${overlay}"' EXIT
cat >"${overlay}/kustomization.yaml" <<KUSTOMIZATION
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../config/default
images:
  - name: trainjob-operator
    newName: ${IMAGE_REPO}
    digest: ${digest}
labels:
  - pairs:
      app.kubernetes.io/version: ${VERSION}
KUSTOMIZATION
{
	echo "# trainjob-operator ${VERSION}: kubectl apply --server-side -f install.yaml"
	echo "# The manager's image: ${IMAGE_REPO}:${VERSION} (${digest})."
	"${kubectl}" kustomize "${overlay}"
} >"${dist}/install.yaml"
{
	echo "# trainjob-operator ${VERSION}: the runtimes (install.yaml has them too)."
	"${kubectl}" kustomize "${root}/config/runtimes"
} >"${dist}/runtimes.yaml"
mkdir "${overlay}/kubeflow-sdk"
cat >"${overlay}/kubeflow-sdk/kustomization.yaml" <<KUSTOMIZATION
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../config/kubeflow-sdk
configMapGenerator:
  - name: kubeflow-trainer-public
    namespace: kubeflow-system
    behavior: merge
    literals:
      - kubeflow_trainer_version=${VERSION}
    options:
      disableNameSuffixHash: true
labels:
  - pairs:
      app.kubernetes.io/version: ${VERSION}
KUSTOMIZATION
{
	echo "# trainjob-operator ${VERSION}, opt-in: the ConfigMap the Kubeflow SDK reads the version from."
	"${kubectl}" kustomize "${overlay}/kubeflow-sdk"
} >"${dist}/kubeflow-sdk.yaml"
# The chart, versioned (SemVer without the v) and naming the image.
chart="${overlay}/trainjob-operator"
cp -R "${root}/charts/trainjob-operator" "${chart}"
edit() { # file, sed expressions...
	local file="$1"
	shift
	sed "$@" "${file}" >"${file}.new" && mv "${file}.new" "${file}"
}
edit "${chart}/Chart.yaml" -e "s|^version: .*|version: \"${VERSION#v}\"|" -e "s|^appVersion: .*|appVersion: \"${VERSION}\"|"
edit "${chart}/values.yaml" -e "s|^  repository: .*|  repository: ${IMAGE_REPO}|" -e "s|^  digest: .*|  digest: \"${digest}\"|"
"${HELM:-${root}/bin/helm}" package "${chart}" --destination "${dist}" >/dev/null
echo "release: ${VERSION}: ${dist}/install.yaml, ${dist}/runtimes.yaml, ${dist}/kubeflow-sdk.yaml, ${dist}/trainjob-operator-${VERSION#v}.tgz (image ${IMAGE_REPO}@${digest})"

# trainctl, an archive per platform, and the krew manifest that installs it
# as the kubectl plugin kubectl trainjob: krew links the archive's trainctl
# as kubectl-trainjob, a name trainctl answers to.
platforms="${TRAINCTL_PLATFORMS-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}"
[ -n "${platforms}" ] || exit 0
release_url="${RELEASE_URL:-https://github.com/trainjob-operator/trainjob-operator/releases/download/${VERSION}}"
# The version is the release's, whatever version the caller's environment
# stamps other builds with.
ldflags="-X github.com/trainjob-operator/trainjob-operator/internal/version.version=${VERSION} -X github.com/trainjob-operator/trainjob-operator/internal/version.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
sha256() { # file: its SHA-256, in hex
	if command -v sha256sum >/dev/null; then sha256sum "$1"; else shasum -a 256 "$1"; fi | cut -d' ' -f1
}
# The same bytes for the same sources: no owner, time or order of the
# machine that built them (GNU tar; others pack as they do).
tar_flags=()
if tar --version 2>/dev/null | grep -q GNU; then
	tar_flags=(--sort=name --owner=0 --group=0 --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-0}")
fi
sums="${dist}/trainctl-${VERSION}.sha256"
: >"${sums}"
manifest="${overlay}/trainjob.yaml"
cat >"${manifest}" <<MANIFEST
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: trainjob
spec:
  version: ${VERSION}
  homepage: https://github.com/trainjob-operator/trainjob-operator
  shortDescription: Look after Kubeflow TrainJobs
  description: |
    trainctl as kubectl trainjob, for the TrainJobs of trainjob-operator
    (trainer.kubeflow.org/v1alpha1): get lists them with their state,
    active deadline and deletion time (with kubectl's -o, -l and --watch);
    describe shows a TrainJob's timeline, Jobs, Pods and events; wait
    waits until TrainJobs complete, fail, run or meet a condition;
    uninstall and upgrade-check prepare the cluster for an uninstall or a
    switch from Kubeflow Trainer.
  platforms:
MANIFEST
for platform in ${platforms}; do
	os="${platform%/*}" arch="${platform#*/}"
	archive="trainctl-${VERSION}-${os}-${arch}.tar.gz"
	mkdir -p "${overlay}/${os}-${arch}"
	CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch}" go build -trimpath -ldflags "${ldflags} -s -w" \
		-o "${overlay}/${os}-${arch}/trainctl" ./cmd/trainctl
	cp LICENSE "${overlay}/${os}-${arch}/"
	tar "${tar_flags[@]}" -C "${overlay}/${os}-${arch}" -cf - trainctl LICENSE | gzip -n >"${dist}/${archive}"
	sum="$(sha256 "${dist}/${archive}")"
	echo "${sum}  ${archive}" >>"${sums}"
	cat >>"${manifest}" <<PLATFORM
    - selector:
        matchLabels:
          os: ${os}
          arch: ${arch}
      uri: ${release_url}/${archive}
      sha256: ${sum}
      bin: trainctl
PLATFORM
done
mv "${manifest}" "${dist}/trainjob.yaml"
echo "release: ${VERSION}: trainctl for ${platforms} in ${dist}/trainctl-${VERSION}-*.tar.gz, ${sums}; the krew manifest ${dist}/trainjob.yaml (archives at ${release_url})"
