#!/usr/bin/env bash
# The frame_loop and order_book samples run, exit 0 and print what they promise (histograms, tails, budgets).
set -euo pipefail
build=$1
for sample in frame_loop order_book; do
  if [ ! -x "$build/samples/$sample" ]; then
    echo "skipped: $build/samples/$sample is not built (SELFPERF_BUILD_SAMPLES=OFF?)"
    exit 77
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$build/samples/frame_loop" "$work/frames.svg" > "$work/frame_loop.out"
for want in "frame wall time: count 600" "p99.9" "600 frames; over budget" "over-budget frames" "page-faults:u" "wrote "; do
  grep -qF -- "$want" "$work/frame_loop.out" || { echo "frame_loop output lacks '$want':"; cat "$work/frame_loop.out"; exit 1; }
done
head -c 4 "$work/frames.svg" | grep -q '<svg' || { echo "frame_loop did not write an SVG"; exit 1; }
tail -n 1 "$work/frames.svg" | grep -q '</svg>' || { echo "frame_loop SVG is truncated"; exit 1; }

"$build/samples/order_book" > "$work/order_book.out"
for want in "per-message clock: " "one CounterGroup read" "p99.9" "p99.99" "add (aggressive)" "cancel" "100 frames"; do
  grep -qF -- "$want" "$work/order_book.out" || { echo "order_book output lacks '$want':"; cat "$work/order_book.out"; exit 1; }
done
# Per-message cycles: counted where rdpmc works, otherwise the reason is given.
grep -Eq '^per-message cycles(:u via rdpmc|: not measured \(.+\))' "$work/order_book.out" ||
  { echo "order_book says nothing about per-message cycles:"; cat "$work/order_book.out"; exit 1; }
# The book must actually trade: a broken matcher shows up as zero trades.
grep -Eq 'book: [1-9][0-9]* trades' "$work/order_book.out" || { echo "order_book made no trades:"; cat "$work/order_book.out"; exit 1; }
echo "frame_loop and order_book ran"
