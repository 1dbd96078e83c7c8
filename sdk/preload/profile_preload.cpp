// libselfperf_profile.so: LD_PRELOAD=…/libselfperf_profile.so SELFPERF_PROFILE=out.data program
// profiles every thread of `program` from start to exit. The profile starts in a constructor; threads
// created later are attached by selfperf's pthread_create hook (sdk/hook/thread_hook.cpp, linked in here).
#include "selfperf/profile.hpp"

namespace {

[[gnu::constructor]] void start_profile_from_env() { selfperf::profile_from_env(); }

}  // namespace
