#!/usr/bin/env bash
# One run of the emulated guest as a ctest result: prints what the run printed in the guest and exits
# 0 (pass), 77 (skip) or 1 (fail, or no result line: the guest stopped before it or the binary was not built).
#   check_guest_result.sh <guest.log> <name> <pass>
set -euo pipefail
log=$1 name=$2 pass=$3
[ -f "$log" ] || { echo "no guest console log at $log: emulated_boot did not run"; exit 1; }
tr -d '\r' < "$log" | awk -v n="$name" -v p="$pass" '
  $1 == "SELFPERF-BEGIN" && $2 == n && $3 == p { on = 1 }
  on { print }
  $1 == "SELFPERF-RESULT" && $2 == n && $3 == p { on = 0 }'
result=$(tr -d '\r' < "$log" | awk -v n="$name" -v p="$pass" '$1 == "SELFPERF-RESULT" && $2 == n && $3 == p { print $4 }')
case "$result" in
  pass) exit 0 ;;
  skip) exit 77 ;;
  fail) exit 1 ;;
  "") echo "no SELFPERF-RESULT line for $name ($pass) in $log: it was not cross-built or the guest stopped before it"
      exit 1 ;;
  *) echo "unreadable result '$result' for $name ($pass)"; exit 1 ;;
esac
