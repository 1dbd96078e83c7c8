#!/usr/bin/env bash
# The .deb (cpack -G DEB): its Depends name the Debian runtime packages, every file lies under /usr, and a
# consumer builds against it with find_package and pkg-config: with its files extracted (dpkg -x) elsewhere,
# and, as root, after a real `dpkg -i` (maintainer scripts and dependency checks included) then `dpkg -r`.
# That install must not change the machine, even when the test is killed half-way, nor take dpkg's lock from a
# concurrent apt-get: it runs in a private mount namespace where /usr, /etc and /var/lib/dpkg are overlays
# whose writes land in a temporary dir and vanish with the namespace (SELFPERF_TEST_NO_DPKG_INSTALL=1: skip it).
set -euo pipefail
build=$1
. "$(dirname "$0")/install_helpers.sh"
# cpack runs as this user: it builds the preinstall target in the build dir (as `cpack` does for a packager).
[ -w "$build" ] || skip "needs root here: cpack builds its preinstall target in $build, which this user cannot write"
san=$(sanitize_flags "$build")
[ -z "$san" ] || skip "a .deb is made from a plain build, this one is built with $san (the plain build runs this)"
for tool in cpack dpkg dpkg-deb dpkg-shlibdeps pkg-config; do
  command -v $tool >/dev/null || skip "no $tool (Debian: build-essential, cmake, pkg-config)"
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cpack_log=$work/cpack.log
if ! (cd "$work" && cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/pkg" > "$cpack_log" 2>&1); then
  cat "$cpack_log"; fail "cpack -G DEB"
fi
deb=$(echo "$work"/pkg/selfperf_*.deb)
test -f "$deb" || { cat "$cpack_log"; fail "no .deb in $work/pkg"; }

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
names=$(echo "$depends" | tr ',' '\n' | sed 's/^ *//; s/ .*//')
for dep in libdw1 libelf1 libunwind8 libstdc++6 libc6 libdw-dev libunwind-dev; do
  grep -qxF "$dep" <<< "$names" || fail "Depends lacks $dep"
done
outside=$(dpkg-deb -c "$deb" | awk '{print $6}' | grep -v -e '^\./$' -e '^\./usr/' || true)
[ -z "$outside" ] || fail "files outside /usr: $outside"

flags=$(sanitize_flags "$build")
mkdir "$work/app"
cat > "$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(selfperf REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE selfperf::selfperf selfperf::thread_hook)
CM
write_consumer_main "$work/app/main.cpp"
# consume <prefix or ''>: find_package consumer, then the same object linked with pkg-config's flags.
consume() {
  local prefix=$1 pcpath=
  [ -z "$prefix" ] || pcpath=$(echo "$prefix"/lib*/pkgconfig)
  rm -rf "$work/app/build"
  cmake -S "$work/app" -B "$work/app/build" ${prefix:+"-DCMAKE_PREFIX_PATH=$prefix"} \
    -DCMAKE_BUILD_TYPE="$(build_type "$build")" \
    ${flags:+"-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags"} > "$work/app.log" 2>&1 \
    || { cat "$work/app.log"; fail "find_package(selfperf) against the .deb's files${prefix:+ in $prefix}"; }
  cmake --build "$work/app/build" >/dev/null
  "$work/app/build/consumer"
  pc() { PKG_CONFIG_PATH=$pcpath pkg-config "$@" selfperf; }
  # shellcheck disable=SC2046
  g++ $flags -o "$work/app/pc" "$work/app/build/CMakeFiles/consumer.dir/main.cpp.o" "$(pc --variable=thread_hook)" $(pc --libs)
  "$work/app/pc" > /dev/null
}

installed=0
if [ "$(id -u)" -eq 0 ] && [ "${SELFPERF_TEST_NO_DPKG_INSTALL:-}" != 1 ]; then
  mkdir -p "$work/ovl/probe/"{lower,upper,work,merged}
  if unshare --mount --propagation private mount -t overlay overlay -o "lowerdir=$work/ovl/probe/lower,upperdir=$work/ovl/probe/upper,workdir=$work/ovl/probe/work" "$work/ovl/probe/merged" 2>/dev/null; then
    export work deb flags build
    export -f consume fail build_type
    # shellcheck disable=SC2016
    unshare --mount --propagation private bash -euo pipefail -c '
      for dir in /usr /etc /var/lib/dpkg; do
        name=${dir//\//_}
        mkdir -p "$work/ovl/up$name" "$work/ovl/work$name"
        mount -t overlay overlay -o "lowerdir=$dir,upperdir=$work/ovl/up$name,workdir=$work/ovl/work$name" "$dir"
      done
      dpkg --log=/dev/null -i "$deb" > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
      dpkg -s selfperf | grep -q "^Status: install ok installed" || fail "dpkg does not list selfperf as installed"
      test -x /usr/bin/selfperf-doctor && test -f /usr/lib/libselfperf_profile.so || fail "programs missing under /usr"
      consume ""
      dpkg --log=/dev/null -r selfperf > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -r"; }
      [ ! -e /usr/include/selfperf ] && [ ! -e /usr/lib/cmake/selfperf ] || fail "dpkg -r left files behind"
    ' && installed=1 || fail "dpkg -i / consumer / dpkg -r in the private mount namespace"
  else
    echo "note: no private mount namespace with overlayfs here (unshare --mount, mount -t overlay): dpkg -i not run"
  fi
fi
if [ $installed = 0 ]; then
  dpkg -x "$deb" "$work/x"
  consume "$work/x/usr"
  echo "deb: $(basename "$deb") extracted with dpkg -x, consumers built and ran"
else
  echo "deb: $(basename "$deb") installed with dpkg -i (private overlay), consumers built and ran, removed with dpkg -r"
fi
