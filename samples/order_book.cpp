// A small limit-order book fed with generated messages (add / cancel / aggressive orders that match), watched the
// way a trading system watches its tail: a per-message latency histogram (p50 … p99.99, max) per message kind,
// and per-batch counter deltas from a CounterGroup.
//
// Two clocks, each where it fits: a message takes ~100 ns, far below what a CounterGroup read resolves (without a
// PMU a read is a read(2) syscall that costs more than the message itself), so each message is timed with the
// cheapest clock there is (rdtsc where the TSC is invariant, else CLOCK_MONOTONIC via the vDSO), and the counter
// group is read once per batch of messages through selfperf::FrameLoop. Where the PMU lets user space read
// cycles with rdpmc (CounterGroup::read_path() says "rdpmc"), each message's cycles are counted too: a read
// then costs a few dozen cycles and no system call.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <selfperf/selfperf.hpp>
#include <selfperf/frame_loop.hpp>
#include <selfperf/histogram.hpp>

namespace {

// ---------------------------------------------------------------------------------------------------------------
// The book: one FIFO of resting orders per price level, intrusive links in a preallocated order pool, so a
// message never allocates.

enum class Side : std::uint8_t { kBuy, kSell };
constexpr std::uint32_t kNil = UINT32_MAX;

struct Order {
  std::int32_t level = 0;
  std::uint32_t qty = 0;
  std::uint32_t prev = kNil, next = kNil;
  Side side = Side::kBuy;
  bool live = false;
};

class OrderBook {
 public:
  OrderBook(std::int32_t levels, std::size_t max_orders)
      : bids_(static_cast<std::size_t>(levels)), asks_(static_cast<std::size_t>(levels)), levels_(levels),
        best_ask_(levels), orders_(max_orders) {}

  // Matches against the other side as far as `price` allows, rests what is left. Returns the quantity traded.
  std::uint32_t add(std::uint32_t id, Side side, std::int32_t price, std::uint32_t qty) {
    const std::uint32_t wanted = qty;
    if (side == Side::kBuy) {
      while (qty > 0 && best_ask_ < levels_ && best_ask_ <= price) {
        qty = fill(asks_[static_cast<std::size_t>(best_ask_)], qty);
        while (best_ask_ < levels_ && asks_[static_cast<std::size_t>(best_ask_)].head == kNil) ++best_ask_;
      }
    } else {
      while (qty > 0 && best_bid_ >= 0 && best_bid_ >= price) {
        qty = fill(bids_[static_cast<std::size_t>(best_bid_)], qty);
        while (best_bid_ >= 0 && bids_[static_cast<std::size_t>(best_bid_)].head == kNil) --best_bid_;
      }
    }
    if (qty > 0) rest(id, side, price, qty);
    return wanted - qty;
  }

  bool cancel(std::uint32_t id) {
    if (id >= orders_.size() || !orders_[id].live) return false;  // already filled or cancelled
    Order& o = orders_[id];
    Level& level = (o.side == Side::kBuy ? bids_ : asks_)[static_cast<std::size_t>(o.level)];
    unlink(level, id);
    if (level.head == kNil) {
      if (o.side == Side::kBuy && o.level == best_bid_)
        while (best_bid_ >= 0 && bids_[static_cast<std::size_t>(best_bid_)].head == kNil) --best_bid_;
      if (o.side == Side::kSell && o.level == best_ask_)
        while (best_ask_ < levels_ && asks_[static_cast<std::size_t>(best_ask_)].head == kNil) ++best_ask_;
    }
    return true;
  }

  std::int32_t best_bid() const { return best_bid_; }
  std::int32_t best_ask() const { return best_ask_; }
  std::uint64_t trades() const { return trades_; }
  std::uint64_t volume() const { return volume_; }
  std::uint64_t resting() const { return resting_; }

 private:
  struct Level {
    std::uint32_t head = kNil, tail = kNil;
    std::uint64_t qty = 0;
  };

  std::uint32_t fill(Level& level, std::uint32_t qty) {
    while (qty > 0 && level.head != kNil) {
      const std::uint32_t id = level.head;
      Order& maker = orders_[id];
      const std::uint32_t traded = std::min(qty, maker.qty);
      maker.qty -= traded;
      level.qty -= traded;
      qty -= traded;
      ++trades_;
      volume_ += traded;
      if (maker.qty == 0) unlink(level, id);
    }
    return qty;
  }

  void rest(std::uint32_t id, Side side, std::int32_t price, std::uint32_t qty) {
    Level& level = (side == Side::kBuy ? bids_ : asks_)[static_cast<std::size_t>(price)];
    orders_[id] = Order{price, qty, level.tail, kNil, side, true};
    if (level.tail != kNil) orders_[level.tail].next = id;
    else level.head = id;
    level.tail = id;
    level.qty += qty;
    ++resting_;
    if (side == Side::kBuy) best_bid_ = std::max(best_bid_, price);
    else best_ask_ = std::min(best_ask_, price);
  }

  void unlink(Level& level, std::uint32_t id) {
    Order& o = orders_[id];
    (o.prev != kNil ? orders_[o.prev].next : level.head) = o.next;
    (o.next != kNil ? orders_[o.next].prev : level.tail) = o.prev;
    level.qty -= o.qty;
    o.live = false;
    --resting_;
  }

  std::vector<Level> bids_, asks_;
  std::int32_t levels_;
  std::int32_t best_bid_ = -1;
  std::int32_t best_ask_;
  std::vector<Order> orders_;
  std::uint64_t trades_ = 0, volume_ = 0, resting_ = 0;
};

// ---------------------------------------------------------------------------------------------------------------
// Messages from a deterministic generator: a mid price on a random walk, passive orders near it, some aggressive
// orders across it, cancels of recently added orders.

enum Kind : int { kPassive, kAggressive, kCancel, kKinds };
const char* const kKindNames[kKinds] = {"add (passive)", "add (aggressive)", "cancel"};

struct Message {
  Kind kind;
  Side side;
  std::int32_t price;
  std::uint32_t qty;
  std::uint32_t id;
};

class Generator {
 public:
  explicit Generator(std::int32_t levels) : mid_(levels / 2), levels_(levels) {}

  Message next() {
    if (random() % 8 == 0) mid_ = std::clamp<std::int32_t>(mid_ + (random() % 2 ? 1 : -1), 100, levels_ - 101);
    const std::uint64_t roll = random() % 100;
    const Side side = random() % 2 ? Side::kBuy : Side::kSell;
    const auto qty = static_cast<std::uint32_t>(1 + random() % 100);
    if (roll < 30 && !recent_.empty()) return {kCancel, side, 0, 0, recent_[random() % recent_.size()]};
    const bool aggressive = roll >= 90;
    // Passive orders queue 1..40 ticks away from mid on their own side; aggressive ones reach 0..5 ticks across.
    const auto offset = static_cast<std::int32_t>(aggressive ? random() % 6 : 1 + random() % 40);
    const std::int32_t price = side == Side::kBuy ? (aggressive ? mid_ + offset : mid_ - offset)
                                                  : (aggressive ? mid_ - offset : mid_ + offset);
    const std::uint32_t id = next_id_++;
    if (recent_.size() < 4096) recent_.push_back(id);
    else recent_[id % recent_.size()] = id;
    return {aggressive ? kAggressive : kPassive, side, price, qty, id};
  }
  std::uint32_t ids_used() const { return next_id_; }

 private:
  std::uint64_t random() {  // xorshift64*
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  std::uint64_t state_ = 0x9E3779B97F4A7C15ull;
  std::int32_t mid_;
  std::int32_t levels_;
  std::uint32_t next_id_ = 0;
  std::vector<std::uint32_t> recent_;
};

// ---------------------------------------------------------------------------------------------------------------
// The per-message clock.

std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

bool invariant_tsc() {
#if defined(__x86_64__) || defined(__i386__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0)
      return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
#endif
  return false;
}

struct Clock {
  bool tsc = false;
  double ns_per_tick = 1.0;

  // lfence keeps rdtsc from running ahead of the work before it; rdtscp waits for the work to finish.
  std::uint64_t start() const {
#if defined(__x86_64__) || defined(__i386__)
    if (tsc) {
      _mm_lfence();
      return __rdtsc();
    }
#endif
    return monotonic_ns();
  }
  std::uint64_t stop() const {
#if defined(__x86_64__) || defined(__i386__)
    if (tsc) {
      unsigned aux;
      const std::uint64_t t = __rdtscp(&aux);
      _mm_lfence();
      return t;
    }
#endif
    return monotonic_ns();
  }
  std::uint64_t to_ns(std::uint64_t ticks) const {
    return static_cast<std::uint64_t>(static_cast<double>(ticks) * ns_per_tick + 0.5);
  }
};

Clock make_clock() {
  Clock clock;
  clock.tsc = invariant_tsc();
  if (!clock.tsc) return clock;
  // The TSC rate against CLOCK_MONOTONIC over 20 ms.
  const std::uint64_t t0 = monotonic_ns(), c0 = clock.start();
  while (monotonic_ns() - t0 < 20'000'000) {
  }
  const std::uint64_t t1 = monotonic_ns(), c1 = clock.stop();
  clock.ns_per_tick = static_cast<double>(t1 - t0) / static_cast<double>(c1 - c0);
  return clock;
}

void print_row(const char* name, const selfperf::Histogram& h, const char* unit = "ns") {
  const auto f = [unit](std::uint64_t v) { return selfperf::format_value(v, unit); };
  std::printf("  %-18s %9llu %10s %10s %10s %10s %10s %10s\n", name, static_cast<unsigned long long>(h.count()),
              f(h.p50()).c_str(), f(h.p90()).c_str(), f(h.p99()).c_str(), f(h.p999()).c_str(),
              f(h.percentile(99.99)).c_str(), f(h.max()).c_str());
}

}  // namespace

int main() {
  constexpr std::int32_t kLevels = 4096;
  constexpr std::size_t kMessages = 1'000'000, kBatch = 10'000;

  const Clock clock = make_clock();
  std::printf("order_book: %zu messages, per-message clock: %s\n", kMessages,
              clock.tsc ? "rdtsc (invariant TSC, calibrated against CLOCK_MONOTONIC)"
                        : "clock_gettime(CLOCK_MONOTONIC) (no invariant TSC here)");
  if (clock.tsc) std::printf("  TSC: %.3f GHz\n", 1.0 / clock.ns_per_tick);

  const bool hardware = selfperf::probe().hardware_events;
  std::vector<std::string> events{"task-clock", "page-faults:u"};
  if (hardware) events.insert(events.end(), {"cycles:u", "instructions:u"});
  selfperf::CounterGroup group(events);
  group.enable();

  // What one group read costs here: why the group is read per batch, not per message.
  selfperf::Histogram read_cost, timer_floor;
  selfperf::GroupReading reading;
  for (int i = 0; i < 2000; ++i) {
    const auto t0 = clock.start();
    group.read(reading);
    read_cost.record(clock.to_ns(clock.stop() - t0));
  }
  for (int i = 0; i < 100'000; ++i) {
    const auto t0 = clock.start();
    timer_floor.record(clock.to_ns(clock.stop() - t0));
  }
  const std::string path(group.read_path());
  std::printf("  timer floor (empty measurement): p50 %s; one CounterGroup read: p50 %s via %s\n",
              selfperf::format_value(timer_floor.p50(), "ns").c_str(),
              selfperf::format_value(read_cost.p50(), "ns").c_str(), path.c_str());

  // Per-message cycles, only where a read is an rdpmc (a read(2) would cost more than the message).
  std::optional<selfperf::CounterGroup> cycles;
  std::string no_cycles = "no hardware PMU here: cycles cannot be opened";
  if (hardware) {
    try {
      cycles.emplace(std::initializer_list<std::string_view>{"cycles:u"});
      cycles->enable();
      cycles->read(reading);
      if (!cycles->read_path().starts_with("rdpmc")) {
        no_cycles = "cycles:u reads via " + std::string(cycles->read_path());
        cycles.reset();
      }
    } catch (const selfperf::Error& e) {
      no_cycles = e.what();
      cycles.reset();
    }
  }
  selfperf::GroupReading c0, c1;
  selfperf::Histogram cycles_all, cycles_by_kind[kKinds];

  OrderBook book(kLevels, kMessages);
  Generator generator(kLevels);
  selfperf::Histogram all, by_kind[kKinds];
  std::uint64_t rejected_cancels = 0;
  struct Worst {
    std::uint64_t ns = 0, index = 0;
    Kind kind = kPassive;
  } worst[5];

  selfperf::FrameLoop batches(group, {.over_budget_capacity = 8});
  // The order pool and levels are preallocated, so a batch that page-faults touches memory for the first time
  // (here only the first batch, while the generator's ring of recent ids grows): flag such batches.
  batches.set_budget(1, 4);
  for (std::size_t i = 0; i < kMessages; ++i) {
    if (i % kBatch == 0) batches.mark();
    const Message m = generator.next();  // generated outside the timed region
    if (cycles) cycles->read(c0);
    const std::uint64_t t0 = clock.start();
    if (m.kind == kCancel) rejected_cancels += !book.cancel(m.id);
    else book.add(m.id, m.side, m.price, m.qty);
    const std::uint64_t ns = clock.to_ns(clock.stop() - t0);
    if (cycles) {
      cycles->read(c1);
      const std::uint64_t n = c1[0].value - c0[0].value;
      cycles_all.record(n);
      cycles_by_kind[m.kind].record(n);
    }
    all.record(ns);
    by_kind[m.kind].record(ns);
    if (ns > worst[4].ns) {
      worst[4] = {ns, i, m.kind};
      std::sort(std::begin(worst), std::end(worst), [](const Worst& a, const Worst& b) { return a.ns > b.ns; });
    }
  }
  batches.mark();

  std::printf("\nbook: %llu trades, volume %llu, %llu orders resting, best bid %d / ask %d, %llu cancels of orders "
              "already gone\n",
              static_cast<unsigned long long>(book.trades()), static_cast<unsigned long long>(book.volume()),
              static_cast<unsigned long long>(book.resting()), book.best_bid(), book.best_ask(),
              static_cast<unsigned long long>(rejected_cancels));
  std::printf("\nper-message latency (includes the timer floor above)\n");
  std::printf("  %-18s %9s %10s %10s %10s %10s %10s %10s\n", "message", "count", "p50", "p90", "p99", "p99.9",
              "p99.99", "max");
  print_row("all", all);
  for (int k = 0; k < kKinds; ++k) print_row(kKindNames[k], by_kind[k]);
  if (cycles) {
    std::printf("\nper-message cycles:u via rdpmc (includes one timer read pair and one counter read)\n");
    print_row("all", cycles_all, "");
    for (int k = 0; k < kKinds; ++k) print_row(kKindNames[k], cycles_by_kind[k], "");
  } else {
    std::printf("\nper-message cycles: not measured (%s); they need a PMU that allows rdpmc\n", no_cycles.c_str());
  }
  std::printf("\nslowest messages (a tail this far out is usually an interrupt or preemption, not the book):\n");
  for (const auto& w : worst)
    if (w.ns) std::printf("  #%-9llu %-18s %s\n", static_cast<unsigned long long>(w.index), kKindNames[w.kind],
                          selfperf::format_value(w.ns, "ns").c_str());
  std::printf("\n%s", all.to_text({.title = "all messages", .unit = "ns", .rows = 16}).c_str());
  std::printf("\nper batch of %zu messages (CounterGroup deltas via FrameLoop):\n%s", kBatch, batches.report().c_str());
  return 0;
}
