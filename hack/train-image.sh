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
# configure makes the root file system what Kubeflow's runtimes expect of
# their images. deepspeed-distributed runs the nodes' sshd as the user
# mpiuser (uid 1000) with /home/mpiuser/.sshd_config, listening on port
# 2222, its host key the TrainJob's key this controller mounts in
# /home/mpiuser/.ssh, and its launcher's mpirun logs into them there: the
# ssh client connects to port 2222 and takes any host key (the hosts are
# the TrainJob's Pods, made moments ago), writing no known_hosts in the
# read-only mount; sshd reads the mounted files whatever their owner and
# mode (StrictModes no), as in Kubeflow's MPI images.
configure() {
	local r="$1"
	chroot "${r}" useradd --create-home --uid 1000 --shell /bin/bash mpiuser
	mkdir -p "${r}/run/sshd"
	sed -i -e 's/^#* *StrictHostKeyChecking .*/    StrictHostKeyChecking no/' "${r}/etc/ssh/ssh_config"
	printf '    UserKnownHostsFile /dev/null\n    Port 2222\n' >>"${r}/etc/ssh/ssh_config"
	sed -i -e 's/^#*StrictModes .*/StrictModes no/' -e 's/^#*Port .*/Port 2222/' "${r}/etc/ssh/sshd_config"
	printf 'PidFile /home/mpiuser/sshd.pid\nHostKey /home/mpiuser/.ssh/id_rsa\nStrictModes no\nPort 2222\n' >"${r}/home/mpiuser/.sshd_config"
	chroot "${r}" chown mpiuser:mpiuser /home/mpiuser/.sshd_config
	# Debian's PyTorch 1.13 predates its Python 3.11, whose Flag enums no
	# longer iterate over their zero and multi-bit members: torchrun's
	# parsing of --redirects and --tee then returns None for their default
	# 0 and torchrun fails as it starts its workers. The value is parsed
	# as the enum's own constructor does.
	local std="${r}/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py"
	sed -i 's/^            v = int(v)$/            return Std(int(v))/' "${std}"
	grep -q '^            return Std(int(v))$' "${std}" || { echo "train-image: torchrun's Std.from_str is not as expected: ${std}" >&2; return 1; }
}

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
	configure "${rootfs}"
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
