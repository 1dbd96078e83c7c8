#pragma once
// The perf_event ioctls and prctls that perf users reach for, on any event fd (a CounterGroup member, a
// SamplingEvent, a raw perf_event_open fd). Each throws selfperf::Error naming the request and the errno.
#include <cstdint>

namespace selfperf {

// PERF_EVENT_IOC_PERIOD: a sampling event's new period (or frequency, for an event opened with freq=1).
// The kernel applies it from the next overflow on.
void set_sample_period(int fd, std::uint64_t period);

// PERF_EVENT_IOC_PAUSE_OUTPUT: a paused ring buffer keeps the event counting but discards its records
// (the kernel counts them as lost and reports a PERF_RECORD_LOST once resumed).
void pause_output(int fd, bool paused);

// PERF_EVENT_IOC_ID: the id the kernel gives the event (PERF_SAMPLE_ID/IDENTIFIER, PERF_FORMAT_ID).
std::uint64_t event_id(int fd);

// PERF_EVENT_IOC_SET_OUTPUT: `fd`'s records go to `target_fd`'s ring buffer (same CPU or same task, and
// `fd` itself not mmapped: the kernel answers EBUSY then). target_fd -1 undoes it.
void redirect_output(int fd, int target_fd);

// PR_TASK_PERF_EVENTS_DISABLE / _ENABLE: every event this process opened on its own threads (counting and
// sampling) stops or resumes at once, e.g. around a phase that should not be measured.
void disable_process_events();
void enable_process_events();

}  // namespace selfperf
