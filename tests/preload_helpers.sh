# The start that the checks of the preload library share (check_profile_*, check_record_*, check_preload_*).
# Sourced, after `set -euo pipefail`:
#   preload_setup BUILD_DIR [FILE...]  sets $build and $lib (the preload library); each FILE (a path in the
#                                      build dir) must exist; skips (77) where the kernel has no perf events;
#                                      makes a directory $tmp, enters it, and removes it at exit
#   skip_sanitized REASON              skips (77) in a sanitizer build, saying REASON
#   sanitized                          true in a sanitizer build (its preload library pulls in a sanitizer's
#                                      runtime, which other programs cannot load)
#   need_perf REASON                   skips (77) where perf (linux-perf) is not installed, saying REASON
#   fail TEXT                          says "FAIL: TEXT" and exits 1

fail() { echo "FAIL: $*"; exit 1; }

preload_setup() {
  build=$(cd "${1:?build dir}" && pwd)
  shift
  lib=$build/lib/libselfperf_profile.so
  local f
  for f in lib/libselfperf_profile.so "$@"; do
    [[ -e $build/$f ]] || fail "$build/$f is missing: build it first"
  done
  [[ -e /proc/sys/kernel/perf_event_paranoid ]] || { echo "skipped: this kernel has no perf events"; exit 77; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cd "$tmp"
}

sanitized() {
  local libs
  libs=$(ldd "$lib" 2> /dev/null || true)  # not `ldd | grep -q`: an early exit of grep can SIGPIPE ldd
  [[ $libs == *libasan* || $libs == *libtsan* ]]
}

skip_sanitized() {
  if sanitized; then echo "skipped: sanitizer build: $1"; exit 77; fi
}

need_perf() {
  command -v perf > /dev/null 2>&1 || { echo "skipped: perf absent (linux-perf), $1"; exit 77; }
}
