#!/usr/bin/env bash
# selfperf's SVG flame graph renders in a browser: headless Chromium screenshots it, and the PNG must show
# the frames (several colours, a good share of non-background pixels), not a blank or error page.
# Usage: check_flame_svg_chromium.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
program="$build/samples/perf_data_three_functions"
source "${2:?source dir}/tests/chromium_helpers.sh"
find_chromium
command -v python3 >/dev/null || { echo "skipped: python3 is needed to decode the screenshot"; exit 77; }
[[ -x $program ]] || { echo "FAIL: build perf_data_three_functions first"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
"$program" "$tmp/three.data" 50 > /dev/null
headless_chromium "$tmp" --screenshot="$tmp/out.png" "file://$tmp/three.data.svg" > chromium.log 2>&1 || true
[[ -s $tmp/out.png ]] || { cat chromium.log; echo "FAIL: chromium wrote no screenshot"; exit 1; }

python3 - "$tmp/out.png" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, width = 8, b'', 0
while pos < len(data):
    length, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b'IHDR':
        width, height, depth, colour, _, _, interlace = struct.unpack('>IIBBBBB', body)
        assert depth == 8 and colour in (2, 6) and interlace == 0, f'unexpected PNG format {depth}/{colour}'
        channels = 3 if colour == 2 else 4
    elif kind == b'IDAT':
        idat += body
    pos += 12 + length
raw = zlib.decompress(idat)
stride = width * channels
rows, prev, i = [], bytearray(stride), 0
def paeth(a, b, c):
    p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)
for _ in range(height):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - channels] if x >= channels else 0
        b = prev[x]; c = prev[x - channels] if x >= channels else 0
        line[x] = (line[x] + (0, a, b, (a + b) // 2, paeth(a, b, c))[f]) & 0xff
    rows.append(line); prev = line
colours, coloured = set(), 0
for line in rows:
    for x in range(0, stride, channels):
        rgb = tuple(line[x:x + 3]); colours.add(rgb)
        r, g, b = rgb
        if r > 180 and b < 120 and r - b > 60:  # the warm palette of the frames
            coloured += 1
share = coloured / (width * height)
print(f'{width}x{height}, {len(colours)} colours, {share:.1%} frame-coloured pixels')
assert len(colours) > 10, 'image is (nearly) one colour'
assert share > 0.02, 'no flame graph frames visible'
PY
echo "ok: chromium renders the flame graph"
