// libselfperf_profile.so: LD_PRELOAD=…/libselfperf_profile.so SELFPERF_PROFILE=out.data program
// profiles every thread of `program` from start to exit. The profile starts in a constructor; threads
// created later are attached by wrapping pthread_create's start routine.
#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <new>

#include "selfperf/profile.hpp"

namespace {

struct StartRoutine {
  void* (*fn)(void*);
  void* arg;
};

void* attached_start(void* p) {
  StartRoutine start = *static_cast<StartRoutine*>(p);
  delete static_cast<StartRoutine*>(p);
  selfperf::profile_attach_this_thread();
  return start.fn(start.arg);  // the sampler detaches the thread when it exits
}

using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

CreateFn real_pthread_create() {
  static const CreateFn real = reinterpret_cast<CreateFn>(::dlsym(RTLD_NEXT, "pthread_create"));
  return real;
}

[[gnu::constructor]] void start_profile_from_env() { selfperf::profile_from_env(); }

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  CreateFn real = real_pthread_create();
  if (real == nullptr) return EAGAIN;
  auto* start = new (std::nothrow) StartRoutine{fn, arg};
  if (start == nullptr) return real(thread, attr, fn, arg);
  int rc = real(thread, attr, attached_start, start);
  if (rc != 0) delete start;
  return rc;
}
