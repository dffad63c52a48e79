#!/usr/bin/env bash
# Installs what the dev cluster's real node (make dev REAL=1) needs from the
# machine and cannot build from Go modules: runc, the OCI runtime that
# containerd's shim runs containers with (it needs cgo and libseccomp), and
# iproute2 (ip), with which trainjob-dev makes and removes the Pods'
# bridge. Debian's packages, installed only when missing. Needs root, as the
# real node does.
set -euo pipefail

missing=()
command -v runc >/dev/null || missing+=(runc)
command -v ip >/dev/null || missing+=(iproute2)
if [ "${#missing[@]}" -eq 0 ]; then
	echo "real-node: runc $(runc --version | awk 'NR==1 { print $3 }') and ip are installed"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "real-node: ${missing[*]} missing, and installing needs root: the real node runs as root (make dev REAL=1)" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null; then
	echo "real-node: ${missing[*]} missing and no apt-get here: install them with this system's package manager" >&2
	exit 1
fi
echo "real-node: installing ${missing[*]} (apt-get) ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "real-node: installed ${missing[*]}"
