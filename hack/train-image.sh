#!/usr/bin/env bash
# Builds the training image of the dev cluster's real node,
# localhost/trainjob-operator/train-cpu:latest, without a container engine
# or a registry: a Debian root file system made by debootstrap with Python,
# PyTorch (CPU), OpenMPI and OpenSSH, mpi4py and XGBoost, packed as an OCI
# image archive by the project's image builder (bin/imagebuild --rootfs).
#
# The archive is kept under a key of what makes it (the suite, the mirror,
# the packages and this script): a second run with the same inputs reuses
# it. Debian's packages change under a suite, so the same key may hold
# newer packages than a build elsewhere; delete the cache to rebuild.
# Needs root (debootstrap). Prints the archive's path last.
#
# Usage: hack/train-image.sh   (TRAIN_IMAGE_CACHE: where archives are kept)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${TRAIN_IMAGE_CACHE:-${root}/.cache/train-image}"
suite=bookworm
mirror=http://deb.debian.org/debian
packages=(python3 python3-torch openmpi-bin openssh-server python3-mpi4py python3-xgboost)

key="$({ printf '%s\n' "${suite}" "${mirror}" "${packages[@]}"; cat "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-16)"
dir="${cache}/${key}"
archive="${dir}/train-cpu.tar"
if [ -f "${archive}" ]; then
	echo "train-image: up to date (${key})" >&2
	echo "${archive}"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "train-image: debootstrap needs root" >&2
	exit 1
fi
if ! command -v debootstrap >/dev/null; then
	echo "train-image: installing debootstrap (apt-get) ..." >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
mkdir -p "${dir}"
rootfs="${dir}/rootfs"
start=$(date +%s)
if [ ! -f "${dir}/rootfs.done" ]; then
	rm -rf "${rootfs}"
	echo "train-image: debootstrap ${suite} with ${packages[*]} ..." >&2
	# debootstrap mounts /proc in the root file system with mount(8), which
	# makes util-linux's table /run/mount: removed after if it is new.
	[ -d /run/mount ] || trap 'rmdir /run/mount 2>/dev/null || true' EXIT
	debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" "${suite}" "${rootfs}" "${mirror}" >"${dir}/debootstrap.log" 2>&1 ||
		{ tail -20 "${dir}/debootstrap.log" >&2; exit 1; }
	# What a container does not need: downloaded packages, indexes, logs.
	rm -rf "${rootfs}"/var/cache/apt/archives/*.deb "${rootfs}"/var/lib/apt/lists/* "${rootfs}"/var/log/*
	touch "${dir}/rootfs.done"
	echo "train-image: root file system in $(( $(date +%s) - start ))s ($(du -sh "${rootfs}" | cut -f1))" >&2
fi
echo "train-image: packing ${rootfs} as an OCI image ..." >&2
pack=$(date +%s)
"${root}/hack/build-tools.sh" imagebuild >/dev/null
# The creation time is fixed: the archive's key, not its digest, says
# what it holds.
"${root}/bin/imagebuild" --rootfs "linux/$(go env GOARCH)=${rootfs}" --title train-cpu --version latest \
	--created 0 --archive "${archive}.tmp" >/dev/null
mv "${archive}.tmp" "${archive}"
rm -rf "${rootfs}" "${dir}/rootfs.done"
echo "train-image: packed in $(( $(date +%s) - pack ))s, $(du -h "${archive}" | cut -f1) (${key})" >&2
echo "${archive}"
