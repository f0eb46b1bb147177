#include "ppsim/viz/chrome_trace.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "ppsim/schedules/semantics.hpp"

namespace ppsim::viz {

namespace {

// Thread ids inside a rank's process.
constexpr int kComputeTid = 0;
constexpr int kCommTid = 1;
int send_tid(int peer) {
  return 2 + 2 * peer;
}
int recv_tid(int peer) {
  return 3 + 2 * peer;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

class Writer {
 public:
  explicit Writer(std::ostream& out) : out_(out) { out_ << "{\"traceEvents\":[\n"; }
  void event(const std::string& body) {
    if (!first_) out_ << ",\n";
    first_ = false;
    out_ << '{' << body << '}';
  }
  void close(const std::string& other) {
    out_ << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{" << other << "}}\n";
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

// JSON text of a value; strings that are not valid UTF-8 get U+FFFD instead of failing the write.
std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The config and metrics of a run, for otherData and the args of the "run" event.
nlohmann::json run_metadata(const record::RunRecord& rec) {
  const auto& p = *rec.program;
  nlohmann::json config = {{"name", rec.info.name},
                           {"source", rec.info.source},
                           {"schedule", rec.info.schedule},
                           {"comm_style", rec.info.comm_style},
                           {"matching", rec.info.matching},
                           {"origin", rec.trace->origin},
                           {"clock", rec.trace->clock},
                           {"time_unit", rec.trace->time_unit},
                           {"ranks", p.ranks()},
                           {"chunks", p.chunks()},
                           {"stages", p.stages()},
                           {"microbatches", p.microbatches()}};
  nlohmann::json metrics = nullptr;
  if (rec.metrics) {
    const auto& m = *rec.metrics;
    metrics = {{"makespan", m.makespan},
               {"bubble_fraction", m.bubble_fraction},
               {"bubble_vs_ideal", m.bubble_vs_ideal},
               {"comm_bytes", m.comm_bytes},
               {"peak_memory_bytes", m.peak_memory_bytes},
               {"peak_inflight", m.peak_inflight}};
  }
  nlohmann::json meta = {
      {"config", config}, {"metrics", metrics}, {"verdict", rec.verdict().text()}};
  if (rec.deadlock) meta["deadlock"] = rec.deadlock->describe();
  return meta;
}

// The op each rank blocked in for good (from the deadlock report), and whether it is in a cycle.
struct StuckInfo {
  const record::BlockedOp* op = nullptr;
  bool in_cycle = false;
};
StuckInfo stuck_info(const record::RunRecord& rec, int rank) {
  if (!rec.deadlock) return {};
  for (const auto& c : rec.deadlock->cycles)
    for (const auto& b : c)
      if (b.rank == rank) return {&b, true};
  for (const auto* list : {&rec.deadlock->unmatched, &rec.deadlock->blocked})
    for (const auto& b : *list)
      if (b.rank == rank) return {&b, false};
  return {};
}

// One run's events, its ranks as processes pid_base + rank named "<label> rank N" (just "rank N"
// without a label). Returns the run's metadata (null without a record).
nlohmann::json write_run(Writer& w, const record::Trace& trace, const schedules::Program& program,
                         const ChromeTraceOptions& options, const record::RunRecord* rec,
                         int pid_base, const std::string& label, std::uint64_t& flow);
std::string other_data(const ChromeTraceOptions& options, const record::Trace& trace,
                       const schedules::Program& program) {
  return fmt::format(R"("title":"{}","time_unit":"{}","ranks":{},"stages":{},"microbatches":{})",
                     escape(options.title), escape(trace.time_unit), program.ranks(),
                     program.stages(), program.microbatches());
}

}  // namespace

void write_chrome_trace(std::ostream& out, const record::Trace& trace,
                        const schedules::Program& program, const ChromeTraceOptions& options) {
  Writer w(out);
  std::uint64_t flow = 0;
  write_run(w, trace, program, options, nullptr, 0, "", flow);
  w.close(other_data(options, trace, program));
}

void write_chrome_trace(std::ostream& out, const record::RunRecord& rec,
                        const ChromeTraceOptions& options) {
  if (!rec.trace) throw std::invalid_argument("chrome trace: the run record has no trace");
  if (!rec.program) throw std::invalid_argument("chrome trace: the run record has no program");
  ChromeTraceOptions o = options;
  if (o.title.empty()) o.title = rec.info.name;
  Writer w(out);
  std::uint64_t flow = 0;
  const nlohmann::json meta = write_run(w, *rec.trace, *rec.program, o, &rec, 0, "", flow);
  std::string other = other_data(o, *rec.trace, *rec.program);
  for (const auto& [key, value] : meta.items())
    other += fmt::format(R"(,"{}":{})", key, dump(value));
  w.close(other);
}

void write_chrome_trace(std::ostream& out, std::span<const LabelledRun> runs,
                        const ChromeTraceOptions& options) {
  for (const auto& r : runs)
    if (!r.record || !r.record->trace || !r.record->program)
      throw std::invalid_argument("chrome trace: a run record has no trace or no program");
  Writer w(out);
  std::uint64_t flow = 0;
  int pid_base = 0;
  nlohmann::json metas = nlohmann::json::array();
  for (const auto& r : runs) {
    ChromeTraceOptions o = options;
    if (o.title.empty()) o.title = r.record->info.name;
    nlohmann::json meta =
        write_run(w, *r.record->trace, *r.record->program, o, r.record, pid_base, r.label, flow);
    meta["label"] = r.label;
    metas.push_back(std::move(meta));
    pid_base += r.record->program->ranks();
  }
  w.close(fmt::format(R"("title":"{}","runs":{})", escape(options.title), dump(metas)));
}

namespace {

nlohmann::json write_run(Writer& w, const record::Trace& trace, const schedules::Program& program,
                         const ChromeTraceOptions& options, const record::RunRecord* rec,
                         int pid_base, const std::string& label, std::uint64_t& flow) {
  const double k = options.us_per_unit;
  const schedules::Semantics sem(program);
  const std::string prefix = label.empty() ? "" : escape(label) + " ";
  std::set<std::pair<int, int>> threads;  // (rank, tid) seen
  for (int r = 0; r < program.ranks(); ++r) {
    w.event(fmt::format(
        R"("ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":"{}rank {}"}})",
        pid_base + r, prefix, r));
    w.event(fmt::format(
        R"("ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}})",
        pid_base + r, pid_base + r));
    w.event(fmt::format(
        R"("ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"compute"}})",
        pid_base + r, kComputeTid));
    w.event(fmt::format(
        R"("ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"comm ops"}})",
        pid_base + r, kCommTid));
  }
  auto name_thread = [&](int rank, int tid, const std::string& name) {
    if (threads.insert({rank, tid}).second)
      w.event(
          fmt::format(R"("ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}})",
                      pid_base + rank, tid, name));
  };

  for (const auto& s : trace.spans) {
    const auto& op = program.ops(s.rank)[static_cast<std::size_t>(s.pos)];
    const std::string text = escape(program.op_text(s.rank, op));
    if (s.kind == record::SpanKind::compute) {
      // A composite's args describe its first part; its name lists them all.
      const auto& head = schedules::is_composite(op.kind) ? program.parts(s.rank, op).front() : op;
      w.event(fmt::format(
          R"("ph":"X","name":"{}","cat":"compute","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{"kind":"{}","stage":{},"microbatch":{},"chunk":{},"position":{}}})",
          text, pid_base + s.rank, kComputeTid, s.start * k, (s.end - s.start) * k,
          schedules::to_string(op.kind), head.stage, head.microbatch,
          program.place(head.stage).chunk, s.pos));
    } else if (s.kind == record::SpanKind::blocked) {
      std::string args = fmt::format(R"("position":{})", s.pos);
      if (op.kind != schedules::OpKind::WAIT)
        args += fmt::format(R"(,"stage":{},"microbatch":{},"peer":{})", op.stage, op.microbatch,
                            sem.peer_of(op));
      w.event(fmt::format(
          R"("ph":"X","name":"{}","cat":"comm","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{{}}})",
          text, pid_base + s.rank, kCommTid, s.start * k, (s.end - s.start) * k, args));
    } else {
      w.event(fmt::format(
          R"("ph":"i","s":"t","name":"post {}","cat":"comm","pid":{},"tid":{},"ts":{:.6f},"args":{{"position":{},"peer":{}}})",
          text, pid_base + s.rank, kCommTid, s.start * k, s.pos, sem.peer_of(op)));
    }
  }

  for (const auto& t : trace.transfers) {
    const auto& sop = program.ops(t.src_rank)[static_cast<std::size_t>(t.src_pos)];
    const auto& rop = program.ops(t.dst_rank)[static_cast<std::size_t>(t.dst_pos)];
    const int stid = send_tid(t.dst_rank), rtid = recv_tid(t.src_rank);
    name_thread(t.src_rank, stid, fmt::format("send to rank {}", t.dst_rank));
    name_thread(t.dst_rank, rtid, fmt::format("recv from rank {}", t.src_rank));
    const double ts = t.start * k, dur = (t.end - t.start) * k;
    w.event(fmt::format(
        R"("ph":"X","name":"{}","cat":"transfer","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{"bytes":{},"to":{},"stage":{},"microbatch":{}}})",
        escape(program.op_text(t.src_rank, sop)), pid_base + t.src_rank, stid, ts, dur, t.bytes,
        t.dst_rank, sop.stage, sop.microbatch));
    w.event(fmt::format(
        R"("ph":"X","name":"{}","cat":"transfer","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{"bytes":{},"from":{},"stage":{},"microbatch":{}}})",
        escape(program.op_text(t.dst_rank, rop)), pid_base + t.dst_rank, rtid, ts, dur, t.bytes,
        t.src_rank, rop.stage, rop.microbatch));
    // Flow arrow: starts inside the send slice, binds to the enclosing receive slice.
    const double mid = ts + dur / 2;
    w.event(fmt::format(
        R"("ph":"s","id":{},"name":"transfer","cat":"flow","pid":{},"tid":{},"ts":{:.6f})", flow,
        pid_base + t.src_rank, stid, mid));
    w.event(fmt::format(
        R"("ph":"f","bp":"e","id":{},"name":"transfer","cat":"flow","pid":{},"tid":{},"ts":{:.6f})",
        flow, pid_base + t.dst_rank, rtid, mid));
    ++flow;
  }

  for (const auto& c : trace.counters) {
    w.event(fmt::format(R"("ph":"C","name":"memory","pid":{},"ts":{:.6f},"args":{{"bytes":{}}})",
                        pid_base + c.rank, c.time * k, c.memory_bytes));
    w.event(fmt::format(
        R"("ph":"C","name":"inflight","pid":{},"ts":{:.6f},"args":{{"microbatches":{}}})",
        pid_base + c.rank, c.time * k, c.inflight));
  }
  nlohmann::json meta;
  if (rec) {
    meta = run_metadata(*rec);
    // A global instant at 0 whose args Perfetto and chrome://tracing show when it is selected.
    w.event(fmt::format(
        R"("ph":"i","s":"g","name":"run: {}{}","cat":"run","pid":{},"tid":0,"ts":0,"args":{})",
        prefix, escape(options.title), pid_base, dump(meta)));
    // Where each rank blocked for good: an instant on its comm-ops thread, at the start of the op.
    for (int r = 0; r < program.ranks() && r < static_cast<int>(trace.ranks.size()); ++r) {
      const auto& rt = trace.ranks[static_cast<std::size_t>(r)];
      if (rt.finished || rt.stuck_pos < 0 ||
          static_cast<std::size_t>(rt.stuck_pos) >= program.ops(r).size())
        continue;
      double at = rt.end;
      for (auto it = trace.spans.rbegin(); it != trace.spans.rend(); ++it)
        if (it->rank == r && it->pos == rt.stuck_pos) {
          at = it->start;
          break;
        }
      const StuckInfo st = stuck_info(*rec, r);
      nlohmann::json args = {
          {"position", rt.stuck_pos},
          {"op", program.op_text(r, program.ops(r)[static_cast<std::size_t>(rt.stuck_pos)])},
          {"in_cycle", st.in_cycle}};
      if (st.op) {
        args["peer"] = st.op->peer;
        if (!st.op->waiting_for.empty()) args["waiting_for"] = st.op->waiting_for;
      }
      w.event(fmt::format(
          R"("ph":"i","s":"t","name":"blocked for good: {}","cat":"deadlock","pid":{},"tid":{},"ts":{:.6f},"args":{})",
          escape(program.op_text(r, program.ops(r)[static_cast<std::size_t>(rt.stuck_pos)])),
          pid_base + r, kCommTid, at * k, dump(args)));
    }
  }
  return meta;
}

}  // namespace

}  // namespace ppsim::viz
