// Perfetto's native trace format: a protobuf `Trace` of TracePackets holding TrackDescriptors and
// TrackEvents, encoded here by hand (varints and length-delimited fields; no protobuf library).
// Field numbers are those of perfetto's protos/perfetto/trace/{trace_packet,interned_data,
// track_event/track_event,track_descriptor,counter_descriptor,debug_annotation}.proto.
//
// Mapping from the JSON form: a process per rank (ProcessDescriptor pid = JSON pid + 1, since
// Perfetto reserves pid 0 for the idle process), a named child track per JSON thread (not a
// ThreadDescriptor: tids repeat across ranks and tid 0 is the idle thread), counter tracks
// "memory" (bytes) and "inflight" under the process, and BEGIN/END pairs for slices. Slices that
// would overlap on one track (Perfetto needs them nested) go to extra tracks "NAME (2)", ...
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "ppsim/viz/trace_format.hpp"
#include "trace_encoder.hpp"

namespace ppsim::viz::detail {

namespace {

// Wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLen = 2;

// Field numbers.
namespace f {
constexpr int trace_packet = 1;  // Trace
// TracePacket
constexpr int timestamp = 8, sequence_id = 10, track_event = 11, interned_data = 12,
              sequence_flags = 13, track_descriptor = 60;
// TrackEvent
constexpr int category_iids = 3, debug_annotations = 4, type = 9, track_uuid = 11, name = 23,
              counter_value = 30, flow_ids = 47, terminating_flow_ids = 48;
// TrackDescriptor
constexpr int uuid = 1, td_name = 2, process = 3, parent_uuid = 5, counter = 8, child_ordering = 11,
              sibling_order_rank = 12;
// ProcessDescriptor
constexpr int pid = 1, process_name = 6;
// CounterDescriptor
constexpr int unit = 3;
// DebugAnnotation
constexpr int da_name_iid = 1, bool_value = 2, int_value = 4, string_value = 6,
              legacy_json_value = 9;
// InternedData, and EventCategory / DebugAnnotationName inside it
constexpr int event_categories = 1, debug_annotation_names = 3, iid = 1, iname = 2;
}  // namespace f

constexpr std::uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4;
constexpr std::uint64_t kIncrementalStateCleared = 1, kNeedsIncrementalState = 2;
constexpr std::uint64_t kUnitCount = 2, kUnitSizeBytes = 3;  // CounterDescriptor.Unit
constexpr std::uint64_t kChildOrderingExplicit = 3;
constexpr std::uint64_t kSequence = 1;
constexpr std::size_t kFlushAt = 1 << 20;

// A growing byte buffer with protobuf field writers. Bytes go through a raw pointer into storage
// kept larger than needed: this is the hot path of a large trace, written once per field.
class Proto {
 public:
  static constexpr std::size_t kMaxVarint = 10;
  static std::size_t varint_size(std::uint64_t v) {
    std::size_t n = 1;
    while (v >= 0x80) {
      v >>= 7;
      ++n;
    }
    return n;
  }

  [[gnu::always_inline]] void varint(std::uint64_t v) {
    char* p = room(kMaxVarint);
    if (v < 0x80) {  // tags, flags, small ids: most varints are one byte
      *p = static_cast<char>(v);
      ++n_;
      return;
    }
    while (v >= 0x80) {
      *p++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    n_ = static_cast<std::size_t>(p - b_.data());
  }
  void tag(int field, int wire) { varint(static_cast<std::uint64_t>(field) << 3 | wire); }
  void u(int field, std::uint64_t v) {
    tag(field, kVarint);
    varint(v);
  }
  void i(int field, std::int64_t v) { u(field, static_cast<std::uint64_t>(v)); }
  void fixed64(int field, std::uint64_t v) {
    tag(field, kFixed64);
    char* p = room(8);
    for (int k = 0; k < 8; ++k) p[k] = static_cast<char>(v >> (8 * k));
    n_ += 8;
  }
  void raw(std::string_view s) {
    std::memcpy(room(s.size()), s.data(), s.size());
    n_ += s.size();
  }
  void bytes(int field, std::string_view s) {
    tag(field, kLen);
    varint(s.size());
    raw(s);
  }
  void bytes2(int field, std::string_view a, std::string_view b) {
    tag(field, kLen);
    varint(a.size() + b.size());
    raw(a);
    raw(b);
  }
  void message(int field, const Proto& m) { bytes(field, m.str()); }
  void clear() { n_ = 0; }
  std::string_view str() const { return {b_.data(), n_}; }
  std::size_t size() const { return n_; }

 private:
  // At least k writable bytes at data() + n_.
  char* room(std::size_t k) {
    if (n_ + k > b_.size()) [[unlikely]]
      grow(k);
    return b_.data() + n_;
  }
  [[gnu::noinline]] void grow(std::size_t k) { b_.resize(std::max(2 * b_.size(), n_ + k + 256)); }
  std::string b_;  // b_.size() is the capacity; n_ bytes are written
  std::size_t n_ = 0;
};

std::uint64_t to_ns(double us) {
  const double ns = std::nearbyint(us * 1000.0);
  return ns > 0 ? static_cast<std::uint64_t>(ns) : 0;
}

class PerfettoEncoder : public TraceEncoder {
 public:
  explicit PerfettoEncoder(ByteSink& out) : out_(out) {
    // First packet: starts the sequence's interning state and names the categories.
    Proto interned;
    for (auto c : {TraceCategory::compute, TraceCategory::comm, TraceCategory::transfer,
                   TraceCategory::deadlock, TraceCategory::run}) {
      Proto e;
      e.u(f::iid, static_cast<std::uint64_t>(c) + 1);
      e.bytes(f::iname, to_string(c));
      interned.message(f::event_categories, e);
    }
    pkt_.clear();
    pkt_.u(f::sequence_id, kSequence);
    pkt_.u(f::sequence_flags, kIncrementalStateCleared);
    pkt_.message(f::interned_data, interned);
    emit_packet();
  }

  void process(int pid, std::string_view head, std::string_view name, int sort_index) override {
    Process& p = proc(pid);
    if (p.described) return;
    p.described = true;
    Proto pd;
    pd.i(f::pid, pid + 1);
    pd.bytes2(f::process_name, head, name);
    Proto td;
    td.u(f::uuid, p.uuid);
    td.message(f::process, pd);
    td.u(f::child_ordering, kChildOrderingExplicit);
    td.i(f::sibling_order_rank, sort_index);
    descriptor(td);
  }

  void thread(int pid, int tid, std::string_view head, std::string_view name) override {
    Track& t = track(pid, tid);
    t.name.assign(head);
    t.name.append(name);
    if (t.lanes.empty()) add_lane(pid, tid, t);
  }

  void slice(int pid, int tid, double ts, double dur, std::string_view name, TraceCategory cat,
             std::span<const TraceArg> args, std::uint64_t flow_out,
             std::uint64_t flow_in) override {
    const std::uint64_t begin = to_ns(ts), end = std::max(begin, to_ns(ts + dur));
    Track& t = track(pid, tid);
    if (t.lanes.empty()) add_lane(pid, tid, t);
    // The first lane free at `begin`; each lane's slices then come in time order, disjoint.
    std::size_t lane = 0;
    while (lane < t.lanes.size() && t.lanes[lane].end > begin) ++lane;
    if (lane == t.lanes.size()) add_lane(pid, tid, t);
    t.lanes[lane].end = end;
    const std::uint64_t uuid = t.lanes[lane].uuid;

    ev_.clear();
    ev_.u(f::type, kSliceBegin);
    ev_.u(f::track_uuid, uuid);
    ev_.u(f::category_iids, static_cast<std::uint64_t>(cat) + 1);
    ev_.bytes(f::name, name);
    annotate(args);
    if (flow_out) ev_.fixed64(f::flow_ids, flow_out);
    if (flow_in) ev_.fixed64(f::terminating_flow_ids, flow_in);
    event_packet(begin);
    ev_.clear();
    ev_.u(f::type, kSliceEnd);
    ev_.u(f::track_uuid, uuid);
    event_packet(end);
  }

  void instant(int pid, int tid, double ts, std::string_view head, std::string_view name,
               TraceCategory cat, bool global, std::span<const TraceArg> args) override {
    std::uint64_t uuid = proc(pid).uuid;
    if (!global) {
      Track& t = track(pid, tid);
      if (t.lanes.empty()) add_lane(pid, tid, t);
      uuid = t.lanes[0].uuid;
    }
    ev_.clear();
    ev_.u(f::type, kInstant);
    ev_.u(f::track_uuid, uuid);
    ev_.u(f::category_iids, static_cast<std::uint64_t>(cat) + 1);
    ev_.bytes2(f::name, head, name);
    annotate(args);
    event_packet(to_ns(ts));
  }

  void flow(std::uint64_t, int, int, int, int, double) override {}  // carried by the slices

  void counter(int pid, CounterKind kind, double ts, std::int64_t value) override {
    Process& p = proc(pid);
    const int k = kind == CounterKind::memory ? 0 : 1;
    if (p.counters[k] == 0) {
      p.counters[k] = next_uuid_++;
      Proto cd;
      cd.u(f::unit, kind == CounterKind::memory ? kUnitSizeBytes : kUnitCount);
      Proto td;
      td.u(f::uuid, p.counters[k]);
      td.u(f::parent_uuid, p.uuid);
      td.bytes(f::td_name, kind == CounterKind::memory ? "memory" : "inflight");
      td.message(f::counter, cd);
      td.i(f::sibling_order_rank, -2 + k);  // above the threads
      descriptor(td);
    }
    ev_.clear();
    ev_.u(f::type, kCounter);
    ev_.u(f::track_uuid, p.counters[k]);
    ev_.i(f::counter_value, value);
    event_packet(to_ns(ts));
  }

  void close(std::string_view) override {
    flush();
    out_.finish();
  }

 private:
  struct Lane {
    std::uint64_t uuid;
    std::uint64_t end = 0;
  };
  struct Track {
    std::string name;
    std::vector<Lane> lanes;
  };
  struct Process {
    std::uint64_t uuid = 0;
    bool described = false;
    std::uint64_t counters[2] = {0, 0};
    // (tid, track), sorted by tid: a rank has a track per peer it talks to, and a table by tid
    // would hold an entry per rank of the run on every rank (23 GiB at 200,000 ranks).
    std::vector<std::pair<int, Track>> tracks;
  };

  Process& proc(int pid) {
    const auto i = static_cast<std::size_t>(pid);
    if (i >= procs_.size()) procs_.resize(i + 1);
    Process& p = procs_[i];
    if (p.uuid == 0) p.uuid = next_uuid_++;
    return p;
  }
  Track& track(int pid, int tid) {
    Process& p = proc(pid);
    auto it = std::lower_bound(p.tracks.begin(), p.tracks.end(), tid,
                               [](const auto& entry, int t) { return entry.first < t; });
    if (it == p.tracks.end() || it->first != tid) it = p.tracks.insert(it, {tid, Track{}});
    return it->second;
  }
  void add_lane(int pid, int tid, Track& t) {
    if (t.name.empty()) t.name = "thread " + std::to_string(tid);
    const std::uint64_t uuid = next_uuid_++;
    t.lanes.push_back({uuid, 0});
    Proto td;
    td.u(f::uuid, uuid);
    td.u(f::parent_uuid, proc(pid).uuid);
    if (t.lanes.size() == 1)
      td.bytes(f::td_name, t.name);
    else
      td.bytes(f::td_name, t.name + " (" + std::to_string(t.lanes.size()) + ")");
    td.i(f::sibling_order_rank, tid);
    descriptor(td);
  }
  void descriptor(const Proto& td) {
    pkt_.clear();
    pkt_.u(f::sequence_id, kSequence);
    pkt_.message(f::track_descriptor, td);
    emit_packet();
  }
  std::uint64_t annotation_name(std::string_view key) {
    // Keys are mostly the same few string literals: look them up by address first.
    for (const auto& c : recent_)
      if (c.data == key.data() && c.size == key.size()) return c.iid;
    const std::uint64_t id = intern(key);
    if (recent_.size() < 32) recent_.push_back({key.data(), key.size(), id});
    return id;
  }
  std::uint64_t intern(std::string_view key) {
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    const std::uint64_t id = names_.size() + 1;
    names_.emplace(std::string(key), id);
    Proto e, interned;
    e.u(f::iid, id);
    e.bytes(f::iname, key);
    interned.message(f::debug_annotation_names, e);
    pkt_.clear();
    pkt_.u(f::sequence_id, kSequence);
    pkt_.u(f::sequence_flags, kNeedsIncrementalState);
    pkt_.message(f::interned_data, interned);
    emit_packet();
    return id;
  }
  void annotate(std::span<const TraceArg> args) {
    for (const auto& a : args) {
      da_.clear();
      // Keys of JSON args may live in memory that is freed and reused: never cached by address.
      da_.u(f::da_name_iid,
            a.type == TraceArg::Type::json ? intern(a.key) : annotation_name(a.key));
      switch (a.type) {
        case TraceArg::Type::integer:
          da_.i(f::int_value, a.number);
          break;
        case TraceArg::Type::boolean:
          da_.u(f::bool_value, a.number ? 1 : 0);
          break;
        case TraceArg::Type::string:
          da_.bytes(f::string_value, a.text);
          break;
        case TraceArg::Type::json:
          da_.bytes(f::legacy_json_value, a.text);
          break;
      }
      ev_.message(f::debug_annotations, da_);
    }
  }
  // One TracePacket {timestamp, sequence_id, sequence_flags, track_event} written straight into
  // the output buffer: its length is known from the event's.
  static_assert(f::timestamp < 16 && f::sequence_id < 16 && f::sequence_flags < 16 &&
                    f::track_event < 16,
                "event_packet counts one byte per field tag");
  void event_packet(std::uint64_t ts) {
    const std::size_t ev = ev_.size();
    const std::size_t len = 1 + Proto::varint_size(ts) + 1 + Proto::varint_size(kSequence) + 1 +
                            Proto::varint_size(kNeedsIncrementalState) + 1 +
                            Proto::varint_size(ev) + ev;
    buf_.tag(f::trace_packet, kLen);
    buf_.varint(len);
    buf_.u(f::timestamp, ts);
    buf_.u(f::sequence_id, kSequence);
    buf_.u(f::sequence_flags, kNeedsIncrementalState);
    buf_.message(f::track_event, ev_);
    if (buf_.size() >= kFlushAt) flush();
  }
  void emit_packet() {
    buf_.message(f::trace_packet, pkt_);
    if (buf_.size() >= kFlushAt) flush();
  }
  void flush() {
    out_.write(buf_.str().data(), buf_.size());
    buf_.clear();
  }

  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  ByteSink& out_;
  Proto buf_, pkt_, ev_, da_;
  std::vector<Process> procs_;
  std::unordered_map<std::string, std::uint64_t, Hash, std::equal_to<>> names_;
  struct Recent {
    const char* data;
    std::size_t size;
    std::uint64_t iid;
  };
  std::vector<Recent> recent_;
  std::uint64_t next_uuid_ = 1;
};

}  // namespace

std::unique_ptr<TraceEncoder> make_perfetto_encoder(ByteSink& out) {
  return std::make_unique<PerfettoEncoder>(out);
}

}  // namespace ppsim::viz::detail

namespace ppsim::viz::trace_formats {

void register_perfetto(TraceFormatRegistry& registry) {
  registry.add({"pftrace",
                {"perfetto"},
                {".pftrace", ".perfetto-trace"},
                "FILE.pftrace (Perfetto protobuf)",
                detail::make_stream_sink,
                detail::make_perfetto_encoder});
}

}  // namespace ppsim::viz::trace_formats
