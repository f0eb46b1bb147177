#pragma once
// The file formats of a streamed trace behind one interface: TraceStream (trace_stream.cpp) turns
// a run's events into processes, threads, slices, instants, flows and counters; an encoder writes
// them as Chrome trace JSON or as Perfetto's protobuf, and a byte sink takes the bytes to a
// stream, gzip-compressed or not. Internal to viz.
#include <cstdint>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ppsim::viz::detail {

enum class TraceCategory : std::uint8_t { compute, comm, transfer, deadlock, run };
std::string_view to_string(TraceCategory c);

// One argument of an event. Strings are raw (encoders escape them); json is JSON text.
struct TraceArg {
  enum class Type : std::uint8_t { integer, string, boolean, json };
  std::string_view key;
  Type type = Type::integer;
  std::int64_t number = 0;
  std::string_view text;
};
inline TraceArg int_arg(std::string_view key, std::int64_t v) {
  return {key, TraceArg::Type::integer, v, {}};
}
inline TraceArg str_arg(std::string_view key, std::string_view v) {
  return {key, TraceArg::Type::string, 0, v};
}
inline TraceArg bool_arg(std::string_view key, bool v) {
  return {key, TraceArg::Type::boolean, v ? 1 : 0, {}};
}
inline TraceArg json_arg(std::string_view key, std::string_view v) {
  return {key, TraceArg::Type::json, 0, v};
}

enum class CounterKind : std::uint8_t { memory, inflight };

// Where encoded bytes go. write() takes large blocks; finish() once at the end.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const char* data, std::size_t size) = 0;
  // The first `size` bytes of `buffer` (of `capacity` bytes), as write() takes them. A sink may
  // keep the buffer and put another of the same capacity in its place, returning or throwing.
  virtual void write_buffer(std::unique_ptr<char[]>& buffer, std::size_t size,
                            std::size_t /*capacity*/) {
    write(buffer.get(), size);
  }
  virtual void finish() = 0;
};
std::unique_ptr<ByteSink> make_stream_sink(std::ostream& out);
// One gzip member, level 1, deterministic bytes: ISA-L's encoder where the build has it (several
// times faster), zlib's otherwise. make_isal_gzip_sink is nullptr without ISA-L.
std::unique_ptr<ByteSink> make_gzip_sink(std::ostream& out);
std::unique_ptr<ByteSink> make_zlib_gzip_sink(std::ostream& out);
std::unique_ptr<ByteSink> make_isal_gzip_sink(std::ostream& out);
// `inner` on a thread of its own; the bytes and their order are the same. finish() (or the first
// write after a failure) rethrows what inner threw.
std::unique_ptr<ByteSink> make_background_sink(std::unique_ptr<ByteSink> inner);

// Times in microseconds. Names come in two parts (head + name) so callers need not join them.
class TraceEncoder {
 public:
  virtual ~TraceEncoder() = default;
  virtual void process(int pid, std::string_view name_head, std::string_view name,
                       int sort_index) = 0;
  virtual void thread(int pid, int tid, std::string_view name_head, std::string_view name) = 0;
  // A slice [ts, ts + dur); flow_out / flow_in (0: none) start or end a flow arrow at it.
  virtual void slice(int pid, int tid, double ts, double dur, std::string_view name,
                     TraceCategory cat, std::span<const TraceArg> args, std::uint64_t flow_out,
                     std::uint64_t flow_in) = 0;
  // global: an instant for the whole trace (JSON scope "g"); otherwise one on the thread.
  virtual void instant(int pid, int tid, double ts, std::string_view name_head,
                       std::string_view name, TraceCategory cat, bool global,
                       std::span<const TraceArg> args) = 0;
  // The arrow of flow `id` (>= 1) from a send slice to the receive slice, drawn at ts.
  virtual void flow(std::uint64_t id, int src_pid, int src_tid, int dst_pid, int dst_tid,
                    double ts) = 0;
  virtual void counter(int pid, CounterKind kind, double ts, std::int64_t value) = 0;
  // other_data: the members of the JSON trace's otherData object (without braces).
  virtual void close(std::string_view other_data) = 0;
};

std::unique_ptr<TraceEncoder> make_json_encoder(ByteSink& out);
std::unique_ptr<TraceEncoder> make_perfetto_encoder(ByteSink& out);

}  // namespace ppsim::viz::detail

namespace ppsim::schedules {
class Program;
}
namespace ppsim::viz {
struct ChromeTraceOptions;
}
namespace ppsim::viz::detail {
// The otherData members of a single run: title, time unit and the program's shape.
std::string other_data(const ChromeTraceOptions& options, std::string_view time_unit,
                       const schedules::Program& program);
// JSON text of a value; strings that are not valid UTF-8 get U+FFFD instead of failing.
std::string dump_json(const nlohmann::json& j);
}  // namespace ppsim::viz::detail
