#!/usr/bin/env bash
# make_sysroot.sh SYSROOT_DIR: the arm64 libraries selfperf links (and the runtime a guest needs to run the
# cross-built programs), unpacked from Debian's own arm64 packages into SYSROOT_DIR. Nothing is installed on
# the host: a multiarch install of these packages would upgrade host packages (linux-perf among them).
# Needs root once (dpkg --add-architecture arm64; apt-get update) when the host's apt does not know arm64 yet.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SYSROOT_DIR" >&2; exit 2; }
sysroot=$1

# -dev packages for the headers, .pc files and .so links; the runtime libraries they and the guest need.
packages=(libunwind-dev libunwind8 libdw-dev libdw1 libelf-dev libelf1 zlib1g zlib1g-dev liblzma5 liblzma-dev
          libzstd1 libbz2-1.0 libc6 libstdc++6 libgcc-s1)
# Architecture-independent (header-only) packages the build finds in the sysroot: apt takes them without :arm64.
all_packages=(nlohmann-json3-dev)
stamp=$sysroot/.selfperf-packages
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${packages[*]} ${all_packages[*]}" ]; then exit 0; fi

command -v dpkg >/dev/null && command -v apt-get >/dev/null || { echo "make_sysroot: needs Debian's dpkg and apt-get" >&2; exit 1; }
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  [ "$(id -u)" -eq 0 ] || { echo "make_sysroot: apt does not know arm64; as root: dpkg --add-architecture arm64 && apt-get update" >&2; exit 1; }
  dpkg --add-architecture arm64
  apt-get update -qq
fi

debs=$(mktemp -d)
chmod 755 "$debs"  # apt-get download drops privileges to _apt, which must write here
trap 'rm -rf "$debs"' EXIT
arm64=("${packages[@]/%/:arm64}" "${all_packages[@]}")
if ! (cd "$debs" && apt-get download -qq "${arm64[@]}"); then
  # An index older than the arm64 architecture (or than the archive's current versions): refresh it once.
  [ "$(id -u)" -eq 0 ] && apt-get update -qq
  (cd "$debs" && apt-get download -qq "${arm64[@]}") ||
    { echo "make_sysroot: cannot download the arm64 packages ${packages[*]} from the Debian archive" >&2; exit 1; }
fi

rm -rf "$sysroot"
mkdir -p "$sysroot"
for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
# Some -dev links are absolute (liblzma.so -> /lib/aarch64-linux-gnu/liblzma.so.5…): point them inside the
# sysroot, relatively, so that the sysroot still works when moved or copied into a guest.
find "$sysroot" -type l | while read -r link; do
  target=$(readlink "$link")
  case $target in /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot$target")" "$link" ;; esac
done
echo "${packages[*]} ${all_packages[*]}" > "$stamp"
echo "make_sysroot: arm64 sysroot ready in $sysroot"
