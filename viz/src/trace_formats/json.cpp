// Chrome trace event JSON, written event by event into one reusable buffer: each event makes room
// for its largest size once, then writes through a bare pointer. The writer's memory does not
// grow with the run.
#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

#include "decimal.hpp"
#include "ppsim/base/huge_pages.hpp"
#include "ppsim/viz/trace_format.hpp"
#include "trace_encoder.hpp"

namespace ppsim::viz::detail {

namespace {

constexpr std::size_t kFlushAt = 1 << 20;
// Room for an event's fixed text, its integers and two numbers in the longest form "{:.6f}"
// gives (a double's 309 integer digits, a sign, a point and 6 decimals); names and arguments
// add their own sizes.
constexpr std::size_t kEventRoom = 1024;

// `v` with 6 decimals, as fmt's "{:.6f}" writes it, without its general float path where the
// result is sure: v * 1e6 is exact to well under 0.01 below 2^45 and not near a rounding tie.
// One difference, kept from the writers before: -0.0 is "0.000000", where fmt writes a sign.
char* put_fixed6(char* p, double v) {
  if (v >= 0 && v < 35e12 / 1e6) {
    const double scaled = v * 1e6;
    const auto whole = static_cast<std::uint64_t>(scaled);  // floor: scaled >= 0
    const double frac = scaled - static_cast<double>(whole);
    if (std::fabs(frac - 0.5) > 0.02) {
      const std::uint64_t n = whole + (frac > 0.5 ? 1 : 0);
      p = put_uint(p, n / 1000000);
      *p = '.';
      digits_back(p + 7, n % 1000000, 6);
      return p + 7;
    }
  }
  return fmt::format_to(p, FMT_COMPILE("{:.6f}"), v);
}

// Quotes and backslashes escaped, control characters dropped (names never need them). At most
// twice the input's size.
char* put_escaped(char* p, std::string_view s) {
  for (const char c : s) {
    if (c == '"' || c == '\\')
      *p++ = '\\';
    else if (static_cast<unsigned char>(c) < 0x20)
      continue;
    *p++ = c;
  }
  return p;
}

class JsonEncoder : public TraceEncoder {
 public:
  explicit JsonEncoder(ByteSink& out) : out_(out) {
    reserve_buffer(kFlushAt + 4 * kEventRoom);
    char* p = room(64);
    p_ = put(p, "{\"traceEvents\":[\n");
  }

  void process(int pid, std::string_view head, std::string_view name, int sort_index) override {
    char* p = begin(2 * (head.size() + name.size()));
    p = put(p, R"("ph":"M","name":"process_name","pid":)");
    p = put_int(p, pid);
    p = put(p, R"(,"tid":0,"args":{"name":")");
    p = put_escaped(p, head);
    p = put_escaped(p, name);
    p = put(p, "\"}");
    end(p);
    p = begin(0);
    p = put(p, R"("ph":"M","name":"process_sort_index","pid":)");
    p = put_int(p, pid);
    p = put(p, R"(,"tid":0,"args":{"sort_index":)");
    p = put_int(p, sort_index);
    *p++ = '}';
    end(p);
  }

  void thread(int pid, int tid, std::string_view head, std::string_view name) override {
    char* p = begin(2 * (head.size() + name.size()));
    p = put(p, R"("ph":"M","name":"thread_name","pid":)");
    p = put_int(p, pid);
    p = put(p, R"(,"tid":)");
    p = put_int(p, tid);
    p = put(p, R"(,"args":{"name":")");
    p = put_escaped(p, head);
    p = put_escaped(p, name);
    p = put(p, "\"}");
    end(p);
  }

  void slice(int pid, int tid, double ts, double dur, std::string_view name, TraceCategory cat,
             std::span<const TraceArg> args, std::uint64_t, std::uint64_t) override {
    char* p = begin(2 * name.size() + args_room(args));
    p = put(p, R"("ph":"X","name":")");
    p = put_escaped(p, name);
    p = put_cat_pid_tid(p, cat, pid, tid);
    p = put_ts(p, ts);
    p = put(p, R"(,"dur":)");
    p = put_fixed6(p, dur);
    *p++ = ',';
    p = put_args(p, args);
    end(p);
  }

  void instant(int pid, int tid, double ts, std::string_view head, std::string_view name,
               TraceCategory cat, bool global, std::span<const TraceArg> args) override {
    char* p = begin(2 * (head.size() + name.size()) + args_room(args));
    p = put(p, global ? R"("ph":"i","s":"g","name":")" : R"("ph":"i","s":"t","name":")");
    p = put_escaped(p, head);
    p = put_escaped(p, name);
    p = put_cat_pid_tid(p, cat, pid, tid);
    // The global instant is the run's, at 0: written "0" as it always was (fmt's shortest form).
    p = global ? fmt::format_to(p, FMT_COMPILE("{}"), ts) : put_ts(p, ts);
    *p++ = ',';
    p = put_args(p, args);
    end(p);
  }

  void flow(std::uint64_t id, int src_pid, int src_tid, int dst_pid, int dst_tid,
            double ts) override {
    flow_end(R"("ph":"s","id":)", id, src_pid, src_tid, ts);
    flow_end(R"("ph":"f","bp":"e","id":)", id, dst_pid, dst_tid, ts);
  }

  void counter(int pid, CounterKind kind, double ts, std::int64_t value) override {
    char* p = begin(0);
    p = put(p, kind == CounterKind::memory ? R"("ph":"C","name":"memory","pid":)"
                                           : R"("ph":"C","name":"inflight","pid":)");
    p = put_int(p, pid);
    p = put(p, R"(,"ts":)");
    p = put_ts(p, ts);
    p = put(p,
            kind == CounterKind::memory ? R"(,"args":{"bytes":)" : R"(,"args":{"microbatches":)");
    p = put_int(p, value);
    *p++ = '}';
    end(p);
  }

  void close(std::string_view other_data) override {
    char* p = room(64 + other_data.size());
    p = put(p, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{");
    p = put(p, other_data);
    p_ = put(p, "}}\n");
    flush();
    out_.finish();
  }

 private:
  // One end of a flow arrow. Flow ids count from 0 in the JSON form.
  void flow_end(std::string_view head, std::uint64_t id, int pid, int tid, double ts) {
    char* p = begin(0);
    p = put(p, head);
    p = put_uint(p, id - 1);
    p = put(p, R"(,"name":"transfer","cat":"flow","pid":)");
    p = put_int(p, pid);
    p = put(p, R"(,"tid":)");
    p = put_int(p, tid);
    p = put(p, R"(,"ts":)");
    p = put_flow_ts(p, ts);
    end(p);
  }
  // The end of an event's name, its category and place, up to its time.
  static char* put_cat_pid_tid(char* p, TraceCategory cat, int pid, int tid) {
    p = put(p, R"(","cat":")");
    p = put(p, to_string(cat));
    p = put(p, R"(","pid":)");
    p = put_int(p, pid);
    p = put(p, R"(,"tid":)");
    p = put_int(p, tid);
    return put(p, R"(,"ts":)");
  }
  // Flows' times were always fmt's "{:.6f}", -0.0 included.
  char* put_flow_ts(char* p, double ts) {
    return std::signbit(ts) ? fmt::format_to(p, FMT_COMPILE("{:.6f}"), ts) : put_ts(p, ts);
  }
  // Events come in bursts at one time (a slice, its counters, posts): the last time's text is
  // kept and copied.
  char* put_ts(char* p, double ts) {
    const auto bits = std::bit_cast<std::uint64_t>(ts);
    if (bits != last_ts_bits_ || last_ts_size_ == 0) {
      char* const q = put_fixed6(p, ts);
      const auto size = static_cast<std::size_t>(q - p);
      last_ts_bits_ = bits;
      last_ts_size_ = size <= sizeof last_ts_ ? size : 0;
      if (last_ts_size_) std::memcpy(last_ts_, p, size);
      return q;
    }
    std::memcpy(p, last_ts_, sizeof last_ts_);  // a fixed size: room is kEventRoom
    return p + last_ts_size_;
  }
  // A pointer to at least `n` free bytes at the buffer's end.
  char* room(std::size_t n) {
    if (static_cast<std::size_t>(cap_end_ - p_) < n) {  // an event of kilobytes of names
      const auto used = static_cast<std::size_t>(p_ - buf_.get());
      const auto cap = static_cast<std::size_t>(cap_end_ - buf_.get());
      reserve_buffer(std::max(2 * cap, used + n));
    }
    return p_;
  }
  void reserve_buffer(std::size_t size) {
    auto bigger = std::make_unique_for_overwrite<char[]>(size);
    base::prefault(bigger.get(), size);  // one call, not a fault per page
    const std::size_t used = buf_ ? static_cast<std::size_t>(p_ - buf_.get()) : 0;
    if (used) std::memcpy(bigger.get(), buf_.get(), used);
    buf_ = std::move(bigger);
    p_ = buf_.get() + used;
    cap_end_ = buf_.get() + size;
  }
  // Opens an event with `extra` bytes of room beyond kEventRoom.
  char* begin(std::size_t extra) {
    char* p = room(kEventRoom + extra);
    if (!first_) p = put(p, ",\n");
    first_ = false;
    *p++ = '{';
    return p;
  }
  void end(char* p) {
    *p++ = '}';
    p_ = p;
    if (static_cast<std::size_t>(p_ - buf_.get()) >= kFlushAt) flush();
  }
  // The buffer itself goes to the sink, which may keep it and give another of the same size.
  void flush() {
    const auto used = static_cast<std::size_t>(p_ - buf_.get());
    const auto cap = static_cast<std::size_t>(cap_end_ - buf_.get());
    struct Rebase {  // whether the sink returns or throws, p_ points into what buf_ holds
      JsonEncoder& e;
      std::size_t cap;
      ~Rebase() {
        e.p_ = e.buf_.get();
        e.cap_end_ = e.p_ + cap;
      }
    } rebase{*this, cap};
    out_.write_buffer(buf_, used, cap);
  }
  static std::size_t args_room(std::span<const TraceArg> args) {
    std::size_t n = 16;
    for (const auto& a : args) {
      n += a.key.size() + 32;  // quotes, colon, comma, and an integer's or a bool's text
      if (a.type == TraceArg::Type::string) n += 2 * a.text.size();
      if (a.type == TraceArg::Type::json) n += a.text.size();
    }
    return n;
  }
  static char* put_args(char* p, std::span<const TraceArg> args) {
    p = put(p, "\"args\":{");
    bool first = true;
    for (const auto& a : args) {
      if (!first) *p++ = ',';
      first = false;
      *p++ = '"';
      p = put(p, a.key);
      p = put(p, "\":");
      switch (a.type) {
        case TraceArg::Type::integer:
          p = put_int(p, a.number);
          break;
        case TraceArg::Type::boolean:
          p = put(p, a.number ? "true" : "false");
          break;
        case TraceArg::Type::string:
          *p++ = '"';
          p = put_escaped(p, a.text);
          *p++ = '"';
          break;
        case TraceArg::Type::json:
          p = put(p, a.text);
          break;
      }
    }
    *p++ = '}';
    return p;
  }

  ByteSink& out_;
  std::unique_ptr<char[]> buf_;
  char* p_ = nullptr;
  char* cap_end_ = nullptr;
  bool first_ = true;
  std::uint64_t last_ts_bits_ = 0;
  std::size_t last_ts_size_ = 0;  // 0: nothing kept
  char last_ts_[32];
};

}  // namespace

std::unique_ptr<TraceEncoder> make_json_encoder(ByteSink& out) {
  return std::make_unique<JsonEncoder>(out);
}

}  // namespace ppsim::viz::detail

namespace ppsim::viz::trace_formats {

// The default: a file name no format claims is written as JSON.
void register_json(TraceFormatRegistry& registry) {
  registry.add({"json",
                {"chrome"},
                {".json"},
                "FILE.json (Chrome JSON)",
                detail::make_stream_sink,
                detail::make_json_encoder});
}

}  // namespace ppsim::viz::trace_formats
