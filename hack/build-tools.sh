#!/usr/bin/env bash
# Builds the development and test binaries pinned in hack/tools into bin/.
# A binary is rebuilt only when it is missing or when the inputs that pin it
# (its module's go.mod/go.sum, and the wrapper source for etcd) changed since
# it was built. Prints one line per binary.
#
# Usage: hack/build-tools.sh [name ...]   (default: every tool but those built
# only on request, see on_request)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${BIN_DIR:-${root}/bin}"
tools="${root}/hack/tools"
stamps="${bin}/.stamps"
mkdir -p "${bin}" "${stamps}"

# Versions reported by the binaries; kept in step with hack/tools/go.mod.
kube_version="$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "${tools}/go.mod")"
kube_minor="$(echo "${kube_version}" | cut -d. -f2)"
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube_minor} -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=${kube_version}"
kwok_ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${kube_version#v}"
kueue_version="$(awk '$1 == "sigs.k8s.io/kueue" { print $2 }' "${tools}/kueue/go.mod")"
kueue_ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${kueue_version}"
# Helm reports its version, and renders for the Kubernetes release of its
# client modules when it has no cluster to ask (helm template, helm lint).
helm_version="$(grep -oE 'helm.sh/helm/v3 v[^ ]+' "${tools}/helm/go.mod" | cut -d' ' -f2)"
helm_kube_minor="$(awk '$1 == "k8s.io/client-go" { print $2 }' "${tools}/helm/go.mod" | cut -d. -f2)"
helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${helm_version}"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	helm_ldflags+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${helm_kube_minor}"
done
# Prometheus 3.x is published as Go module v0.3xx.y: v0.316.0 is 3.16.0.
prometheus_version="$(awk '$1 == "github.com/prometheus/prometheus" { print $2 }' "${tools}/prometheus/go.mod" | sed -E 's/^v0\.3([0-9][0-9])\.([0-9]+).*/3.\1.\2/; s/^3\.0([0-9])/3.\1/')"
prometheus_ldflags="-s -w -X github.com/prometheus/common/version.Version=${prometheus_version}"
# The real node's kubelet runs at the control plane's release: its module
# must pin the same k8s.io/kubernetes.
kubelet_version="$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "${tools}/kubelet/go.mod")"
if [ "${kubelet_version}" != "${kube_version}" ]; then
	echo "tools: hack/tools/kubelet pins k8s.io/kubernetes ${kubelet_version}, the control plane ${kube_version}: make them equal" >&2
	exit 1
fi
containerd_version="$(awk '$1 == "github.com/containerd/containerd/v2" { print $2 }' "${tools}/containerd/go.mod")"
containerd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=${containerd_version} -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
coredns_version="$(awk '$1 == "github.com/coredns/coredns" { print $2 }' "${tools}/coredns/go.mod")"
# The btrfs, devmapper and zfs snapshotters need cgo and are not used: the
# real node's containerd unpacks images with overlayfs.
containerd_tags="no_btrfs no_devmapper no_zfs"

# Built only when named: Kueue takes a quarter of an hour to build cold, and
# only make dev KUEUE=1 and make test's Kueue suite run it; the coscheduling
# scheduler only the gang e2e test; the image builder only make image; Helm
# only the chart's checks; Kubeflow Trainer and JobSet only make bench's
# Kubeflow side; Prometheus only make dev PROMETHEUS=1 and its e2e suite;
# the real node's kubelet, container runtime, CNI plugins and DNS (real,
# below) only make dev REAL=1 and the real node's e2e suite.
on_request=(kueue coscheduler imagebuild helm kubeflow-trainer jobset prometheus
	kubelet containerd containerd-shim-runc-v2 ctr cni/bridge cni/host-local cni/loopback coredns)
# real names every tool of the real node (make dev REAL=1).
real=(kubelet containerd containerd-shim-runc-v2 ctr cni/bridge cni/host-local cni/loopback coredns)

# One of Kueue's dependencies, sigs.k8s.io/scheduler-library, is missing from
# the checksum database (its lookup answers 404): go.sum holds its hash, and
# writing go.sum again (go get, go mod tidy in hack/tools/kueue) must not ask.
export GONOSUMDB="${GONOSUMDB:+${GONOSUMDB},}sigs.k8s.io/scheduler-library"

# name | module dir (relative to hack/tools) | package | ldflags | build tags
catalog() {
	cat <<CATALOG
etcd|.|github.com/trainjob-operator/trainjob-operator/hack/tools/etcd|-s -w
kube-apiserver|.|k8s.io/kubernetes/cmd/kube-apiserver|${kube_ldflags}
kube-controller-manager|.|k8s.io/kubernetes/cmd/kube-controller-manager|${kube_ldflags}
kube-scheduler|.|k8s.io/kubernetes/cmd/kube-scheduler|${kube_ldflags}
kubectl|.|k8s.io/kubernetes/cmd/kubectl|${kube_ldflags}
kwok|.|sigs.k8s.io/kwok/cmd/kwok|${kwok_ldflags}
kwokctl|.|sigs.k8s.io/kwok/cmd/kwokctl|${kwok_ldflags}
controller-gen|.|sigs.k8s.io/controller-tools/cmd/controller-gen|-s -w
golangci-lint|golangci-lint|github.com/golangci/golangci-lint/v2/cmd/golangci-lint|-s -w
kueue|kueue|sigs.k8s.io/kueue/cmd/kueue|${kueue_ldflags}
coscheduler|coscheduling|github.com/trainjob-operator/trainjob-operator/hack/tools/coscheduling|-s -w
imagebuild|image|github.com/trainjob-operator/trainjob-operator/hack/tools/image|-s -w
helm|helm|helm.sh/helm/v3/cmd/helm|${helm_ldflags}
kubeflow-trainer|kubeflow|github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager|-s -w
jobset|kubeflow|sigs.k8s.io/jobset|-s -w
prometheus|prometheus|github.com/prometheus/prometheus/cmd/prometheus|${prometheus_ldflags}|remove_all_sd
kubelet|kubelet|k8s.io/kubernetes/cmd/kubelet|${kube_ldflags}
containerd|containerd|github.com/containerd/containerd/v2/cmd/containerd|${containerd_ldflags}|${containerd_tags}
containerd-shim-runc-v2|containerd|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2|${containerd_ldflags}|${containerd_tags}
ctr|containerd|github.com/containerd/containerd/v2/cmd/ctr|${containerd_ldflags}|${containerd_tags}
cni/bridge|cni|github.com/containernetworking/plugins/plugins/main/bridge|-s -w
cni/host-local|cni|github.com/containernetworking/plugins/plugins/ipam/host-local|-s -w
cni/loopback|cni|github.com/containernetworking/plugins/plugins/main/loopback|-s -w
coredns|coredns|github.com/trainjob-operator/trainjob-operator/hack/tools/coredns|-s -w -X github.com/coredns/coredns/coremain.GitCommit=${coredns_version}
CATALOG
}

fingerprint() { # module dir, ldflags
	local dir="$1" flags="$2"
	{
		cat "${tools}/${dir}/go.mod" "${tools}/${dir}/go.sum"
		[ "${dir}" = "." ] && cat "${tools}/etcd/main.go"
		[ "${dir}" = "coscheduling" ] && cat "${tools}/coscheduling/main.go"
		[ "${dir}" = "image" ] && cat "${tools}"/image/*.go
		[ "${dir}" = "coredns" ] && cat "${tools}/coredns/main.go"
		go env GOVERSION
		echo "${flags}"
	} | sha256sum | cut -d' ' -f1
}

wanted=()
for w in "$@"; do
	if [ "$w" = "real" ]; then wanted+=("${real[@]}"); else wanted+=("$w"); fi
done
want() {
	local w
	if [ "${#wanted[@]}" -eq 0 ]; then
		for w in "${on_request[@]}"; do [ "$w" = "$1" ] && return 1; done
		return 0
	fi
	for w in "${wanted[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}

total=0 built=0
while IFS='|' read -r name dir pkg flags tags; do
	want "${name}" || continue
	total=$((total + 1))
	fp="$(fingerprint "${dir}" "${flags}${tags:+ tags ${tags}}")"
	if [ -x "${bin}/${name}" ] && [ "$(cat "${stamps}/${name}" 2>/dev/null)" = "${fp}" ]; then
		echo "tools: ${name}: up to date"
		continue
	fi
	echo "tools: ${name}: building ${pkg} ..."
	start=$(date +%s)
	mkdir -p "$(dirname "${stamps}/${name}")"
	(cd "${tools}/${dir}" && CGO_ENABLED=0 go build -trimpath -tags "${tags}" -ldflags "${flags}" -o "${bin}/${name}.tmp" "${pkg}")
	mv "${bin}/${name}.tmp" "${bin}/${name}"
	echo "${fp}" > "${stamps}/${name}"
	built=$((built + 1))
	echo "tools: ${name}: built in $(( $(date +%s) - start ))s"
done < <(catalog)

if [ "${total}" -eq 0 ]; then
	echo "tools: unknown tool name(s): ${wanted[*]}" >&2
	exit 2
fi
echo "tools: ${built} built, $((total - built)) up to date, in ${bin}"
