# Sourced by the checks that open our SVGs in headless Chromium (check_flame_svg_chromium.sh,
# check_flame_svg_zoom.sh). Not a test itself: ctest runs check_*.sh only.

# Sets $browser, or skips the check (exit 77) where no Chromium is installed.
find_chromium() {
  browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
  if [[ -z $browser ]]; then
    echo "skipped: chromium is not installed (apt-get install chromium)"
    exit 77
  fi
}

# headless_chromium PROFILE_DIR ARGS...: one headless run, offline, its profile in PROFILE_DIR (HOME too:
# Chromium writes under it, and nobody's may not be writable); killed after 120 s.
headless_chromium() {
  local profile=$1
  shift
  HOME=$profile timeout -k 10 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile/profile" \
    --window-size=1200,800 "$@"
}
