// write_pprof: profile.proto written with the protobuf wire format by hand. No Debian package ships
// profile.proto or a C++ library for it, and the message is five small types: a varint writer is shorter
// than vendoring the schema and generating code. Field numbers from github.com/google/pprof proto/profile.proto.
#include "pprof.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <ostream>
#include <string_view>
#include <vector>

#include "selfperf/error.hpp"

namespace selfperf::tool {
namespace {

class Message {
 public:
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<char>(v));
  }
  void field_varint(unsigned field, std::uint64_t v) {
    if (v == 0) return;  // proto3: zero is the default and is not written
    varint(std::uint64_t{field} << 3 | 0);
    varint(v);
  }
  void field_bytes(unsigned field, std::string_view b) {
    varint(std::uint64_t{field} << 3 | 2);
    varint(b.size());
    bytes_.append(b);
  }
  void field_packed(unsigned field, const std::vector<std::uint64_t>& values) {
    if (values.empty()) return;
    Message m;
    for (auto v : values) m.varint(v);
    field_bytes(field, m.bytes_);
  }
  const std::string& bytes() const noexcept { return bytes_; }

 private:
  std::string bytes_;
};

class Strings {
 public:
  Strings() { index(""); }  // string_table[0] must be ""
  std::uint64_t index(const std::string& s) {
    auto [it, added] = ids_.emplace(s, table_.size());
    if (added) table_.push_back(s);
    return it->second;
  }
  const std::vector<std::string>& table() const noexcept { return table_; }

 private:
  std::map<std::string, std::uint64_t> ids_;
  std::vector<std::string> table_;
};

std::string value_type(Strings& strings, const std::string& type, const std::string& unit) {
  Message m;
  m.field_varint(1, strings.index(type));
  m.field_varint(2, strings.index(unit));
  return m.bytes();
}

std::string gzip(const std::string& raw) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error("pprof: zlib deflateInit2 failed");
  std::string out(deflateBound(&z, raw.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw Error("pprof: zlib deflate failed");
  return out;
}

}  // namespace

void write_pprof(const StackCounts& stacks, std::ostream& out, const PprofOptions& options) {
  Strings strings;
  Message profile;
  profile.field_bytes(1, value_type(strings, options.sample_type, options.sample_unit));
  if (options.period_ns) profile.field_bytes(1, value_type(strings, "cpu", "nanoseconds"));

  // One function and one location per distinct name: the folded stacks have names, not addresses.
  std::map<std::string, std::uint64_t> location_of;
  std::vector<std::string> order;
  auto location = [&](const std::string& name) {
    auto [it, added] = location_of.emplace(name, location_of.size() + 1);
    if (added) order.push_back(name);
    return it->second;
  };
  for (const auto& [folded, count] : stacks.folded()) {
    std::vector<std::uint64_t> ids;  // leaf first, as pprof wants; the folded line is root first
    for (std::size_t begin = 0; begin <= folded.size();) {
      std::size_t semi = folded.find(';', begin);
      if (semi == std::string::npos) semi = folded.size();
      if (semi > begin) ids.push_back(location(folded.substr(begin, semi - begin)));
      begin = semi + 1;
    }
    std::reverse(ids.begin(), ids.end());
    Message sample;
    sample.field_packed(1, ids);
    std::vector<std::uint64_t> values{count};
    if (options.period_ns) values.push_back(count * options.period_ns);
    sample.field_packed(2, values);
    profile.field_bytes(2, sample.bytes());
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::uint64_t id = i + 1;
    Message line;
    line.field_varint(1, id);  // function id = location id
    Message loc;
    loc.field_varint(1, id);
    loc.field_bytes(4, line.bytes());
    profile.field_bytes(4, loc.bytes());
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    Message fn;
    fn.field_varint(1, i + 1);
    fn.field_varint(2, strings.index(order[i]));
    fn.field_varint(3, strings.index(order[i]));
    profile.field_bytes(5, fn.bytes());
  }
  if (options.period_ns) {
    profile.field_bytes(11, value_type(strings, "cpu", "nanoseconds"));
    profile.field_varint(12, options.period_ns);
  }
  for (const auto& s : strings.table()) profile.field_bytes(6, s);  // after every index() call above
  const std::string compressed = gzip(profile.bytes());
  out.write(compressed.data(), static_cast<std::streamsize>(compressed.size()));
  if (!out) throw Error("pprof: writing the profile failed");
}

}  // namespace selfperf::tool
