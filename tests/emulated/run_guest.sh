#!/usr/bin/env bash
# Boots the emulated arm64 machine (QEMU's `virt` board, its emulated PMUv3, Debian's arm64 kernel) with an
# initramfs holding the cross-built test binaries, and saves the console log for check_result.sh.
#   run_guest.sh <dir>
# <dir>/guest-bin/   the aarch64 test binaries (cross_build.sh puts them there)
# <dir>/tests.list   "<binary> <pass>" lines, the runs the guest makes (see guest_init.sh)
# <dir>/sysroot/     optional: arm64 libraries unpacked from Debian packages, searched for the binaries' needs
# Writes <dir>/guest.log (the console). Exits non-zero, with the log printed, when the guest does not finish.
# SELFPERF_GUEST_TIMEOUT (seconds, default 600) cuts a hung boot; SELFPERF_GUEST_ICOUNT=0 drops -icount.
set -euo pipefail
dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "run_guest: $*" >&2; exit 1; }

command -v qemu-system-aarch64 >/dev/null || fail "qemu-system-aarch64 not found: install qemu-system-arm (./setup.sh emulated does)"
command -v cpio >/dev/null || fail "cpio not found: install cpio (./setup.sh emulated does)"
command -v aarch64-linux-gnu-readelf >/dev/null || fail "aarch64-linux-gnu-readelf not found: install binutils-aarch64-linux-gnu (./setup.sh emulated does)"
[ -s "$dir/tests.list" ] || fail "$dir/tests.list is missing or empty: configure tests/emulated with cmake first"
[ -d "$dir/guest-bin" ] || fail "$dir/guest-bin is missing: the cross build (emulated_cross_build) did not run"

bash "$here/fetch_guest_parts.sh" "$dir"

root=$dir/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,lib,tests}
cp "$dir/busybox" "$root/bin/busybox"
cp "$here/guest_init.sh" "$root/init"
chmod 755 "$root/init" "$root/bin/busybox"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
printf '/bin/sh\n' > "$root/etc/shells"

# Only the binaries the list names, so a stale one in guest-bin cannot run.
: > "$root/tests.list"
while read -r name pass; do
  [ -n "$name" ] || continue
  if [ -x "$dir/guest-bin/$name" ]; then
    cp -n "$dir/guest-bin/$name" "$root/tests/$name"
    echo "$name $pass" >> "$root/tests.list"
  else
    echo "run_guest: $name was not cross-built; its runs report no result" >&2
  fi
done < "$dir/tests.list"
# What the guest scripts run (samples, the preload library, the tools): beside the tests, their libraries found below.
[ -d "$dir/guest-bin/support" ] && cp -n "$dir/guest-bin/support/"* "$root/tests/" 2>/dev/null

# The shared libraries the binaries need, found in the sysroot first, then in the cross toolchain's libc.
libdirs=()
for d in "$dir/sysroot/lib/aarch64-linux-gnu" "$dir/sysroot/usr/lib/aarch64-linux-gnu" "$dir/sysroot/usr/lib" \
         /usr/aarch64-linux-gnu/lib /usr/aarch64-linux-gnu/lib64; do
  [ -d "$d" ] && libdirs+=("$d")
done
find_lib() {
  local d
  for d in "${libdirs[@]}"; do
    [ -e "$d/$1" ] && { echo "$d/$1"; return 0; }
  done
  return 1
}
declare -A copied=()
pending=("$root"/tests/*)
while [ ${#pending[@]} -gt 0 ]; do
  elf=${pending[0]}
  pending=("${pending[@]:1}")
  [ "$(od -An -tx1 -N4 "$elf" | tr -d ' \n')" = 7f454c46 ] || continue  # a guest script: no libraries
  interp=$(aarch64-linux-gnu-readelf -l "$elf" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  needed=$(aarch64-linux-gnu-readelf -d "$elf" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for lib in $needed ${interp:+$(basename "$interp")}; do
    [ -n "${copied[$lib]:-}" ] && continue
    path=$(find_lib "$lib") || fail "$(basename "$elf") needs $lib, found in none of: ${libdirs[*]}"
    cp -L "$path" "$root/lib/$lib"
    copied[$lib]=1
    pending+=("$root/lib/$lib")
  done
done
ln -s lib "$root/lib64" 2>/dev/null || true

(cd "$root" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -1 > "$dir/initrd.gz"
echo "== initramfs: $(du -h "$dir/initrd.gz" | cut -f1), $(ls "$root/tests" | wc -l) test binaries, ${#copied[@]} libraries"

# -icount shift=0: one emulated instruction a nanosecond, so `instructions` exists and counts exactly and the
# cycle counter follows the instruction count (sampling periods and counts do not depend on the host's load).
icount=(-icount shift=0)
[ "${SELFPERF_GUEST_ICOUNT:-1}" = 0 ] && icount=()
timeout_s=${SELFPERF_GUEST_TIMEOUT:-600}
log=$dir/guest.log
echo "== booting the emulated arm64 machine (timeout ${timeout_s}s; console: $log)"
start=$(date +%s)
set +e
timeout -k 5 "$timeout_s" qemu-system-aarch64 -machine virt -cpu max -smp 2 -m 1024 -nographic -no-reboot \
  -nic none "${icount[@]}" -kernel "$dir/Image" -initrd "$dir/initrd.gz" \
  -append "console=ttyAMA0 rdinit=/init selfperf.test_timeout=${SELFPERF_GUEST_TEST_TIMEOUT:-180}" \
  < /dev/null > "$log" 2>&1
status=$?
set -e
end=$(date +%s)
echo "== guest ran $((end - start)) s (emulated: no timing in it is a performance figure), qemu exit status $status"
grep -E '^SELFPERF-(GUEST|RESULT)' "$log" | tr -d '\r' || true
if ! grep -q '^SELFPERF-DONE' "$log"; then
  echo "---- console log ($log) ----"
  tr -d '\r' < "$log" | tail -n 200
  [ $status -eq 124 ] || [ $status -eq 137 ] && fail "the guest did not finish within ${timeout_s}s (cut by timeout)"
  fail "the guest stopped before running its list (qemu exit status $status)"
fi
