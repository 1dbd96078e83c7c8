// The flame graph's script: zoom, search and reset in the manner of FlameGraph's flamegraph.pl, written for
// this writer's layout. It adds its controls itself, so the file without scripts is the plain picture.
#include "output/flame_graph_svg_script.hpp"

#include <cstdio>

namespace selfperf::detail {
namespace {

// A JavaScript string literal that is also safe inside CDATA and XML: quotes, backslashes, brackets, markup
// characters and control characters as \u escapes.
std::string js_string(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || c == '\\' || c == '\'' || c == '<' || c == '>' || c == '&' || c == ']') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", byte);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Everything it needs is read back from the drawing: no per-frame data beyond what the picture has (and data-x
// where a left-out sibling leaves a gap), so the script costs a fixed ~4 KB however many frames there are.
// Frames are in pre-order, so a frame's subtree is the run after it up to the first frame not above it.
constexpr const char* kBody = R"JS(
  const NS = 'http://www.w3.org/2000/svg';
  const HIGHLIGHT = 'rgb(230,0,230)';
  const group = document.getElementById('frames');
  if (!group) return;
  const svg = group.ownerSVGElement || document.documentElement;
  const frames = [], open = [], byGroup = new Map();
  for (const g of Array.from(group.children)) {
    const rect = g.querySelector('rect'), title = g.querySelector('title');
    if (!rect || !title) continue;
    // The name is what precedes " (count COUNT_NAME, p%)", whatever brackets the name or the unit has.
    const info = title.textContent, unit = info.lastIndexOf(' ' + COUNT_NAME + ', ');
    const cut = info.lastIndexOf(' (', unit < 0 ? info.length : unit);
    const text = g.querySelector('text');
    const f = {g, rect, text, info, name: info.slice(0, cut), count: parseFloat(info.slice(cut + 2)),
               y: parseFloat(rect.getAttribute('y')), x: rect.getAttribute('x'), width: rect.getAttribute('width'),
               fill: rect.getAttribute('fill'), label: text ? text.textContent : null,
               labelX: text ? text.getAttribute('x') : null, index: frames.length, end: 0};
    while (open.length && open[open.length - 1].y <= f.y) open.pop().end = f.index;
    f.parent = open.length ? open[open.length - 1] : null;
    f.at = g.hasAttribute('data-x') ? Number(g.getAttribute('data-x')) : f.parent ? f.parent.next : 0;
    f.next = f.at;
    if (f.parent) f.parent.next = f.at + f.count;
    open.push(f);
    frames.push(f);
    byGroup.set(g, f);
  }
  for (const f of open) f.end = frames.length;
  if (!frames.length) return;
  const root = frames[0], left = parseFloat(root.x), full = parseFloat(root.width);

  const style = document.createElementNS(NS, 'style');
  style.textContent = '#frames g{cursor:pointer} #frames g.ancestor{opacity:0.6}' +
      ' .control{pointer-events:auto;cursor:pointer;fill:rgb(0,0,160)} .control:hover{text-decoration:underline}';
  svg.appendChild(style);
  const label = (x, y, anchor, cls, content) => {
    const t = document.createElementNS(NS, 'text');
    t.setAttribute('x', x);
    t.setAttribute('y', y);
    t.setAttribute('text-anchor', anchor);
    if (cls) t.setAttribute('class', cls);
    t.textContent = content;
    svg.appendChild(t);
    return t;
  };
  const resetZoom = label(10, 24, 'start', 'control', 'Reset zoom');
  resetZoom.id = 'reset-zoom';
  resetZoom.style.display = 'none';
  const searchButton = label(WIDTH - 10, 24, 'end', 'control', 'Search');
  searchButton.id = 'search';
  const details = label(10, 44, 'start', null, '');
  details.id = 'details';
  const matched = label(WIDTH - 10, 44, 'end', null, '');
  matched.id = 'matched';

  // The writer's rule: about 0.59 em a glyph, cut with ".." when it does not fit, nothing under 3 glyphs.
  const fit = (name, width) => {
    const room = Math.floor(width / (FONT * 0.59));
    if (room < 3) return '';
    return name.length <= room ? name : name.slice(0, room - 2) + '..';
  };
  const place = (f, x, width) => {
    f.rect.setAttribute('x', x.toFixed(1));
    f.rect.setAttribute('width', width.toFixed(1));
    const text = fit(f.name, width);
    if (!f.text) {
      if (!text) return;
      f.text = document.createElementNS(NS, 'text');
      f.text.setAttribute('y', (f.y + FRAME_HEIGHT - 5).toFixed(1));
      f.g.appendChild(f.text);
    }
    f.text.setAttribute('x', (x + 3).toFixed(1));
    f.text.textContent = text;
  };

  const unzoom = () => {
    for (const f of frames) {
      f.g.removeAttribute('style');
      f.g.removeAttribute('class');
      f.rect.setAttribute('x', f.x);
      f.rect.setAttribute('width', f.width);
      if (f.label !== null) {
        f.text.setAttribute('x', f.labelX);
        f.text.textContent = f.label;
      } else if (f.text) {
        f.text.remove();
        f.text = null;
      }
    }
    resetZoom.style.display = 'none';
  };
  // The frame fills the width, its callers stay full width (dimmed) below it, everything else is hidden.
  const zoom = (target) => {
    if (target === root) return unzoom();
    const scale = full / target.count;
    const mode = new Array(frames.length).fill(0);
    for (let a = target.parent; a; a = a.parent) mode[a.index] = 1;
    for (let i = target.index; i < target.end; ++i) mode[i] = 2;
    for (const f of frames) {
      const m = mode[f.index];
      if (m === 0) {
        f.g.style.display = 'none';
        continue;
      }
      f.g.removeAttribute('style');
      if (m === 1) {
        f.g.setAttribute('class', 'ancestor');
        place(f, left, full);
      } else {
        f.g.removeAttribute('class');
        place(f, left + (f.at - target.at) * scale, f.count * scale);
      }
    }
    resetZoom.style.display = '';
  };

  let searching = false;
  const resetSearch = () => {
    for (const f of frames) f.rect.setAttribute('fill', f.fill);
    matched.textContent = '';
    searchButton.textContent = 'Search';
    searching = false;
  };
  // A regular expression, or the plain text where it is not one; the share counts a frame under a matching
  // caller once (as flamegraph.pl does), over the frames drawn.
  const search = (term) => {
    let test;
    try {
      const re = new RegExp(term);
      test = (s) => re.test(s);
    } catch (e) {
      test = (s) => s.includes(term);
    }
    let total = 0, covered = 0;
    for (const f of frames) {
      const hit = test(f.name);
      f.rect.setAttribute('fill', hit ? HIGHLIGHT : f.fill);
      if (hit && f.index >= covered) {
        total += f.count;
        covered = f.end;
      }
    }
    matched.textContent = 'Matched: ' + (100 * total / root.count).toFixed(1) + '%';
    searchButton.textContent = 'Reset search';
    searching = true;
  };
  const askSearch = () => {
    if (searching) return resetSearch();
    const term = window.prompt('Search frames (a regular expression, or plain text):', '');
    if (term) search(term);
  };

  const frameOf = (el) => {
    while (el && el.parentNode !== group) el = el.parentNode;
    return el ? byGroup.get(el) : undefined;
  };
  group.addEventListener('click', (e) => {
    const f = frameOf(e.target);
    if (f) zoom(f);
  });
  group.addEventListener('mouseover', (e) => {
    const f = frameOf(e.target);
    details.textContent = f ? f.info : '';
  });
  group.addEventListener('mouseout', () => { details.textContent = ''; });
  resetZoom.addEventListener('click', unzoom);
  searchButton.addEventListener('click', askSearch);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'F3' || ((e.ctrlKey || e.metaKey) && e.key === 'f')) {
      e.preventDefault();
      askSearch();
    } else if (e.key === 'Escape') {
      unzoom();
      if (searching) resetSearch();
    }
  });
)JS";

}  // namespace

std::string flame_graph_svg_script(unsigned width, unsigned font_size, unsigned frame_height,
                                   const std::string& count_name) {
  std::string script = "<script type=\"text/ecmascript\"><![CDATA[\n(() => {\n  'use strict';\n  const WIDTH = ";
  script += std::to_string(width) + ", FONT = " + std::to_string(font_size) +
            ", FRAME_HEIGHT = " + std::to_string(frame_height) + ", COUNT_NAME = " + js_string(count_name) + ";";
  script += kBody;
  script += "})();\n]]></script>\n";
  return script;
}

}  // namespace selfperf::detail
