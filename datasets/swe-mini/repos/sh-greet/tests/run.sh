#!/bin/sh
# Runs every tests/t_*.sh case and prints "PASS name" or "FAIL name" per case.
cd "$(dirname "$0")/.." || exit 2
rc=0
for t in tests/t_*.sh; do
	name=$(basename "$t" .sh)
	name=${name#t_}
	if out=$(sh "$t" 2>&1); then
		echo "PASS $name"
	else
		printf "%s\n" "$out" >&2
		echo "FAIL $name"
		rc=1
	fi
done
exit $rc
