// selfperf record: `selfperf record [-o FILE] [-F HZ] [-e EVENT] [--call-graph dwarf|fp|kernel] -- CMD…` runs CMD
// under the preload profiler, follows the whole process tree (each process image writes its own profile into
// a temporary directory), then merges the profiles into FILE (perf.data), FILE.folded and FILE.svg; `-o -`
// writes pipe-mode perf.data to standard output instead, and no side files. With --summary-json, the run's
// summary as JSON (record_summary.hpp).
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "options.hpp"
#include "merge.hpp"
#include "record_pid.hpp"
#include "record_pid_dwarf.hpp"
#include "record_summary.hpp"
#include "selfperf/error.hpp"

namespace fs = std::filesystem;

namespace selfperf::tool {
namespace {

constexpr const char* kUsage =
    "usage: selfperf record [-o FILE] [-F HZ] [-e EVENT] [--call-graph dwarf|fp|kernel] [--summary-json JSON] [-q]\n"
    "                       -- CMD [ARG...]\n"
    "       selfperf record -p PID[,PID...] [-o FILE] [-F HZ] [-e EVENT] [--call-graph kernel|fp|dwarf[,SIZE]]\n"
    "                       [--duration SECONDS] [--no-inherit]\n"
    "  Profiles CMD and every process it starts (wrappers, fork, exec) into FILE (default perf.data), which\n"
    "  perf report -i FILE --sort comm,pid reads, and FILE.folded / FILE.svg (flame graph, a root per process).\n"
    "  -o -      pipe-mode perf.data to standard output (selfperf record -o - -- CMD | perf report -i -); CMD's\n"
    "            standard output then goes to standard error, and no .folded/.svg are written\n"
    "  -F HZ     samples per second per thread (default 999)\n"
    "  -e EVENT  event to sample (default cpu-clock where no hardware PMU)\n"
    "  --call-graph dwarf|fp|kernel   unwinder (default dwarf: works without frame pointers)\n"
    "  --summary-json JSON  also write the summary as JSON (processes, threads, samples, lost by cause, rate\n"
    "            lowered, files written, and each process's own: docs/formats.md), also when nothing was sampled\n"
    "  -q        no summary on stderr\n"
    "  -p PID[,PID...]  attach to running processes instead: their threads, and the threads and processes they\n"
    "            start later (as perf record -p), user space only, until Ctrl-C/SIGTERM, --duration, or all of\n"
    "            them have exited.\n"
    "            --call-graph kernel (the default; fp is the same): the kernel's frame-pointer walk, which\n"
    "            loses callers in code built without frame pointers. --call-graph dwarf[,SIZE]: each sample\n"
    "            copies the thread's user registers and SIZE bytes of its stack (default 8192, at most 65528),\n"
    "            unwound here with the program's DWARF CFI, as perf record --call-graph dwarf; no frame\n"
    "            pointers needed, bigger samples (rings of 64 pages per thread for 8192, fewer where an\n"
    "            unprivileged user's locked memory would not hold them)\n"
    "  --duration SECONDS  with -p: stop after this long\n"
    "  -i, --no-inherit  with -p: only the threads there at the attach, not the threads and processes they start\n";

struct RecordArgs {
  fs::path output = "perf.data";
  std::string frequency;
  std::string event;
  std::string unwinder;
  fs::path summary_json;
  bool quiet = false;
  std::vector<std::string> command;
  std::vector<pid_t> pids;
  std::string call_graph;
  std::size_t stack_copy = 0;  // --call-graph dwarf,SIZE; 0: the default
  double duration = 0;
  bool inherit = true;
};

RecordArgs parse_record(int argc, char** argv) {
  RecordArgs a;
  Options o("record", kUsage, argc, argv);
  while (o.next()) {
    if (o.is("-o", "--output")) a.output = o.value();
    else if (o.is("-F", "--freq")) a.frequency = o.value();
    else if (o.is("-e", "--event")) a.event = o.value();
    else if (o.is("-q", "--quiet")) a.quiet = true;
    else if (o.is("--summary-json")) a.summary_json = o.value();
    else if (o.is("-p", "--pid")) {
      const std::string list = o.value();
      if (!parse_pid_list(list, a.pids)) o.fail("-p " + list + ": give process ids, as in -p 1234 or -p 1234,5678");
    } else if (o.is("-i", "--no-inherit")) {
      a.inherit = false;
    } else if (o.is("--duration")) {
      const std::string v = o.value();
      char* end = nullptr;
      a.duration = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(a.duration > 0))
        o.fail("--duration " + v + ": give a number of seconds above 0, as in --duration 2.5");
    }
    else if (o.is("--call-graph") || o.arg().rfind("--call-graph=", 0) == 0) {
      const std::string value = o.is("--call-graph") ? o.value() : o.arg().substr(13);
      const std::string mode = value.substr(0, value.find(','));
      a.call_graph = mode;
      if (mode == "dwarf") a.unwinder = "libunwind";
      else if (mode == "fp") a.unwinder = "frame_pointer";
      else if (mode == "kernel") a.unwinder = "kernel";
      else o.fail("--call-graph " + value + ": use dwarf, fp or kernel");
      if (mode.size() != value.size()) {
        const std::string size = value.substr(mode.size() + 1);
        if (mode != "dwarf" || !parse_stack_copy_size(size, a.stack_copy))
          o.fail("--call-graph " + value + ": give dwarf,SIZE with SIZE the bytes of stack each sample copies, a "
                 "multiple of 8 from 8 to " + std::to_string(kMaxStackCopy) + ", as in --call-graph dwarf,16384");
      }
    } else {
      o.unknown();
    }
  }
  a.command = o.rest();
  if (!a.pids.empty()) {
    if (!a.command.empty()) o.fail("give either -p PID or a command, not both");
    if (!a.summary_json.empty()) o.fail("--summary-json is for a command's run, not for -p");
    return a;
  }
  if (a.stack_copy != 0)
    o.fail("--call-graph dwarf,SIZE: the stack copy size is for -p; a command is unwound in its own process, "
           "which copies no stack: give --call-graph dwarf");
  if (a.duration > 0) o.fail("--duration is for -p; a command is recorded until it exits");
  if (!a.inherit) o.fail("--no-inherit is for -p; a command's whole process tree is recorded");
  if (a.command.empty()) o.fail("give the command to profile after --, or -p PID");
  return a;
}

// The preload library: SELFPERF_PRELOAD_LIB, else beside this program (build tree: bin/ and lib/; installed:
// bin/ and the library directory), else the configured install directory.
fs::path find_preload_library() {
  if (const char* p = std::getenv("SELFPERF_PRELOAD_LIB"); p && *p) return p;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const char* name = "libselfperf_profile.so";
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "lib" / name);
    candidates.push_back(exe.parent_path().parent_path() / SELFPERF_LIBDIR_NAME / name);
  }
  candidates.push_back(fs::path(SELFPERF_INSTALL_LIBDIR) / name);
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c;
  throw selfperf::Error(std::string("selfperf record: ") + name + " not found beside " + exe.string() + " nor in " +
                        SELFPERF_INSTALL_LIBDIR + "; set SELFPERF_PRELOAD_LIB to its path");
}

fs::path make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/selfperf-record-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    const int err = errno;
    throw selfperf::Error("selfperf record: cannot create " + pattern + " (" + std::strerror(err) +
                              "); set TMPDIR to a writable directory",
                          err);
  }
  return pattern;
}

void set_profile_environment(const RecordArgs& a, const fs::path& lib, const fs::path& dir) {
  std::string preload = lib.string();
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  ::setenv("SELFPERF_PROFILE", (dir / "p.%p.data").c_str(), 1);
  ::setenv("SELFPERF_QUIET", "1", 1);  // the summary is this program's
  // Symbolized once, here, from the merged file: not at every process's exit, where it cost python3 ~0.1 s.
  ::setenv("SELFPERF_RENDER", "0", 1);
  // Each process's JSON summary, for --summary-json; never the caller's SELFPERF_SUMMARY, as with the profiles.
  // A folder of their own: an exec'd image's is p.<pid>.json.1, which no suffix test would tell from a profile.
  std::error_code ec;  // a failure shows as each process failing to write its summary, named on stderr
  fs::create_directory(dir / "summaries", ec);
  ::setenv("SELFPERF_SUMMARY", (dir / "summaries" / "p.%p.json").c_str(), 1);
  ::unsetenv("SELFPERF_RUN");          // a run of its own, whatever the caller's environment says
  if (!a.frequency.empty()) ::setenv("SELFPERF_FREQUENCY", a.frequency.c_str(), 1);
  if (!a.event.empty()) ::setenv("SELFPERF_EVENT", a.event.c_str(), 1);
  if (!a.unwinder.empty()) ::setenv("SELFPERF_UNWINDER", a.unwinder.c_str(), 1);
}

// Runs the command and waits for it and for every descendant it left behind (this process is their
// subreaper), so that all profiles are complete before the merge. Returns the command's exit status.
// `stdout_to_stderr`: standard output carries the perf.data stream, which the command's output would corrupt.
int run_tree(const std::vector<std::string>& command, bool stdout_to_stderr) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::vector<char*> argv;
  for (const auto& s : command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) throw selfperf::Error(std::string("selfperf record: fork failed: ") + std::strerror(errno), errno);
  if (child == 0) {
    if (stdout_to_stderr) ::dup2(STDERR_FILENO, STDOUT_FILENO);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "selfperf record: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  // Ctrl-C reaches the whole foreground group: the command decides what it means; this process merges.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGQUIT, SIG_IGN);
  int status = 0, command_status = 0;
  for (;;) {
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: the tree is gone
    }
    if (done == child) command_status = status;
  }
  if (WIFEXITED(command_status)) return WEXITSTATUS(command_status);
  if (WIFSIGNALED(command_status)) return 128 + WTERMSIG(command_status);
  return 1;
}

std::vector<fs::path> profiles_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.ends_with(".folded") || name.ends_with(".svg")) continue;
    if (e.is_regular_file() && e.file_size() > 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int record(int argc, char** argv) {
  const RecordArgs a = parse_record(argc, argv);
  if (!a.pids.empty())
    return record_pids({a.pids, a.output, a.frequency, a.event, a.call_graph, a.stack_copy, a.duration, a.quiet,
                        a.inherit});
  const bool to_stdout = a.output == "-";
  if (to_stdout && ::isatty(STDOUT_FILENO)) {
    std::fprintf(stderr, "selfperf record: -o -: standard output is a terminal; pipe it (| perf report -i -) or "
                         "redirect it to a file\n");
    return 2;
  }
  const fs::path lib = find_preload_library();
  const fs::path dir = make_temp_dir();
  set_profile_environment(a, lib, dir);
  int status = 0;
  try {
    status = run_tree(a.command, to_stdout);
    const auto inputs = profiles_in(dir);
    const fs::path folded = a.output.string() + ".folded";
    const fs::path svg = a.output.string() + ".svg";
    RecordOutcome outcome{a.command, status, nullptr, 0, a.output, to_stdout ? "" : folded, to_stdout ? "" : svg};
    MergeSummary summary;
    if (inputs.empty()) {
      std::fprintf(stderr,
                   "selfperf record: no process took a sample (a run shorter than a sampling period, or profiling "
                   "disabled: see the messages above); nothing written\n");
    } else {
      summary = selfperf::tool::merge_profiles(inputs, a.output, a.command);
      const auto stacks = to_stdout ? summary.samples
                                    : selfperf::tool::render_merged(a.output, folded, svg,
                                                                    "selfperf record: " + a.command[0]);
      outcome.merged = &summary;
      outcome.folded_samples = stacks;
      if (!a.quiet) {
        std::fprintf(stderr, "selfperf record: %zu processes, %zu threads, %llu samples, %llu lost\n",
                     summary.processes.size(), summary.threads, static_cast<unsigned long long>(summary.samples),
                     static_cast<unsigned long long>(summary.lost));
        for (const auto& p : summary.processes)
          std::fprintf(stderr, "  %-16s pid %-7u samples %-7llu threads %-4zu lost %llu\n", p.comm.c_str(), p.pid,
                       static_cast<unsigned long long>(p.samples), p.threads,
                       static_cast<unsigned long long>(p.lost));
        if (stacks < summary.samples)
          std::fprintf(stderr, "  (%llu samples without a stack in %s)\n",
                       static_cast<unsigned long long>(summary.samples - stacks), a.output.c_str());
        if (to_stdout)
          std::fprintf(stderr, "selfperf record: wrote pipe-mode perf.data to standard output (perf report -i -); "
                               "no .folded/.svg: they need -o FILE (or selfperf report -i - --folded OUT --svg OUT)\n");
        else
          std::fprintf(stderr, "selfperf record: wrote %s (perf report -i %s --sort comm,pid), %s, %s\n",
                       a.output.c_str(), a.output.c_str(), folded.c_str(), svg.c_str());
      }
    }
    if (!a.summary_json.empty()) {
      write_text_file(a.summary_json, record_summary_json(outcome, dir / "summaries"));
      if (!a.quiet) std::fprintf(stderr, "selfperf record: wrote %s\n", a.summary_json.c_str());
    }
  } catch (const selfperf::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::error_code ec;
    fs::remove_all(dir, ec);
    return status != 0 ? status : 1;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return status;
}

}  // namespace

int record_main(int argc, char** argv) {
  try {
    return record(argc, argv);
  } catch (const selfperf::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

}  // namespace selfperf::tool
