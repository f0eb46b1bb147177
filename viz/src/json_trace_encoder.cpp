// Chrome trace event JSON, written event by event into one reusable buffer with formats parsed at
// compile time: the writer's memory does not grow with the run.
#include <fmt/compile.h>
#include <fmt/format.h>

#include <cmath>

#include "trace_encoder.hpp"

namespace ppsim::viz::detail {

std::string_view to_string(TraceCategory c) {
  switch (c) {
    case TraceCategory::compute:
      return "compute";
    case TraceCategory::comm:
      return "comm";
    case TraceCategory::transfer:
      return "transfer";
    case TraceCategory::deadlock:
      return "deadlock";
    case TraceCategory::run:
      return "run";
  }
  return "";
}

namespace {

constexpr std::size_t kFlushAt = 1 << 20;

// `v` with 6 decimals, as fmt's "{:.6f}" writes it, without its general float path where the
// result is sure: v * 1e6 is exact to well under 0.01 below 2^45 and not near a rounding tie.
void fixed6(fmt::memory_buffer& buf, double v) {
  if (v >= 0 && v < 35e12 / 1e6) {
    const double scaled = v * 1e6;
    const double whole = std::floor(scaled);
    const double frac = scaled - whole;
    if (std::fabs(frac - 0.5) > 0.02) {
      const auto n = static_cast<std::uint64_t>(whole) + (frac > 0.5 ? 1 : 0);
      fmt::format_to(fmt::appender(buf), FMT_COMPILE("{}.{:06}"), n / 1000000, n % 1000000);
      return;
    }
  }
  fmt::format_to(fmt::appender(buf), FMT_COMPILE("{:.6f}"), v);
}

class JsonEncoder : public TraceEncoder {
 public:
  explicit JsonEncoder(ByteSink& out) : out_(out) { raw("{\"traceEvents\":[\n"); }

  void process(int pid, std::string_view head, std::string_view name, int sort_index) override {
    begin();
    fmt::format_to(
        it(), FMT_COMPILE(R"("ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":")"),
        pid);
    escaped(head);
    escaped(name);
    raw("\"}");
    end();
    begin();
    fmt::format_to(
        it(),
        FMT_COMPILE(
            R"("ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}})"),
        pid, sort_index);
    end();
  }

  void thread(int pid, int tid, std::string_view head, std::string_view name) override {
    begin();
    fmt::format_to(
        it(), FMT_COMPILE(R"("ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":")"),
        pid, tid);
    escaped(head);
    escaped(name);
    raw("\"}");
    end();
  }

  void slice(int pid, int tid, double ts, double dur, std::string_view name, TraceCategory cat,
             std::span<const TraceArg> args, std::uint64_t, std::uint64_t) override {
    begin();
    raw(R"("ph":"X","name":")");
    escaped(name);
    raw(R"(","cat":")");
    raw(to_string(cat));
    fmt::format_to(it(), FMT_COMPILE(R"(","pid":{},"tid":{},"ts":)"), pid, tid);
    fixed6(buf_, ts);
    raw(R"(,"dur":)");
    fixed6(buf_, dur);
    buf_.push_back(',');
    write_args(args);
    end();
  }

  void instant(int pid, int tid, double ts, std::string_view head, std::string_view name,
               TraceCategory cat, bool global, std::span<const TraceArg> args) override {
    begin();
    raw(global ? R"("ph":"i","s":"g","name":")" : R"("ph":"i","s":"t","name":")");
    escaped(head);
    escaped(name);
    raw(R"(","cat":")");
    raw(to_string(cat));
    // The global instant is the run's, at 0: written "0" as it always was.
    if (global)
      fmt::format_to(it(), FMT_COMPILE(R"(","pid":{},"tid":{},"ts":{},)"), pid, tid, ts);
    else {
      fmt::format_to(it(), FMT_COMPILE(R"(","pid":{},"tid":{},"ts":)"), pid, tid);
      fixed6(buf_, ts);
      buf_.push_back(',');
    }
    write_args(args);
    end();
  }

  void flow(std::uint64_t id, int src_pid, int src_tid, int dst_pid, int dst_tid,
            double ts) override {
    // Flow ids count from 0 in the JSON form.
    begin();
    fmt::format_to(
        it(),
        FMT_COMPILE(
            R"("ph":"s","id":{},"name":"transfer","cat":"flow","pid":{},"tid":{},"ts":{:.6f})"),
        id - 1, src_pid, src_tid, ts);
    end();
    begin();
    fmt::format_to(
        it(),
        FMT_COMPILE(
            R"("ph":"f","bp":"e","id":{},"name":"transfer","cat":"flow","pid":{},"tid":{},"ts":{:.6f})"),
        id - 1, dst_pid, dst_tid, ts);
    end();
  }

  void counter(int pid, CounterKind kind, double ts, std::int64_t value) override {
    begin();
    if (kind == CounterKind::memory)
      fmt::format_to(it(), FMT_COMPILE(R"("ph":"C","name":"memory","pid":{},"ts":)"), pid);
    else
      fmt::format_to(it(), FMT_COMPILE(R"("ph":"C","name":"inflight","pid":{},"ts":)"), pid);
    fixed6(buf_, ts);
    if (kind == CounterKind::memory)
      fmt::format_to(it(), FMT_COMPILE(R"(,"args":{{"bytes":{}}})"), value);
    else
      fmt::format_to(it(), FMT_COMPILE(R"(,"args":{{"microbatches":{}}})"), value);
    end();
  }

  void close(std::string_view other_data) override {
    raw("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{");
    raw(other_data);
    raw("}}\n");
    flush();
    out_.finish();
  }

 private:
  fmt::appender it() { return fmt::appender(buf_); }
  void raw(std::string_view s) { buf_.append(s); }
  void begin() {
    if (!first_) raw(",\n");
    first_ = false;
    buf_.push_back('{');
  }
  void end() {
    buf_.push_back('}');
    if (buf_.size() >= kFlushAt) flush();
  }
  void flush() {
    out_.write(buf_.data(), buf_.size());
    buf_.clear();
  }
  // Quotes and backslashes escaped, control characters dropped (names never need them).
  void escaped(std::string_view s) {
    std::size_t done = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) continue;
      buf_.append(s.substr(done, i - done));
      if (c == '"' || c == '\\') {
        buf_.push_back('\\');
        buf_.push_back(c);
      }
      done = i + 1;
    }
    buf_.append(s.substr(done));
  }
  void write_args(std::span<const TraceArg> args) {
    raw("\"args\":{");
    bool first = true;
    for (const auto& a : args) {
      if (!first) buf_.push_back(',');
      first = false;
      buf_.push_back('"');
      raw(a.key);
      raw("\":");
      switch (a.type) {
        case TraceArg::Type::integer:
          fmt::format_to(it(), FMT_COMPILE("{}"), a.number);
          break;
        case TraceArg::Type::boolean:
          raw(a.number ? "true" : "false");
          break;
        case TraceArg::Type::string:
          buf_.push_back('"');
          escaped(a.text);
          buf_.push_back('"');
          break;
        case TraceArg::Type::json:
          raw(a.text);
          break;
      }
    }
    buf_.push_back('}');
  }

  ByteSink& out_;
  fmt::memory_buffer buf_;
  bool first_ = true;
};

}  // namespace

std::unique_ptr<TraceEncoder> make_json_encoder(ByteSink& out) {
  return std::make_unique<JsonEncoder>(out);
}

}  // namespace ppsim::viz::detail
