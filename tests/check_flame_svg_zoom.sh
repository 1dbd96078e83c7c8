#!/usr/bin/env bash
# selfperf's SVG flame graph is interactive in a browser: headless Chromium opens the SVG itself with a small
# driver script added at its end, which clicks a frame where it is drawn (elementFromPoint), clicks
# "Reset zoom", and answers the Search prompt, recording rectangles, labels and fills into the DOM;
# --dump-dom prints them and Python checks them:
#   - a click on burn_beta (30 %) makes it fill the width, its callers stay full width, its siblings
#     burn_alpha and burn_gamma are hidden, and its label is re-cut for the new width;
#   - Reset zoom puts every frame back where it was drawn;
#   - searching burn_(alpha|gamma) (a regular expression) highlights exactly those frames and shows 70.0 %.
# Then made-up stacks where 1000 siblings too narrow to draw come first (flame_svg_from_folded): zoomed on
# their parent, the frames after them start after the gap they leave (the writer's data-x), not at its left.
# Usage: check_flame_svg_zoom.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
program="$build/samples/perf_data_three_functions"
source "${2:?source dir}/tests/chromium_helpers.sh"
find_chromium
command -v python3 >/dev/null || { echo "skipped: python3 is needed to read chromium's output"; exit 77; }
[[ -x $program ]] || { echo "FAIL: build perf_data_three_functions first"; exit 1; }
from_folded="$build/tests/flame_svg_from_folded"
[[ -x $from_folded ]] || { echo "FAIL: build flame_svg_from_folded first"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
"$program" "$tmp/three.data" 50 > /dev/null   # 500 samples: alpha 50 %, beta 30 %, gamma 20 %

driver=$(cat <<'JS'
<script type="text/ecmascript"><![CDATA[
(() => {
  const probe = {steps: [], errors: {}};
  // Frames as the picture has them (a <g> whose first child is its <title>), with or without the script.
  const frame = (part) => Array.from(document.querySelectorAll('g'))
      .find((g) => g.firstElementChild && g.firstElementChild.tagName === 'title' &&
                   g.firstElementChild.textContent.includes(part));
  const box = (part) => {
    const g = frame(part), r = g.querySelector('rect').getBoundingClientRect(), t = g.querySelector('text');
    return {x: r.x, width: r.width, label: t ? t.textContent : '', fill: g.querySelector('rect').getAttribute('fill'),
            title: g.querySelector('title').textContent};
  };
  const parts = ['all (', 'run_workload', 'burn_alpha', 'burn_beta', 'burn_gamma'];
  const snapshot = () => Object.fromEntries(parts.map((p) => [p, box(p)]));
  // A click where a user would click: whatever element is drawn at the middle of the target.
  const click = (el) => {
    const r = el.getBoundingClientRect(), x = r.x + r.width / 2, y = r.y + r.height / 2;
    const hit = document.elementFromPoint(x, y);
    if (!hit) throw new Error('nothing drawn at ' + x + ',' + y);
    hit.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true, clientX: x, clientY: y}));
  };
  const step = (name, action) => {
    try {
      action();
      probe.steps.push(name);
    } catch (e) {
      probe.errors[name] = e.message;
    }
  };
  step('before', () => { probe.before = snapshot(); });
  step('zoom', () => { click(frame('burn_beta').querySelector('rect')); probe.zoomed = snapshot(); });
  step('reset', () => {
    const reset = document.getElementById('reset-zoom');
    if (!reset) throw new Error('no Reset zoom control');
    click(reset);
    probe.reset = snapshot();
  });
  step('search', () => {
    const search = document.getElementById('search');
    if (!search) throw new Error('no Search control');
    window.prompt = () => 'burn_(alpha|gamma)';
    click(search);
    probe.searched = snapshot();
    probe.matched = document.getElementById('matched').textContent;
  });
  document.documentElement.setAttribute('data-probe', JSON.stringify(probe));
})();
]]></script>
JS
)
# Opens SVG with DRIVER added before its end in chromium and prints the DOM the driver left.
drive() {
  python3 - "$1" "$tmp/driven.svg" "$2" <<'PY'
import sys
svg = open(sys.argv[1]).read()
at = svg.rindex('</svg>')
open(sys.argv[2], 'w').write(svg[:at] + sys.argv[3] + '\n' + svg[at:])
PY
  headless_chromium "$tmp" --dump-dom "file://$tmp/driven.svg" 2> chromium.log || true
}
drive "$tmp/three.data.svg" "$driver" > dom.txt
grep -q 'data-probe=' dom.txt || { tail -20 chromium.log; echo "FAIL: chromium ran no driver script"; exit 1; }

python3 - dom.txt <<'PY'
import html, json, re, sys
dom = open(sys.argv[1]).read()
probe = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', dom).group(1)))
print('steps done:', ', '.join(probe['steps']))
failures = []
def check(ok, what):
    if not ok:
        failures.append(what)
def near(a, b, tolerance=0.6):
    return abs(a - b) <= tolerance

before = probe.get('before')
if before is None:
    print('FAIL: the frames were not found: ' + probe['errors'].get('before', '?'))
    sys.exit(1)
full = before['all (']['width']
beta_name = before['burn_beta']['title'].rsplit(' (', 1)[0]
beta = before['burn_beta']
print(f"before: all {full:.1f} px, burn_beta {beta['width']:.1f} px, label {beta['label']!r}")
check(before['burn_beta']['width'] < 0.5 * full, 'burn_beta is not drawn at its 30 % before the click')

zoomed = probe.get('zoomed')
if zoomed is None:
    failures.append('the click could not be made: ' + probe['errors'].get('zoom', '?'))
else:
    beta = zoomed['burn_beta']
    print(f"zoomed on burn_beta: x {beta['x']:.1f}, width {beta['width']:.1f} px, label {beta['label']!r}; "
          f"alpha {zoomed['burn_alpha']['width']:.1f} px, gamma {zoomed['burn_gamma']['width']:.1f} px")
    check(near(beta['width'], full) and near(beta['x'], before['all (']['x']),
          'the clicked frame does not fill the width')
    check(near(zoomed['run_workload']['width'], full), 'its caller run_workload is not kept full width')
    check(near(zoomed['all (']['width'], full), 'the root is not kept full width')
    check(zoomed['burn_alpha']['width'] == 0 and zoomed['burn_gamma']['width'] == 0,
          'its siblings burn_alpha and burn_gamma are not hidden')
    # 1180 px holds about 166 glyphs: the whole name, where 354 px cut it.
    check(beta['label'] == beta_name, f"label not re-cut for the new width: {beta['label']!r}")

reset = probe.get('reset')
if reset is None:
    failures.append('reset failed: ' + probe['errors'].get('reset', '?'))
else:
    for part, was in before.items():
        now = reset[part]
        check(near(now['x'], was['x']) and near(now['width'], was['width']) and now['label'] == was['label'],
              f'{part} not back after Reset zoom: {now} (was {was})')

searched = probe.get('searched')
if searched is None:
    failures.append('search failed: ' + probe['errors'].get('search', '?'))
else:
    print(f"search burn_(alpha|gamma): {probe['matched']!r}")
    highlight = 'rgb(230,0,230)'
    for part in ('burn_alpha', 'burn_gamma'):
        check(searched[part]['fill'] == highlight, f'{part} matches but is not highlighted')
    for part in ('all (', 'run_workload', 'burn_beta'):
        check(searched[part]['fill'] == before[part]['fill'], f'{part} does not match but its colour changed')
    check(probe['matched'] == 'Matched: 70.0%', f"matched share {probe['matched']!r}, expected 70.0 % (50 + 20)")

if failures:
    print('FAIL:\n  ' + '\n  '.join(failures))
    sys.exit(1)
PY

python3 - > gap.folded <<'PY'
for i in range(1000):
    print(f'main;a_narrow{i:04d} 80')  # sorted first; 0.07 px each of 1360000: left out, 69 px in all
print('main;b_wide 400000\nmain;b_wide;inner 200000\nmain;c_mid 320000\nmain;c_mid;leaf 160000\nother 200000')
PY
"$from_folded" gap.folded gap.svg
gap_driver=$(cat <<'JS'
<script type="text/ecmascript"><![CDATA[
(() => {
  const probe = {};
  const frame = (name) => Array.from(document.querySelectorAll('g'))
      .find((g) => g.firstElementChild && g.firstElementChild.tagName === 'title' &&
                   g.firstElementChild.textContent.startsWith(name + ' ('));
  const boxes = () => Object.fromEntries(['all', 'main', 'b_wide', 'inner', 'c_mid', 'leaf', 'other'].map((n) => {
    const r = frame(n).querySelector('rect').getBoundingClientRect();
    return [n, {x: r.x, width: r.width}];
  }));
  const click = (name) => {
    const r = frame(name).querySelector('rect').getBoundingClientRect();
    const x = r.x + r.width / 2, y = r.y + r.height / 2;
    document.elementFromPoint(x, y).dispatchEvent(
        new MouseEvent('click', {bubbles: true, cancelable: true, clientX: x, clientY: y}));
  };
  try {
    probe.before = boxes();
    click('main');
    probe.main = boxes();
    click('c_mid');
    probe.c_mid = boxes();
  } catch (e) {
    probe.error = e.message;
  }
  document.documentElement.setAttribute('data-probe', JSON.stringify(probe));
})();
]]></script>
JS
)
drive gap.svg "$gap_driver" > gap-dom.txt
grep -q 'data-probe=' gap-dom.txt || { tail -20 chromium.log; echo "FAIL: chromium ran no driver script"; exit 1; }
python3 - gap-dom.txt <<'PY'
import html, json, re, sys
probe = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', open(sys.argv[1]).read()).group(1)))
if 'error' in probe or 'c_mid' not in probe:
    print('FAIL: the driver stopped: ' + probe.get('error', '?'))
    sys.exit(1)
left, full = probe['before']['all']['x'], probe['before']['all']['width']
# Offsets and counts in samples, from the folded stacks: the narrow siblings take the first 80000 of main.
main = 1160000
expected = {'main': {'b_wide': (80000, 600000), 'inner': (80000, 200000), 'c_mid': (680000, 480000),
                     'leaf': (680000, 160000)},
            'c_mid': {'c_mid': (680000, 480000), 'leaf': (680000, 160000)}}
failures = []
for zoom, frames in expected.items():
    start, count = (0, main) if zoom == 'main' else expected['main']['c_mid']
    scale = full / count
    for name, (at, width) in frames.items():
        want_x, want_w = left + (at - start) * scale, width * scale
        got = probe[zoom][name]
        print(f'zoomed on {zoom}: {name} at {got["x"]:.1f} px, {got["width"]:.1f} wide '
              f'(expected {want_x:.1f}, {want_w:.1f})')
        if abs(got['x'] - want_x) > 0.6 or abs(got['width'] - want_w) > 0.6:
            failures.append(f'zoomed on {zoom}, {name} is at {got}, expected x {want_x:.1f} width {want_w:.1f}')
    if probe[zoom]['other']['width'] != 0:
        failures.append(f'zoomed on {zoom}, "other" (outside it) is not hidden')
if probe['c_mid']['b_wide']['width'] != 0:
    failures.append('zoomed on c_mid, its sibling b_wide is not hidden')
if failures:
    print('FAIL:\n  ' + '\n  '.join(failures))
    sys.exit(1)
PY
echo "ok: a click zooms, Reset zoom restores, Search highlights, frames after left-out ones placed (in chromium)"
