#include "ppsim/viz/trace_stream.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "decimal.hpp"
#include "ppsim/base/enum_names.hpp"
#include "ppsim/base/jobs.hpp"
#include "trace_encoder.hpp"

namespace ppsim::viz {

using detail::TraceArg;
using detail::TraceCategory;

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

// The config and metrics of a run, for otherData and the args of the "run" event.
nlohmann::json run_metadata(const record::RunRecord& rec) {
  const auto& p = *rec.program;
  // A streamed run has no Trace: its origin and clock follow from the record.
  const bool measured = rec.info.origin == "measured";
  nlohmann::json config = {{"name", rec.info.name},
                           {"source", rec.info.source},
                           {"schedule", rec.info.schedule},
                           {"comm_style", rec.info.comm_style},
                           {"matching", rec.info.matching},
                           {"origin", rec.trace ? rec.trace->origin : rec.info.origin},
                           {"clock", rec.trace  ? rec.trace->clock
                                     : measured ? "steady_clock"
                                                : "model"},
                           {"time_unit", rec.trace ? rec.trace->time_unit : rec.info.time_unit},
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

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

}  // namespace

namespace detail {

std::string_view to_string(TraceCategory c) {
  constexpr std::array<std::string_view, 5> kNames = {"compute", "comm", "transfer", "deadlock",
                                                      "run"};
  return base::enum_value(c, kNames, std::string_view());
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string other_data(const ChromeTraceOptions& options, std::string_view time_unit,
                       const schedules::Program& program) {
  return fmt::format(R"("title":"{}","time_unit":"{}","ranks":{},"stages":{},"microbatches":{})",
                     escape(options.title), escape(std::string(time_unit)), program.ranks(),
                     program.stages(), program.microbatches());
}

}  // namespace detail

namespace {
const TraceFormat& named(std::string_view name, const TraceFormatRegistry& registry) {
  if (const TraceFormat* f = registry.find(name)) return *f;
  throw std::invalid_argument(fmt::format("unknown trace format '{}' (known: {})", name,
                                          fmt::join(registry.names(), ", ")));
}
}  // namespace

const TraceFormat& trace_format(std::string_view name) {
  return named(name, TraceFormatRegistry::instance());
}

const TraceFormat& trace_format_for(std::string_view path, const TraceFormatRegistry& registry) {
  const TraceFormat* best = nullptr;
  std::size_t longest = 0;
  for (const auto& f : registry.all())
    for (const auto& suffix : f.suffixes)
      if (suffix.size() > longest && path.ends_with(suffix)) {
        best = &f;
        longest = suffix.size();
      }
  return best ? *best : named("json", registry);
}

std::string trace_formats_help() {
  std::string out;
  for (const auto& f : TraceFormatRegistry::instance().all()) {
    if (!out.empty()) out += ", ";
    out += f.help;
  }
  return out;
}

namespace {
// The file's bytes are written (and compressed) on another core where there is one: for a large
// trace that is a quarter to most of the time. PPSIM_JOBS=1 keeps them on this thread.
std::unique_ptr<detail::ByteSink> trace_sink(std::ostream& out, const TraceFormat& format) {
  auto sink = format.sink(out);
  if (base::jobs_here() > 1) return detail::make_background_sink(std::move(sink));
  return sink;
}
}  // namespace

TraceStream::TraceStream(std::ostream& out, const TraceFormat& format)
    : sink_(trace_sink(out, format)), enc_(format.encoder(*sink_)) {}

TraceStream::~TraceStream() = default;

void TraceStream::begin_run(const schedules::Program& program, const ChromeTraceOptions& options,
                            const std::string& label) {
  program_ = &program;
  sem_ = std::make_unique<schedules::Semantics>(program);
  options_ = options;
  prefix_ = label.empty() ? "" : label + " ";
  pid_base_ = next_pid_base_;
  next_pid_base_ += program.ranks();
  ranks_.assign(static_cast<std::size_t>(program.ranks()), {});
  for (int r = 0; r < program.ranks(); ++r) {
    const int pid = pid_base_ + r;
    enc_->process(pid, prefix_, fmt::format(FMT_COMPILE("rank {}"), r), pid);
    enc_->thread(pid, kComputeTid, "", "compute");
    enc_->thread(pid, kCommTid, "", "comm ops");
  }
}

TraceStream::RankState& TraceStream::rank_state(int rank) {
  const auto i = static_cast<std::size_t>(rank);
  if (i >= ranks_.size()) ranks_.resize(i + 1);
  return ranks_[i];
}

// The op's text form, as Program::op_text writes it; plain ops without allocating.
std::string_view TraceStream::op_text(int rank, const schedules::Op& op) {
  // Every kind's name fits plain_ beside three ints of 11 characters and a '#'.
  static_assert([] {
    for (const auto& k : schedules::kOpKinds)
      if (k.name.size() > sizeof plain_ - 3 * 11 - 1) return false;
    return true;
  }());
  const schedules::OpKindInfo& k = schedules::info(op.kind);
  if (op.kind == schedules::OpKind::WAIT) {
    text_ = "WAIT(";
    bool first = true;
    for (const std::int32_t id : program_->wait_ids(rank, op)) {
      if (!first) text_ += ';';
      first = false;
      char digits[16];
      text_.append(digits, detail::put_int(digits, id));
    }
    text_ += ')';
    return text_;
  }
  if (k.cls == schedules::OpClass::wait || k.composite) {
    text_ = program_->op_text(rank, op);
    return text_;
  }
  char* p = detail::put_int(plain_, op.stage);
  p = detail::put(p, k.name);
  if (k.microbatch) {
    p = detail::put_int(p, op.microbatch);
    if (op.async) {
      *p++ = '#';
      p = detail::put_int(p, op.request);
    }
  }
  return {plain_, static_cast<std::size_t>(p - plain_)};
}

void TraceStream::on_begin(int ranks, bool concurrent) {
  if (concurrent)
    throw std::logic_error("TraceStream: events must come from one thread (record them instead)");
  if (!program_) throw std::logic_error("TraceStream: begin_run was not called");
  if (ranks != program_->ranks()) throw std::logic_error("TraceStream: rank count mismatch");
}

void TraceStream::on_compute(int rank, int pos, double start, double end) {
  RankState& rs = rank_state(rank);
  rs.last_pos = pos;
  rs.last_start = start;
  const double k = options_.us_per_unit;
  const auto& op = program_->ops(rank)[static_cast<std::size_t>(pos)];
  // A composite's args describe its first part; its name lists them all.
  const auto& head = schedules::is_composite(op.kind) ? program_->parts(rank, op).front() : op;
  const TraceArg args[] = {detail::str_arg("kind", schedules::to_string(op.kind)),
                           detail::int_arg("stage", head.stage),
                           detail::int_arg("microbatch", head.microbatch),
                           detail::int_arg("chunk", program_->place(head.stage).chunk),
                           detail::int_arg("position", pos)};
  enc_->slice(pid_base_ + rank, kComputeTid, start * k, (end - start) * k, op_text(rank, op),
              TraceCategory::compute, args, 0, 0);
}

void TraceStream::on_blocked(int rank, int pos, double start, double end) {
  RankState& rs = rank_state(rank);
  rs.last_pos = pos;
  rs.last_start = start;
  const double k = options_.us_per_unit;
  const auto& op = program_->ops(rank)[static_cast<std::size_t>(pos)];
  const bool wait = op.kind == schedules::OpKind::WAIT;
  const TraceArg args[] = {detail::int_arg("position", pos), detail::int_arg("stage", op.stage),
                           detail::int_arg("microbatch", op.microbatch),
                           detail::int_arg("peer", wait ? -1 : sem_->peer_of(op))};
  enc_->slice(pid_base_ + rank, kCommTid, start * k, (end - start) * k, op_text(rank, op),
              TraceCategory::comm, std::span(args, wait ? 1 : 4), 0, 0);
}

void TraceStream::on_post(int rank, int pos, double time) {
  RankState& rs = rank_state(rank);
  rs.last_pos = pos;
  rs.last_start = time;
  const auto& op = program_->ops(rank)[static_cast<std::size_t>(pos)];
  const TraceArg args[] = {detail::int_arg("position", pos),
                           detail::int_arg("peer", sem_->peer_of(op))};
  enc_->instant(pid_base_ + rank, kCommTid, time * options_.us_per_unit, "post ", op_text(rank, op),
                TraceCategory::comm, false, args);
}

void TraceStream::name_thread(int rank, int tid, std::string_view head, int peer) {
  RankState& rs = rank_state(rank);
  const auto it = std::lower_bound(rs.named.begin(), rs.named.end(), tid);
  if (it != rs.named.end() && *it == tid) return;
  rs.named.insert(it, tid);
  enc_->thread(pid_base_ + rank, tid, head, fmt::format(FMT_COMPILE("{}"), peer));
}

void TraceStream::on_transfer(const record::TransferEvent& t) {
  const double k = options_.us_per_unit;
  const auto& sop = program_->ops(t.src_rank)[static_cast<std::size_t>(t.src_pos)];
  const auto& rop = program_->ops(t.dst_rank)[static_cast<std::size_t>(t.dst_pos)];
  const int stid = send_tid(t.dst_rank), rtid = recv_tid(t.src_rank);
  name_thread(t.src_rank, stid, "send to rank ", t.dst_rank);
  name_thread(t.dst_rank, rtid, "recv from rank ", t.src_rank);
  const double ts = t.start * k, dur = (t.end - t.start) * k;
  const std::uint64_t flow = ++flows_;
  const TraceArg sargs[] = {detail::int_arg("bytes", t.bytes), detail::int_arg("to", t.dst_rank),
                            detail::int_arg("stage", sop.stage),
                            detail::int_arg("microbatch", sop.microbatch)};
  enc_->slice(pid_base_ + t.src_rank, stid, ts, dur, op_text(t.src_rank, sop),
              TraceCategory::transfer, sargs, flow, 0);
  const TraceArg rargs[] = {detail::int_arg("bytes", t.bytes), detail::int_arg("from", t.src_rank),
                            detail::int_arg("stage", rop.stage),
                            detail::int_arg("microbatch", rop.microbatch)};
  enc_->slice(pid_base_ + t.dst_rank, rtid, ts, dur, op_text(t.dst_rank, rop),
              TraceCategory::transfer, rargs, 0, flow);
  // The arrow starts inside the send slice and binds to the enclosing receive slice.
  enc_->flow(flow, pid_base_ + t.src_rank, stid, pid_base_ + t.dst_rank, rtid, ts + dur / 2);
}

void TraceStream::on_counter(int rank, double time, std::int64_t memory_bytes, int inflight) {
  RankState& rs = rank_state(rank);
  const double ts = time * options_.us_per_unit;
  // Only changes: a sample that repeats the last value draws nothing new.
  if (memory_bytes != rs.memory) {
    rs.memory = memory_bytes;
    enc_->counter(pid_base_ + rank, detail::CounterKind::memory, ts, memory_bytes);
  }
  if (inflight != rs.inflight) {
    rs.inflight = inflight;
    enc_->counter(pid_base_ + rank, detail::CounterKind::inflight, ts, inflight);
  }
}

void TraceStream::on_rank_end(int rank, const record::RankTimeline& timeline) {
  RankState& rs = rank_state(rank);
  rs.timeline = timeline;
  rs.ended = true;
}

nlohmann::json TraceStream::end_run(const record::RunRecord* rec) {
  if (!program_) throw std::logic_error("TraceStream: end_run without begin_run");
  nlohmann::json meta;
  if (rec) {
    const auto& program = *program_;
    meta = run_metadata(*rec);
    // A global instant at 0 whose args Perfetto and chrome://tracing show when it is selected.
    // Args point into `values` and into the keys of `meta`, both alive until the write.
    std::vector<std::string> values;
    std::vector<TraceArg> args;
    values.reserve(meta.size());
    for (auto it = meta.begin(); it != meta.end(); ++it) {
      values.push_back(detail::dump_json(it.value()));
      args.push_back(detail::json_arg(it.key(), values.back()));
    }
    enc_->instant(pid_base_, 0, 0, "run: ", prefix_ + options_.title, TraceCategory::run, true,
                  args);
    // Where each rank blocked for good: an instant on its comm-ops thread, at the start of the op.
    for (int r = 0; r < program.ranks() && r < static_cast<int>(ranks_.size()); ++r) {
      const RankState& rs = ranks_[static_cast<std::size_t>(r)];
      const auto& rt = rs.timeline;
      if (!rs.ended || rt.finished || rt.stuck_pos < 0 ||
          static_cast<std::size_t>(rt.stuck_pos) >= program.ops(r).size())
        continue;
      const double at = rs.last_pos == rt.stuck_pos ? rs.last_start : rt.end;
      const StuckInfo st = stuck_info(*rec, r);
      const std::string op =
          program.op_text(r, program.ops(r)[static_cast<std::size_t>(rt.stuck_pos)]);
      std::vector<TraceArg> dargs = {detail::int_arg("position", rt.stuck_pos),
                                     detail::str_arg("op", op),
                                     detail::bool_arg("in_cycle", st.in_cycle)};
      if (st.op) {
        dargs.push_back(detail::int_arg("peer", st.op->peer));
        if (!st.op->waiting_for.empty())
          dargs.push_back(detail::str_arg("waiting_for", st.op->waiting_for));
      }
      enc_->instant(pid_base_ + r, kCommTid, at * options_.us_per_unit, "blocked for good: ", op,
                    TraceCategory::deadlock, false, dargs);
    }
  }
  program_ = nullptr;
  sem_.reset();
  return meta;
}

void TraceStream::close(const std::string& other_data) {
  if (closed_) return;
  closed_ = true;
  enc_->close(other_data);
}

void TraceStream::finish(const record::RunRecord& rec) {
  if (!rec.program) throw std::invalid_argument("trace: the run record has no program");
  const auto& program = *rec.program;
  const nlohmann::json meta = end_run(&rec);
  std::string other =
      detail::other_data(options_, rec.trace ? rec.trace->time_unit : rec.info.time_unit, program);
  for (const auto& [key, value] : meta.items())
    other += fmt::format(R"(,"{}":{})", key, detail::dump_json(value));
  close(other);
}

}  // namespace ppsim::viz
