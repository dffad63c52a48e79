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
