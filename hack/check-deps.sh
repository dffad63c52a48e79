#!/usr/bin/env bash
# The product's binaries never link the local cluster and fault injection
# (internal/dev) nor the test helpers; trainctl, the user's CLI, links the API,
# the lifecycle rules and what it shows, not the manager's controllers,
# webhook or certificate rotation. Fails naming the package that crossed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mod=github.com/trainjob-operator/trainjob-operator
fail=0
forbid() { # binary, forbidden package...
	local bin="$1"; shift
	local deps
	deps="$(go list -deps "./cmd/${bin}")"
	for p in "$@"; do
		if grep -qx "${mod}/${p}" <<<"${deps}"; then
			echo "cmd/${bin} links ${p}: $(go list -deps "./cmd/${bin}" | grep -c .) packages; see hack/check-deps.sh"
			fail=1
		fi
	done
}
tooling=(internal/dev internal/util/testing)
forbid manager "${tooling[@]}"
forbid trainctl "${tooling[@]}" internal/manager internal/controller/trainjob internal/controller/ttl internal/webhook internal/certs
exit "${fail}"
