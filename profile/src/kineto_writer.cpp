// A run record written as Kineto traces, one per rank, as a profiled PyTorch pipelining run
// would leave them: what `ppsim import-profile` reads (the round trip is tested on the host
// executor's measured runs).
#include <fmt/format.h>

#include <filesystem>

#include "ppsim/base/output_file.hpp"
#include "ppsim/profile/kineto.hpp"

namespace ppsim::profile {

namespace {

double us_per_unit(const std::string& unit) {
  if (unit == "us") return 1.0;
  if (unit == "s") return 1e6;
  if (unit == "ns") return 1e-3;
  return 1e3;  // ms
}

char letter(schedules::OpKind k) {
  switch (k) {
    case schedules::OpKind::F:
      return 'F';
    case schedules::OpKind::I:
      return 'I';
    case schedules::OpKind::W:
      return 'W';
    default:
      return 'B';
  }
}

}  // namespace

void write_traces(const record::RunRecord& run, const std::string& dir, double origin_us) {
  if (!run.trace || !run.program)
    throw ProfileError("the run has no trace to write as profiler traces");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw ProfileError(fmt::format("{}: cannot create the directory: {}", dir, ec.message()));
  const auto& program = *run.program;
  const double scale = us_per_unit(run.trace->time_unit);
  const int P = program.ranks();
  std::vector<nlohmann::json> events(static_cast<std::size_t>(P), nlohmann::json::array());
  std::vector<double> first(static_cast<std::size_t>(P), -1), last(static_cast<std::size_t>(P), 0);
  for (const auto& s : run.trace->spans) {
    if (s.kind != record::SpanKind::compute || s.rank < 0 || s.rank >= P) continue;
    const auto& op = program.ops(s.rank)[static_cast<std::size_t>(s.pos)];
    if (schedules::is_composite(op.kind)) continue;  // (PyTorch's OVERLAP_F_B: not written)
    const double ts = origin_us + s.start * scale, dur = (s.end - s.start) * scale;
    const std::string name = fmt::format("PP:{}{}{}", op.stage, letter(op.kind), op.microbatch);
    auto& ev = events[static_cast<std::size_t>(s.rank)];
    ev.push_back({{"ph", "X"},
                  {"cat", "user_annotation"},
                  {"name", name},
                  {"pid", s.rank},
                  {"tid", 1},
                  {"ts", ts},
                  {"dur", dur}});
    ev.push_back({{"ph", "X"},
                  {"cat", "gpu_user_annotation"},
                  {"name", name},
                  {"pid", s.rank},
                  {"tid", 7},
                  {"ts", ts},
                  {"dur", dur}});
    auto& f = first[static_cast<std::size_t>(s.rank)];
    if (f < 0 || ts < f) f = ts;
    last[static_cast<std::size_t>(s.rank)] =
        std::max(last[static_cast<std::size_t>(s.rank)], ts + dur);
  }
  for (int r = 0; r < P; ++r) {
    auto& ev = events[static_cast<std::size_t>(r)];
    const double f = std::max(0.0, first[static_cast<std::size_t>(r)]);
    ev.insert(ev.begin(), nlohmann::json{{"ph", "X"},
                                         {"cat", "user_annotation"},
                                         {"name", "ProfilerStep#0"},
                                         {"pid", r},
                                         {"tid", 1},
                                         {"ts", f},
                                         {"dur", last[static_cast<std::size_t>(r)] - f}});
    const nlohmann::json doc = {
        {"schemaVersion", 1},
        {"distributedInfo", {{"backend", "nccl"}, {"rank", r}, {"world_size", P}}},
        {"traceName", fmt::format("ppsim {} rank {}", run.info.name, r)},
        {"traceEvents", std::move(ev)}};
    const std::string path = (std::filesystem::path(dir) / fmt::format("rank{}.json", r)).string();
    try {
      base::OutputFile out(path);
      out.stream() << doc.dump() << "\n";
      out.commit();
    } catch (const std::exception& e) {
      throw ProfileError(fmt::format("{}: {}", path, e.what()));
    }
  }
}

}  // namespace ppsim::profile
