#include "doctor_advice.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <linux/perf_event.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace selfperf::doctor {

namespace {

const char* yes(bool b) { return b ? "yes" : "no"; }

// Reads `key:\tvalue` from /proc/self/status; -1 when absent or unreadable (out of descriptors, say).
int status_field(const char* key) {
  std::ifstream status("/proc/self/status");
  if (!status) return -1;  // out of descriptors, say
  std::string line;
  const std::size_t n = std::strlen(key);
  while (std::getline(status, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') {
      try {
        return std::stoi(line.substr(n + 1));
      } catch (...) {
        return -1;
      }
    }
  return -1;
}

std::string tracefs_mount_point() {
  std::ifstream mounts("/proc/self/mounts");
  if (!mounts) return "";
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, where, type;
    fields >> device >> where >> type;
    if (type == "tracefs") return where;
  }
  return "";
}

constexpr const char* kParanoidFix =
    "sudo sysctl kernel.perf_event_paranoid=2 (to keep it: echo kernel.perf_event_paranoid=2 | sudo tee "
    "/etc/sysctl.d/60-perf.conf), or grant the program CAP_PERFMON: sudo setcap cap_perfmon+ep <program>";

constexpr const char* kDescriptorFix =
    "each counter takes one descriptor, the sampler one per thread: ulimit -n 4096 (systemd: LimitNOFILE=; "
    "Docker: --ulimit nofile=4096:4096)";

// The library's own refusal (the sampler leaves the program a reserve of descriptors) names the limit, not
// EMFILE's text.
bool out_of_descriptors(const std::string& error) {
  return error.find(std::strerror(EMFILE)) != std::string::npos || error.find("RLIMIT_NOFILE") != std::string::npos;
}

constexpr const char* kUserAccessFix =
    "sudo sysctl kernel.perf_user_access=1 (to keep it: echo kernel.perf_user_access=1 | sudo tee "
    "/etc/sysctl.d/60-perf.conf); until then every counter read is a read(2) system call";

// arm64: user space reads the counters with mrs once kernel.perf_user_access allows it (Linux 5.17+), not
// through x86's cpu/rdpmc, and the timestamps come from the arch timer (CNTVCT_EL0), not the TSC.
bool arm64(const CapabilityReport& caps) {
  return caps.machine == "aarch64" || caps.perf_user_access != "absent" || !caps.user_access_pmus.empty();
}

Finding fast_path_finding(const CapabilityReport& caps) {
  if (!arm64(caps)) {
    const bool rdpmc = caps.cap_user_rdpmc && caps.rdpmc_sysfs != "0";
    Finding fast{"user-space counter reads (rdpmc)", yes(rdpmc), rdpmc, ""};
    fast.value += " (cpu/rdpmc in sysfs: " + caps.rdpmc_sysfs + ")";
    if (!rdpmc)
      fast.fix = "echo 1 | sudo tee /sys/bus/event_source/devices/cpu/rdpmc (until then every counter read is a "
                 "read(2) system call)";
    return fast;
  }
  // The page says cap_user_rdpmc even where perf_user_access is 0 (its index is 0 then): the sysctl decides.
  const bool ok = caps.fast_path_verdict() == "rdpmc";
  Finding fast{"user-space counter reads (mrs)", yes(ok), ok, ""};
  fast.value += " (kernel.perf_user_access: " + caps.perf_user_access + ")";
  if (ok) return fast;
  if (caps.perf_user_access == "absent")
    fast.fix = "this kernel (before Linux 5.17) gives user space no access to the arm64 counters: every read is "
               "a read(2) system call; a 5.17+ kernel with kernel.perf_user_access=1 allows it";
  else if (caps.perf_user_access == "0")
    fast.fix = kUserAccessFix;
  else
    fast.fix = "the event's mmap page offers no user read (cap_user_rdpmc clear): the PMU driver does not allow it "
               "(every read is a read(2) system call)";
  return fast;
}

constexpr const char* kSeccompFix =
    "allow perf_event_open in the container's seccomp profile. Docker's default profile allows it only with "
    "CAP_PERFMON (Docker 20.10+, kernel 5.8+): docker run --cap-add PERFMON …; otherwise pass a profile that "
    "allows it (docker run --security-opt seccomp=<profile.json>) or, for a trusted container, "
    "--security-opt seccomp=unconfined. Kubernetes: securityContext.seccompProfile (Localhost profile or "
    "Unconfined) and capabilities.add [PERFMON]; systemd: remove perf_event_open from SystemCallFilter=";

}  // namespace

Environment observe() {
  Environment env;
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.disabled = 1;
  attr.exclude_kernel = 1;  // allowed at every paranoid level below 3, so a failure is not about the level
  attr.exclude_hv = 1;
  long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) env.open_errno = errno;
  else ::close(static_cast<int>(fd));
  env.seccomp_mode = status_field("Seccomp");
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    env.nofile_limit = static_cast<long>(limit.rlim_cur);
  env.perf_sysctl_present = ::access("/proc/sys/kernel/perf_event_paranoid", F_OK) == 0;
  env.tracefs_mount = tracefs_mount_point();
  return env;
}

std::string open_diagnosis(const Environment& env, int paranoid) {
  const int e = env.open_errno;
  if (e == 0) return "";
  std::string what = std::string("perf_event_open fails with ") + strerrorname_np(e) + " (" + std::strerror(e) + ")";
  const bool seccomp = env.seccomp_mode == 2;
  if (seccomp && (e == ENOSYS || e == EPERM || e == EACCES))
    return what + ": this process runs under a seccomp filter (Seccomp: 2 in /proc/self/status) that blocks "
                  "the call, as Docker's, Podman's and Kubernetes' default profiles do";
  if (e == ENOSYS)
    return what + (env.perf_sysctl_present
                       ? ": the call is not implemented for this process (a seccomp filter or a sandbox in a parent)"
                       : ": the kernel was built without CONFIG_PERF_EVENTS (/proc/sys/kernel/perf_event_paranoid "
                         "is absent)");
  if ((e == EPERM || e == EACCES) && paranoid >= 3)
    return what + ": perf_event_paranoid is " + std::to_string(paranoid) +
           ", which forbids perf_event_open to every process without CAP_PERFMON";
  if (e == EPERM || e == EACCES)
    return what + " although perf_event_paranoid is " + std::to_string(paranoid) +
           ": a security module (SELinux, AppArmor) or a sandbox denies it";
  if (e == EMFILE || e == ENFILE)
    return what + ": out of file descriptors" +
           (env.nofile_limit >= 0 ? " (ulimit -n is " + std::to_string(env.nofile_limit) + ")" : std::string());
  return what;
}

std::string open_fix(const Environment& env, int paranoid) {
  const int e = env.open_errno;
  if (e == 0) return "";
  if (env.seccomp_mode == 2 && (e == ENOSYS || e == EPERM || e == EACCES)) return kSeccompFix;
  if (e == ENOSYS)
    return env.perf_sysctl_present
               ? std::string("run outside the sandbox, or allow perf_event_open in its seccomp/system-call filter")
               : std::string("use a kernel built with CONFIG_PERF_EVENTS=y (every distribution kernel is)");
  if ((e == EPERM || e == EACCES) && paranoid >= 3) return kParanoidFix;
  if (e == EPERM || e == EACCES)
    return "check the audit log (journalctl -k | grep -i -e avc -e apparmor) and allow perf_event_open for "
           "this program, or grant it CAP_PERFMON: sudo setcap cap_perfmon+ep <program>";
  if (e == EMFILE || e == ENFILE) return kDescriptorFix;
  return "report this errno with the output of selfperf-doctor --json";
}

std::string failure_fix(const std::string& detail, const Environment& env, const std::string& own) {
  if (env.open_errno) return "make perf_event_open work here first: see its fix under environment";
  if (out_of_descriptors(detail)) return kDescriptorFix;
  return own;
}

std::string unwinder_advice() {
  return "code built without frame pointers (most distribution libraries, and -O2 builds) unwinds short with "
         "frame pointers: build with -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer, or unwind from DWARF "
         "CFI instead (Sampler::Options::unwinder = selfperf::Unwinder::libunwind; SELFPERF_UNWINDER=libunwind "
         "for the LD_PRELOAD profiler)";
}

std::vector<Finding> findings(const CapabilityReport& caps, const Environment& env) {
  std::vector<Finding> out;
  const int paranoid = caps.perf_event_paranoid;
  const bool opens = caps.perf_event_open && env.open_errno == 0;

  Finding level{"perf_event_paranoid", std::to_string(paranoid), paranoid < 3 || caps.privileged, ""};
  if (caps.privileged) level.value += " (CAP_PERFMON/CAP_SYS_ADMIN held: the level does not apply)";
  if (!level.ok) level.fix = kParanoidFix;
  out.push_back(level);

  Finding open{"perf_event_open", yes(opens), opens, ""};
  if (!opens) {
    open.value += " - " + (env.open_errno ? open_diagnosis(env, paranoid) : caps.perf_event_open_error);
    open.fix = env.open_errno ? open_fix(env, paranoid)
                              : "see the error above; selfperf-doctor --json shows every field";
  }
  out.push_back(open);

  Finding kernel{"kernel-side counting", yes(caps.kernel_counting), caps.kernel_counting, ""};
  if (!caps.kernel_counting) {
    kernel.value += " (events count user space only; context-switches/cpu-migrations read 0)";
    kernel.fix = "sudo sysctl kernel.perf_event_paranoid=1, or grant the program CAP_PERFMON: sudo setcap "
                 "cap_perfmon+ep <program>; until then ask for user-space events (task-clock:u, cycles:u)";
  }
  out.push_back(kernel);

  Finding hardware{"hardware events (cycles)", yes(caps.hardware_events), caps.hardware_events, ""};
  if (!caps.hardware_events) {
    if (!caps.hardware_error.empty()) hardware.value += " - " + caps.hardware_error;
    hardware.fix = !opens ? "make perf_event_open work first (above)"
                   : out_of_descriptors(caps.hardware_error) ? kDescriptorFix
                   : "no hardware PMU is exposed to this machine (usual in VMs and cloud instances): enable "
                           "the virtual PMU (KVM/QEMU: -cpu host,pmu=on; VMware: \"Virtualize CPU performance "
                           "counters\"; cloud: a bare-metal instance), or measure with software events "
                           "(task-clock, page-faults, context-switches)";
  }
  out.push_back(hardware);

  if (caps.hardware_events) out.push_back(fast_path_finding(caps));

  if (!caps.page_event.empty()) {
    const bool arm = arm64(caps);
    Finding time{arm ? "arch timer time conversion (cap_user_time)" : "TSC time conversion (cap_user_time)",
                 yes(caps.cap_user_time), true, ""};
    if (!caps.cap_user_time)
      time.fix = arm ? "nothing to do: the kernel offers no conversion of the arch timer (CNTVCT_EL0) here, so "
                       "timestamps come from clock_gettime"
                     : "nothing to do: the kernel offers no TSC conversion here (a VM without a stable TSC), so "
                       "timestamps come from clock_gettime";
    out.push_back(time);
  }

  Finding files{"file descriptor limit", env.nofile_limit < 0 ? "unlimited" : std::to_string(env.nofile_limit),
                env.nofile_limit < 0 || env.nofile_limit >= 256, ""};
  if (!files.ok) files.fix = kDescriptorFix;
  out.push_back(files);

  out.push_back({"perf_event_max_sample_rate", std::to_string(caps.perf_event_max_sample_rate) + " Hz", true, ""});
  out.push_back({"perf_event_mlock_kb", std::to_string(caps.perf_event_mlock_kb), true, ""});

  Finding tracefs{"tracefs (tracepoint events)", caps.tracefs, caps.tracefs != "not mounted", ""};
  if (!tracefs.ok && !env.tracefs_mount.empty()) {
    tracefs.value = "mounted at " + env.tracefs_mount + " but not readable by this user";
    tracefs.fix = "tracepoint events need access to it: run as root, or sudo mount -o remount,mode=755 " +
                  env.tracefs_mount + " (and grant CAP_PERFMON for the events themselves)";
  } else if (!tracefs.ok) {
    tracefs.fix = "sudo mount -t tracefs nodev /sys/kernel/tracing (to keep it, add to /etc/fstab: tracefs "
                  "/sys/kernel/tracing tracefs defaults 0 0)";
  }
  out.push_back(tracefs);
  return out;
}

}  // namespace selfperf::doctor
