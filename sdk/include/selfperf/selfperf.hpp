#pragma once
// Umbrella header: everything selfperf offers, in namespace selfperf.
// (The Google Benchmark integration, <selfperf/benchmark.hpp>, is separate: it needs libbenchmark.)
#include "selfperf/counter_group.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/event_poller.hpp"
#include "selfperf/hw_read.hpp"
#include "selfperf/instrument.hpp"
#include "selfperf/mem_data_src.hpp"
#include "selfperf/mmap_read.hpp"
#include "selfperf/probe.hpp"
#include "selfperf/record.hpp"
#include "selfperf/region.hpp"
#include "selfperf/ring_buffer.hpp"
#include "selfperf/sample.hpp"
#include "selfperf/sampling_event.hpp"
#include "selfperf/tsc_clock.hpp"
