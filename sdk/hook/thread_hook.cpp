// selfperf::thread_hook — link it into a program (CMake: target_link_libraries(app PRIVATE
// selfperf::thread_hook)) and a Sampler started with Options::attach_new_threads attaches every thread
// created after start(), std::thread and threads of other libraries included.
//
// It defines pthread_create. An executable's definition comes first in the dynamic linker's search, so every
// caller in the process (libstdc++'s std::thread too) reaches this one, which forwards to the next definition
// (the C library's, or a sanitizer's interceptor) with a start routine that attaches the new thread before
// running the real one. A fully static executable has no "next definition": it cannot use the hook and
// attaches threads itself (Sampler::ThreadAttachment, Sampler::attached).
#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <new>

extern "C" void selfperf_thread_started() noexcept;  // sdk/src/sampling/new_threads.cpp
extern "C" bool selfperf_thread_creation_attaches() noexcept;

// Its presence is how the library knows the hook is linked in (a weak reference there).
extern "C" const int selfperf_thread_hook_linked = 1;

namespace {

struct StartRoutine {
  void* (*fn)(void*);
  void* arg;
};

void* attached_start(void* p) {
  StartRoutine start = *static_cast<StartRoutine*>(p);
  delete static_cast<StartRoutine*>(p);
  selfperf_thread_started();
  return start.fn(start.arg);  // the sampler detaches the thread when it exits
}

using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

CreateFn next_pthread_create() {
  static const CreateFn next = reinterpret_cast<CreateFn>(::dlsym(RTLD_NEXT, "pthread_create"));
  return next;
}

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  CreateFn next = next_pthread_create();
  if (next == nullptr) return EAGAIN;
  if (!selfperf_thread_creation_attaches()) return next(thread, attr, fn, arg);
  auto* start = new (std::nothrow) StartRoutine{fn, arg};
  if (start == nullptr) return next(thread, attr, fn, arg);  // still a thread, only not attached
  int rc = next(thread, attr, attached_start, start);
  if (rc != 0) delete start;
  return rc;
}
