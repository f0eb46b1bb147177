// A run record written as Kineto traces, one per rank, as a profiled PyTorch pipelining run
// would leave them: what `ppsim import-profile` reads (the round trip is tested on the host
// executor's measured runs).
#include <fmt/format.h>

#include <filesystem>

#include "ppsim/base/output_file.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/profile/kineto.hpp"

namespace ppsim::profile {

void write_traces(const record::RunRecord& run, const std::string& dir, double origin_us) {
  if (!run.trace || !run.program)
    throw ProfileError("the run has no trace to write as profiler traces");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw ProfileError(fmt::format("{}: cannot create the directory: {}", dir, ec.message()));
  const auto& program = *run.program;
  const double scale = config::microseconds_per_unit(run.trace->time_unit);
  const int P = program.ranks();
  std::vector<nlohmann::json> events(static_cast<std::size_t>(P), nlohmann::json::array());
  std::vector<double> first(static_cast<std::size_t>(P), -1), last(static_cast<std::size_t>(P), 0);
  for (const auto& s : run.trace->spans) {
    if (s.kind != record::SpanKind::compute || s.rank < 0 || s.rank >= P) continue;
    const auto& op = program.ops(s.rank)[static_cast<std::size_t>(s.pos)];
    if (schedules::is_composite(op.kind)) continue;  // (PyTorch's OVERLAP_F_B: not written)
    const double ts = origin_us + s.start * scale, dur = (s.end - s.start) * scale;
    // PyTorch's action text (`2F0`) behind its `PP:`, on the CPU side and the GPU side.
    const std::string name = "PP:" + schedules::op_text(op);
    auto& ev = events[static_cast<std::size_t>(s.rank)];
    for (const auto& [cat, tid] : {std::pair{"user_annotation", 1}, {"gpu_user_annotation", 7}})
      ev.push_back({{"ph", "X"},
                    {"cat", cat},
                    {"name", name},
                    {"pid", s.rank},
                    {"tid", tid},
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
