#!/usr/bin/env bash
# Every Go file of the repository starts with the license header of
# hack/boilerplate.go.txt (after a //go:build line, if it has one).
# With --fix, adds it where it is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

header="$(cat hack/boilerplate.go.txt)"
missing=()
while IFS= read -r f; do
	[ -f "$f" ] || continue
	if ! head -c 4096 "$f" | grep -qF "Copyright The trainjob-operator Authors."; then
		missing+=("$f")
	fi
done < <(git ls-files --cached --others --exclude-standard '*.go')

if [ "${1:-}" = "--fix" ]; then
	for f in "${missing[@]}"; do
		{ printf '%s\n\n' "${header}"; cat "$f"; } >"$f.tmp" && mv "$f.tmp" "$f"
	done
	exit 0
fi
if [ "${#missing[@]}" -gt 0 ]; then
	echo "Missing the license header of hack/boilerplate.go.txt (run hack/check-license.sh --fix):"
	printf '  %s\n' "${missing[@]}"
	exit 1
fi
