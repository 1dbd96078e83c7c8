#include "selfperf/ring_buffer.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "events/event_text.hpp"
#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"

namespace selfperf {
namespace {

constexpr std::size_t kMaxRecordBytes = 65536;  // header.size is a u16

bool is_power_of_two(std::uint64_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

std::string mmap_error(int err, int fd, std::size_t data_pages, std::size_t length) {
  std::string head = "cannot mmap the ring buffer of perf event fd " + std::to_string(fd) + " (1 + " +
                     std::to_string(data_pages) + " pages, " + std::to_string(length / 1024) +
                     " KiB): " + std::strerror(err) + ". ";
  switch (err) {
    case EPERM:
    case ENOMEM: {
      // The kernel scales the sysctl by the online CPUs (perf_mmap: user_lock_limit *= num_online_cpus()),
      // so the same ring fits on a 16-CPU machine and not on a 2-CPU one: give the product.
      std::string limit = detail::read_text_file("/proc/sys/kernel/perf_event_mlock_kb");
      const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
      const std::optional<std::uint64_t> limit_kb = detail::parse_number(limit);
      std::string allowance = "unknown";
      if (limit_kb && cpus > 0)
        allowance = limit + " KiB x " + std::to_string(cpus) + " online CPUs = " +
                    std::to_string(*limit_kb * static_cast<std::uint64_t>(cpus)) + " KiB";
      return head + "Unprivileged processes may lock at most perf_event_mlock_kb times the online CPUs (" +
             allowance + " per user, /proc/sys/kernel/perf_event_mlock_kb) of ring buffers beyond "
             "RLIMIT_MEMLOCK: use fewer data pages or fewer events, raise it (sudo sysctl "
             "kernel.perf_event_mlock_kb=…), raise RLIMIT_MEMLOCK (ulimit -l), or grant CAP_IPC_LOCK.";
    }
    case EINVAL:
      return head + "The page count must be 1 + a power of two, and the fd a perf event that is not already "
                    "redirected to another buffer (PERF_EVENT_IOC_SET_OUTPUT).";
    case ENODEV:
    case EBADF:
      return head + "The fd is not an open perf event.";
    default:
      return head + "Unexpected error from mmap.";
  }
}

}  // namespace

RingBuffer::RingBuffer(int fd, std::size_t data_pages) {
  if (!is_power_of_two(data_pages))
    throw Error("ring buffer data page count " + std::to_string(data_pages) +
                    " is not a power of two: perf maps 1 + 2^n pages (use 1, 2, 4, 8 …)",
                EINVAL);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t length = (1 + data_pages) * page;
  void* map = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    int err = errno;
    throw Error(mmap_error(err, fd, data_pages, length), err);
  }
  map_ = map;
  map_length_ = length;
  control_ = static_cast<perf_event_mmap_page*>(map);
  // data_offset/data_size exist since Linux 4.1; older kernels leave them 0 and put data right after the
  // control page.
  std::uint64_t offset = control_->data_offset ? control_->data_offset : page;
  std::uint64_t size = control_->data_size ? control_->data_size : data_pages * page;
  data_ = static_cast<std::byte*>(map) + offset;
  mask_ = size - 1;
  scratch_bytes_ = static_cast<std::size_t>(size < kMaxRecordBytes ? size : kMaxRecordBytes);
  scratch_ = std::make_unique<std::uint64_t[]>(scratch_bytes_ / 8);
}

RingBuffer::RingBuffer(perf_event_mmap_page* control, std::span<std::byte> data) {
  if (control == nullptr || data.data() == nullptr)
    throw Error("ring buffer over caller memory: the control page and data area must not be null", EINVAL);
  if (!is_power_of_two(data.size()) || data.size() < 8 ||
      reinterpret_cast<std::uintptr_t>(data.data()) % 8 != 0)
    throw Error("ring buffer over caller memory: the data area (" + std::to_string(data.size()) +
                    " bytes) must be a power of two of at least 8 bytes, 8-byte aligned",
                EINVAL);
  control_ = control;
  data_ = data.data();
  mask_ = data.size() - 1;
  scratch_bytes_ = data.size() < kMaxRecordBytes ? data.size() : kMaxRecordBytes;
  scratch_ = std::make_unique<std::uint64_t[]>(scratch_bytes_ / 8);
}

RingBuffer::RingBuffer(RingBuffer&& other) noexcept
    : control_(std::exchange(other.control_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      mask_(std::exchange(other.mask_, 0)),
      map_(std::exchange(other.map_, nullptr)),
      map_length_(std::exchange(other.map_length_, 0)),
      scratch_(std::move(other.scratch_)),
      scratch_bytes_(std::exchange(other.scratch_bytes_, 0)),
      stats_(other.stats_),
      corruption_(other.corruption_) {}

RingBuffer& RingBuffer::operator=(RingBuffer&& other) noexcept {
  if (this != &other) {
    release();
    control_ = std::exchange(other.control_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    mask_ = std::exchange(other.mask_, 0);
    map_ = std::exchange(other.map_, nullptr);
    map_length_ = std::exchange(other.map_length_, 0);
    scratch_ = std::move(other.scratch_);
    scratch_bytes_ = std::exchange(other.scratch_bytes_, 0);
    stats_ = other.stats_;
    corruption_ = other.corruption_;
  }
  return *this;
}

RingBuffer::~RingBuffer() { release(); }

void RingBuffer::forget_mapping() noexcept {
  map_ = nullptr;
  control_ = nullptr;
  data_ = nullptr;
}

void RingBuffer::release() noexcept {
  if (map_ != nullptr) ::munmap(map_, map_length_);
  map_ = nullptr;
  control_ = nullptr;
  data_ = nullptr;
}

// The kernel publishes data_head after writing the records (perf_output_put_handle); the acquire load is
// the smp_rmb() perf_event.h asks for: no record byte is read before the head that covers it.
std::uint64_t RingBuffer::load_head() const noexcept {
  return std::atomic_ref<__u64>(control_->data_head).load(std::memory_order_acquire);
}

// The release store orders our reads of the records before the tail that frees their space (the smp_mb()
// of perf_event.h; the kernel pairs it with a full barrier before it checks data_tail). libperf does the
// same with smp_store_release.
void RingBuffer::store_tail(std::uint64_t tail) noexcept {
  std::atomic_ref<__u64>(control_->data_tail).store(tail, std::memory_order_release);
}

std::uint64_t RingBuffer::pending_bytes() const noexcept {
  if (control_ == nullptr) return 0;
  return load_head() - control_->data_tail;
}

void RingBuffer::discard() noexcept {
  if (control_ == nullptr) return;
  store_tail(load_head());
}

void RingBuffer::account(const RecordView& record) noexcept {
  ++stats_.records;
  auto word = [&](std::size_t index) -> std::uint64_t {
    std::uint64_t v = 0;
    const std::size_t at = sizeof(perf_event_header) + index * 8;
    if (record.bytes.size() >= at + 8) std::memcpy(&v, record.bytes.data() + at, 8);
    return v;
  };
  switch (record.type()) {
    case PERF_RECORD_SAMPLE:
      ++stats_.samples;
      break;
    case PERF_RECORD_LOST:  // u64 id, u64 lost
      ++stats_.lost_records;
      stats_.lost += word(1);
      break;
    case PERF_RECORD_LOST_SAMPLES:  // u64 lost
      stats_.lost_samples += word(0);
      break;
    case PERF_RECORD_THROTTLE:
      ++stats_.throttles;
      break;
    case PERF_RECORD_UNTHROTTLE:
      ++stats_.unthrottles;
      break;
    default:
      break;
  }
}

void RingBuffer::resync(std::uint64_t tail, std::uint64_t head, const perf_event_header& bad) noexcept {
  ++stats_.corruptions;
  stats_.bytes_dropped += head - tail;
  corruption_.position = tail;
  corruption_.type = bad.type;
  corruption_.size = bad.size;
  corruption_.available = head - tail;
}

}  // namespace selfperf
