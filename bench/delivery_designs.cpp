#include "delivery_designs.hpp"

#include <csignal>

#include "selfperf/error.hpp"

namespace selfperf_bench {

const char* design_name(Design d) {
  switch (d) {
    case Design::plain: return "plain";
    case Design::ours_ring: return "ring";
    case Design::ours_signal: return "no_ring";
    case Design::sigtrap: return "sigtrap";
  }
  return "?";
}

RunningDesign::RunningDesign(const Options& o) {
  const std::uint64_t period = 1'000'000'000 / o.hz;  // cpu-clock counts ns
  if (o.design == Design::sigtrap) {
    SigtrapSampler::Options t;
    t.event = kDeliveryEvent;
    t.period = period;
    t.unwinder = o.unwinder;
    t.buffer_capacity = o.buffer_capacity;
    t.max_threads = o.max_threads;
    t.inherit_thread = o.inherit_thread;
    trap_.emplace(t);
    trap_->attach_this_thread();
    trap_->start();
  } else if (o.design == Design::ours_ring || o.design == Design::ours_signal) {
    selfperf::Sampler::Options s;
    s.event = kDeliveryEvent;
    s.period = period;
    s.unwinder = o.unwinder;
    s.buffer_capacity = o.buffer_capacity;
    s.rearm = o.design == Design::ours_ring ? selfperf::Sampler::Rearm::ring_buffer
                                            : selfperf::Sampler::Rearm::overflow_signal;
    s.attach_new_threads = o.attach_new_threads;
    s.signal = o.signal;
    ours_.emplace(s);
    ours_->start();
    ours_->attach_this_thread();
  } else {
    throw selfperf::Error("RunningDesign: Design::plain samples nothing");
  }
}

void RunningDesign::attach() {
  if (ours_) ours_->attach_this_thread();
  if (trap_) trap_->attach_this_thread();
}

void RunningDesign::detach() {
  if (ours_) ours_->detach_this_thread();
}

int RunningDesign::signal() const { return trap_ ? SIGTRAP : ours_->signal_number(); }

RunningDesign::Result RunningDesign::stop() {
  Result r;
  if (ours_) {
    const selfperf::Sampler::Totals t = ours_->stop();
    ours_->drain([](const selfperf::Sample&) {});
    for (const auto& th : t.threads) r.samples[th.tid] += th.samples;
    r.total = t.samples;
    r.lost = t.lost;
    r.signals = t.signals;
    r.ignored = t.ignored;
  } else {
    const SigtrapSampler::Totals t = trap_->stop();
    trap_->drain([](const selfperf::Sample&) {});
    for (const auto& th : t.threads) r.samples[th.tid] += th.samples;
    r.total = t.samples;
    r.lost = t.lost + t.no_slot;
    r.late = t.async;
    r.signals = t.samples + t.lost + t.async;
  }
  return r;
}

}  // namespace selfperf_bench
