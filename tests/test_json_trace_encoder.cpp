// The Chrome-trace JSON encoder (viz/src/json_trace_encoder.cpp) writes its numbers and names
// through a bare pointer, not fmt: its bytes must be what fmt's "{}" and "{:.6f}" give (but for
// -0.0 outside flows: "0.000000", as the writers always wrote it), for every kind of event, at
// the edges of its fast paths (rounding ties, 2^45, negatives, huge values, NaN and infinities,
// 64-bit integers), for names that need escaping or are larger than its event room, for the
// largest event it can write, and across its 1 MiB flushes, handed to a background sink whole.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "trace_encoder.hpp"

using namespace ppsim::viz::detail;

namespace {

// "{:.6f}" as the writers have always written times outside flows: -0.0 without its sign.
std::string time6(double v) {
  return v == 0 && std::signbit(v) ? std::string("0.000000") : fmt::format("{:.6f}", v);
}

struct Collect : ByteSink {
  std::string bytes;
  int finished = 0;
  void write(const char* data, std::size_t size) override { bytes.append(data, size); }
  void finish() override { ++finished; }
};

// The text the encoder must give, built with fmt as the writer once did.
struct Reference {
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  void begin() {
    if (!first) out += ",\n";
    first = false;
    out += '{';
  }
  static std::string esc(std::string_view s) {
    std::string r;
    for (char c : s) {
      if (c == '"' || c == '\\') r += '\\';
      if (static_cast<unsigned char>(c) < 0x20) continue;
      r += c;
    }
    return r;
  }
  static std::string args(const std::vector<TraceArg>& a) {
    std::string r = "\"args\":{";
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (i) r += ',';
      r += fmt::format("\"{}\":", a[i].key);
      switch (a[i].type) {
        case TraceArg::Type::integer:
          r += fmt::format("{}", a[i].number);
          break;
        case TraceArg::Type::boolean:
          r += a[i].number ? "true" : "false";
          break;
        case TraceArg::Type::string:
          r += '"' + esc(a[i].text) + '"';
          break;
        case TraceArg::Type::json:
          r += a[i].text;
          break;
      }
    }
    return r + '}';
  }
  void slice(int pid, int tid, double ts, double dur, std::string_view name, TraceCategory cat,
             const std::vector<TraceArg>& a) {
    begin();
    out += fmt::format(R"("ph":"X","name":"{}","cat":"{}","pid":{},"tid":{},"ts":{},"dur":{},)",
                       esc(name), to_string(cat), pid, tid, time6(ts), time6(dur));
    out += args(a) + '}';
  }
  void instant(int pid, int tid, double ts, std::string_view head, std::string_view name,
               TraceCategory cat, bool global, const std::vector<TraceArg>& a) {
    begin();
    out += fmt::format(R"("ph":"i","s":"{}","name":"{}{}","cat":"{}","pid":{},"tid":{},"ts":)",
                       global ? "g" : "t", esc(head), esc(name), to_string(cat), pid, tid);
    out += global ? fmt::format("{}", ts) : time6(ts);
    out += ',' + args(a) + '}';
  }
  void flow(std::uint64_t id, int sp, int st, int dp, int dt, double ts) {
    begin();
    out += fmt::format(
        R"("ph":"s","id":{},"name":"transfer","cat":"flow","pid":{},"tid":{},"ts":{:.6f}}})",
        id - 1, sp, st, ts);
    begin();
    out += fmt::format(
        R"("ph":"f","bp":"e","id":{},"name":"transfer","cat":"flow","pid":{},"tid":{},"ts":{:.6f}}})",
        id - 1, dp, dt, ts);
  }
  void counter(int pid, CounterKind kind, double ts, std::int64_t v) {
    begin();
    const bool mem = kind == CounterKind::memory;
    out +=
        fmt::format(R"("ph":"C","name":"{}","pid":{},"ts":{},"args":{{"{}":{}}}}})",
                    mem ? "memory" : "inflight", pid, time6(ts), mem ? "bytes" : "microbatches", v);
  }
  void process(int pid, std::string_view head, std::string_view name, int sort) {
    begin();
    out +=
        fmt::format(R"("ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":"{}{}"}}}})",
                    pid, esc(head), esc(name));
    begin();
    out += fmt::format(
        R"("ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
        pid, sort);
  }
  void thread(int pid, int tid, std::string_view head, std::string_view name) {
    begin();
    out +=
        fmt::format(R"("ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}{}"}}}})",
                    pid, tid, esc(head), esc(name));
  }
  void close(std::string_view other) {
    out += fmt::format("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{{{}}}}}\n", other);
  }
};

// Times at the edges of the encoder's fast path for "{:.6f}" and around it.
std::vector<double> edge_times() {
  std::vector<double> v = {0.0,
                           1e-7,
                           4.999999e-7,
                           5e-7,
                           1.5e-6,
                           2.5e-6,
                           0.1,
                           0.3,
                           1.0000005,
                           123.4567895,
                           999999.9999995,
                           16217.77216,
                           35e6 - 1e-6,
                           35e6,
                           35e6 + 0.25,
                           std::ldexp(1.0, 45) / 1e6,
                           1e15,
                           1.7976931348623157e308,
                           -1.0,
                           -1e-7,
                           -123.4567895,
                           -1.7976931348623157e308,
                           -0.0,
                           std::numeric_limits<double>::quiet_NaN(),
                           -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  std::mt19937_64 rng(42);
  for (int i = 0; i < 20000; ++i) {
    const int scale = static_cast<int>(rng() % 12);
    double x = std::uniform_real_distribution<double>(0, 1)(rng) * std::pow(10.0, scale - 3);
    if (rng() % 5 == 0) x = std::round(x * 1e6) / 1e6 + 5e-7;  // near a tie
    if (rng() % 7 == 0) x = static_cast<double>(rng() % 100000) * 0.01;
    v.push_back(x);
  }
  return v;
}

std::vector<std::int64_t> edge_ints() {
  std::vector<std::int64_t> v = {0,
                                 1,
                                 9,
                                 10,
                                 99,
                                 100,
                                 101,
                                 999,
                                 1000,
                                 65535,
                                 1 << 30,
                                 4366270464,
                                 -1,
                                 -9,
                                 -10,
                                 -100,
                                 999999999999999999,
                                 1000000000000000000,
                                 std::numeric_limits<std::int64_t>::max(),
                                 std::numeric_limits<std::int64_t>::min()};
  for (int d = 1; d <= 18; ++d) {
    const auto p = static_cast<std::int64_t>(std::pow(10.0, d));
    v.insert(v.end(), {p - 1, p, p + 1, -(p - 1), -p});
  }
  return v;
}

// Drives the encoder and the reference with the same events; returns the expected text.
std::string encode_events(TraceEncoder& encoder) {
  TraceEncoder* enc = &encoder;
  Reference ref;
  const auto times = edge_times();
  const auto ints = edge_ints();
  const std::string big_name(5000, 'n');  // larger than an event's fixed room
  const std::string nasty =
      "a\"b\\c\x01\x1f"
      "d";
  enc->process(0, "run ", "rank 0", 0);
  ref.process(0, "run ", "rank 0", 0);
  enc->thread(0, 1, nasty, big_name);
  ref.thread(0, 1, nasty, big_name);
  std::size_t k = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    const double ts = times[i], dur = times[(i * 7 + 3) % times.size()];
    const std::int64_t a = ints[i % ints.size()], b = ints[(i * 3 + 1) % ints.size()];
    const int pid = static_cast<int>(a), tid = static_cast<int>(b);
    const std::string_view name = i % 97 == 0   ? std::string_view(big_name)
                                  : i % 13 == 0 ? std::string_view(nasty)
                                                : std::string_view("3SEND_F14#30");
    std::vector<TraceArg> args = {int_arg("bytes", a), int_arg("to", b),
                                  str_arg("kind", i % 11 == 0 ? std::string_view(nasty) : "F"),
                                  bool_arg("in_cycle", i % 2 == 0)};
    if (i % 17 == 0) args.push_back(json_arg("config", R"({"x":[1,2.5,"y"]})"));
    switch (k++ % 5) {
      case 0:
        enc->slice(pid, tid, ts, dur, name, TraceCategory::compute, args, 0, 0);
        ref.slice(pid, tid, ts, dur, name, TraceCategory::compute, args);
        break;
      case 1:
        enc->instant(pid, tid, ts, "post ", name, TraceCategory::comm, false, args);
        ref.instant(pid, tid, ts, "post ", name, TraceCategory::comm, false, args);
        break;
      case 2:
        enc->flow(static_cast<std::uint64_t>(b) + 1, pid, tid, tid, pid, ts);
        ref.flow(static_cast<std::uint64_t>(b) + 1, pid, tid, tid, pid, ts);
        break;
      case 3:
        enc->counter(pid, i % 2 ? CounterKind::memory : CounterKind::inflight, ts, b);
        ref.counter(pid, i % 2 ? CounterKind::memory : CounterKind::inflight, ts, b);
        break;
      default:  // the same time again, as bursts of events at one instant come
        enc->counter(pid, CounterKind::memory, times[i - 1], a);
        ref.counter(pid, CounterKind::memory, times[i - 1], a);
        break;
    }
  }
  enc->instant(0, 0, 0.0, "run: ", "title", TraceCategory::run, true, {});
  ref.instant(0, 0, 0.0, "run: ", "title", TraceCategory::run, true, {});
  // The largest event: two numbers of 317 characters, the smallest integers, every kind of
  // argument.
  const double huge = -std::numeric_limits<double>::max();
  const auto min64 = std::numeric_limits<std::int64_t>::min();
  const int min32 = std::numeric_limits<int>::min();
  const std::vector<TraceArg> most = {int_arg("position", min64),   int_arg("stage", min64),
                                      int_arg("microbatch", min64), int_arg("peer", min64),
                                      bool_arg("in_cycle", false),  str_arg("op", "x")};
  enc->slice(min32, min32, huge, huge, "", TraceCategory::deadlock, most, 0, 0);
  ref.slice(min32, min32, huge, huge, "", TraceCategory::deadlock, most);
  enc->close(R"("title":"t")");
  ref.close(R"("title":"t")");
  return ref.out;
}

void check_same(const std::string& got, const std::string& want) {
  std::size_t same = 0;  // where they part, for the message
  while (same < got.size() && same < want.size() && got[same] == want[same]) ++same;
  INFO("encoder:   " << got.substr(same > 80 ? same - 80 : 0, 160));
  INFO("reference: " << want.substr(same > 80 ? same - 80 : 0, 160));
  CHECK(got.size() == want.size());
  CHECK(got == want);
}

}  // namespace

TEST_CASE("json_trace_encoder.json_trace_encoder_s_numbers", "[trace]") {
  // The JSON trace encoder's numbers and names are fmt's for every kind of event
  Collect sink;
  auto enc = make_json_encoder(sink);
  const std::string want = encode_events(*enc);
  REQUIRE(sink.finished == 1);
  REQUIRE(sink.bytes.size() > (std::size_t{3} << 20));  // several flushes
  check_same(sink.bytes, want);
}

TEST_CASE("json_trace_encoder.json_trace_encoder_hands_whole", "[trace][threads]") {
  // The JSON trace encoder hands whole buffers to a background sink and keeps its bytes
  // Each full buffer goes to the writer thread and a spare comes back: the encoder must write
  // into what it gets back, whether it is a new block or one already written.
  auto inner = std::make_unique<Collect>();
  Collect& got = *inner;
  auto sink = make_background_sink(std::move(inner));
  auto enc = make_json_encoder(*sink);
  const std::string want = encode_events(*enc);
  REQUIRE(got.finished == 1);
  check_same(got.bytes, want);
}
