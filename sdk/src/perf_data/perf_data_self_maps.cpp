// A process's executable mappings as MMAP2 records describe them (perf's synthesized mmap events).
#include <cstdio>
#include <fstream>
#include <sstream>

#include <sys/mman.h>
#include <unistd.h>

#include "selfperf/perf_data_writer.hpp"

namespace selfperf {

namespace {

std::vector<Mmap2Info> read_maps(const char* path, std::int32_t pid) {
  std::vector<Mmap2Info> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    unsigned maj = 0, min = 0;
    char perms[5] = {};
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms, &offset, &maj, &min,
                    &inode, &name_at) < 7)
      continue;
    if (perms[2] != 'x') continue;
    std::string name = name_at > 0 ? line.substr(static_cast<std::size_t>(name_at)) : std::string();
    if (name.empty() || (name[0] != '/' && name != "[vdso]")) continue;
    Mmap2Info m;
    m.pid = m.tid = pid;
    m.start = start;
    m.len = end - start;
    m.pgoff = offset;
    m.maj = maj;
    m.min = min;
    m.ino = inode;
    m.prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | PROT_EXEC;
    m.flags = perms[3] == 's' ? MAP_SHARED : MAP_PRIVATE;
    m.filename = std::move(name);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::vector<Mmap2Info> read_self_executable_maps() {
  return read_maps("/proc/self/maps", static_cast<std::int32_t>(::getpid()));
}

std::vector<Mmap2Info> read_executable_maps(pid_t pid) {
  return read_maps(("/proc/" + std::to_string(pid) + "/maps").c_str(), static_cast<std::int32_t>(pid));
}

}  // namespace selfperf
