# Sourced by the checks of selfperf record -p (check_record_pid.sh, check_record_pid_dwarf.sh) after they set
# $selfperf and $target. Not a test itself: ctest runs check_*.sh only.
# Skips (exit 77) where the kernel has no perf events or perf is absent; then works in a fresh directory,
# removed at exit, killing every pid the check appended to $pids.
[[ -x $selfperf && -x $target ]] || { echo "FAIL: build selfperf_cli and $(basename "$target") first"; exit 1; }
if [[ ! -e /proc/sys/kernel/perf_event_paranoid ]]; then
  echo "skipped: this kernel has no perf events"; exit 77
fi
command -v perf >/dev/null 2>&1 || { echo "skipped: perf absent (linux-perf), nothing to check the file with"; exit 77; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }

# Polls (no fixed sleep) until the command succeeds; fails after ~60 s.
wait_for() {  # description command...
  local what=$1; shift
  for _ in $(seq 1 6000); do "$@" && return 0; read -t 0.01 <> <(:) || true; done
  fail "timed out waiting for $what"
}
