#!/usr/bin/env bash
# Fetches the emulated arm64 machine's kernel and busybox from the Debian archive (apt-get download: nothing
# is installed on the host) into <dir>/debs, once, and unpacks <dir>/Image and <dir>/busybox from them.
#   fetch_guest_parts.sh <dir>
# Needs the arm64 architecture in apt (`./setup.sh emulated` adds it: dpkg --add-architecture arm64 && apt-get update).
set -euo pipefail
dir=$1
mkdir -p "$dir/debs"
cd "$dir/debs"

have() { compgen -G "$1" >/dev/null; }
fail() { echo "fetch_guest_parts: $*" >&2; exit 1; }

command -v apt-get >/dev/null || fail "apt-get not found: the emulated machine's parts come from the Debian archive"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  fail "apt does not know the arm64 architecture; run ./setup.sh emulated (or: dpkg --add-architecture arm64 && apt-get update)"
fi

# The newest 6.1 arm64 kernel apt offers; its /boot/vmlinuz-* is a plain Image that QEMU boots as is.
if ! have 'linux-image-6.1.0-*-arm64-unsigned_*_arm64.deb'; then
  kernel=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-arm64-unsigned$' | cut -d' ' -f1 | sort -V | tail -1)
  [ -n "$kernel" ] || fail "no linux-image-6.1.0-*-arm64-unsigned package in apt's lists (run apt-get update after dpkg --add-architecture arm64)"
  echo "== downloading $kernel from the Debian archive"
  apt-get download -q "$kernel:arm64" 2>&1 | grep -v "unsandboxed" || true
  have 'linux-image-6.1.0-*-arm64-unsigned_*_arm64.deb' || fail "apt-get download $kernel:arm64 failed"
fi
if ! have 'busybox-static_*_arm64.deb'; then
  echo "== downloading busybox-static:arm64 from the Debian archive"
  apt-get download -q busybox-static:arm64 2>&1 | grep -v "unsandboxed" || true
  have 'busybox-static_*_arm64.deb' || fail "apt-get download busybox-static:arm64 failed"
fi

kernel_deb=$(ls linux-image-6.1.0-*-arm64-unsigned_*_arm64.deb | sort -V | tail -1)
busybox_deb=$(ls busybox-static_*_arm64.deb | sort -V | tail -1)
if [ ! -s ../Image ] || [ "$kernel_deb" -nt ../Image ]; then
  rm -rf unpack && mkdir unpack
  dpkg-deb --fsys-tarfile "$kernel_deb" | tar -x -C unpack --wildcards './boot/vmlinuz-*'
  mv unpack/boot/vmlinuz-* ../Image
  touch ../Image  # tar kept the package's date: newer than the .deb now, so the next run reuses it
  rm -rf unpack
fi
if [ ! -s ../busybox ] || [ "$busybox_deb" -nt ../busybox ]; then
  rm -rf unpack && mkdir unpack
  dpkg-deb -x "$busybox_deb" unpack
  mv unpack/bin/busybox ../busybox
  touch ../busybox
  rm -rf unpack
fi
echo "== guest kernel: $kernel_deb; busybox: $busybox_deb"
