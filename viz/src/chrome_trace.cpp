#include "ppsim/viz/chrome_trace.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "ppsim/viz/trace_stream.hpp"
#include "trace_encoder.hpp"

namespace ppsim::viz {

namespace {

// A recorded run's events into the stream: spans, then transfers, then counters.
void replay(TraceStream& s, const record::Trace& trace) {
  for (const auto& sp : trace.spans) switch (sp.kind) {
      case record::SpanKind::compute:
        s.on_compute(sp.rank, sp.pos, sp.start, sp.end);
        break;
      case record::SpanKind::blocked:
        s.on_blocked(sp.rank, sp.pos, sp.start, sp.end);
        break;
      case record::SpanKind::post:
        s.on_post(sp.rank, sp.pos, sp.start);
        break;
    }
  for (const auto& t : trace.transfers) s.on_transfer(t);
  for (const auto& c : trace.counters) s.on_counter(c.rank, c.time, c.memory_bytes, c.inflight);
  for (std::size_t r = 0; r < trace.ranks.size(); ++r)
    s.on_rank_end(static_cast<int>(r), trace.ranks[r]);
}

}  // namespace

void write_chrome_trace(std::ostream& out, const record::Trace& trace,
                        const schedules::Program& program, const ChromeTraceOptions& options,
                        const TraceFormat& format) {
  TraceStream s(out, format);
  s.begin_run(program, options);
  replay(s, trace);
  s.end_run(nullptr);
  s.close(detail::other_data(options, trace.time_unit, program));
}

void write_chrome_trace(std::ostream& out, const record::RunRecord& rec,
                        const ChromeTraceOptions& options, const TraceFormat& format) {
  if (!rec.trace) throw std::invalid_argument("chrome trace: the run record has no trace");
  if (!rec.program) throw std::invalid_argument("chrome trace: the run record has no program");
  ChromeTraceOptions o = options;
  if (o.title.empty()) o.title = rec.info.name;
  TraceStream s(out, format);
  s.begin_run(*rec.program, o);
  replay(s, *rec.trace);
  s.finish(rec);
}

void write_chrome_trace(std::ostream& out, std::span<const LabelledRun> runs,
                        const ChromeTraceOptions& options, const TraceFormat& format) {
  for (const auto& r : runs)
    if (!r.record || !r.record->trace || !r.record->program)
      throw std::invalid_argument("chrome trace: a run record has no trace or no program");
  TraceStream s(out, format);
  nlohmann::json metas = nlohmann::json::array();
  for (const auto& r : runs) {
    ChromeTraceOptions o = options;
    if (o.title.empty()) o.title = r.record->info.name;
    s.begin_run(*r.record->program, o, r.label);
    replay(s, *r.record->trace);
    nlohmann::json meta = s.end_run(r.record);
    meta["label"] = r.label;
    metas.push_back(std::move(meta));
  }
  std::string title;
  for (char c : options.title) {  // escaped as the other writers do
    if (c == '"' || c == '\\') title += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) title += c;
  }
  s.close(fmt::format(R"("title":"{}","runs":{})", title, detail::dump_json(metas)));
}

}  // namespace ppsim::viz

namespace ppsim::viz {

void write_chrome_trace(std::ostream& out, const record::Trace& trace,
                        const schedules::Program& program, const ChromeTraceOptions& options) {
  write_chrome_trace(out, trace, program, options, trace_format("json"));
}
void write_chrome_trace(std::ostream& out, const record::RunRecord& rec,
                        const ChromeTraceOptions& options) {
  write_chrome_trace(out, rec, options, trace_format("json"));
}
void write_chrome_trace(std::ostream& out, std::span<const LabelledRun> runs,
                        const ChromeTraceOptions& options) {
  write_chrome_trace(out, runs, options, trace_format("json"));
}

}  // namespace ppsim::viz
