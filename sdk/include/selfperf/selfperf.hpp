#pragma once
// Umbrella header: everything selfperf offers, in namespace selfperf.
#include "selfperf/counter_group.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/probe.hpp"
#include "selfperf/instrument.hpp"
#include "selfperf/region.hpp"
#include "selfperf/sample.hpp"
