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
  write_traces(
      run,
      [&](int r, const std::string& text) {
        const std::string path =
            (std::filesystem::path(dir) / fmt::format("rank{}.json", r)).string();
        try {
          base::OutputFile out(path);
          out.stream() << text;
          out.commit();
        } catch (const std::exception& e) {
          throw ProfileError(fmt::format("{}: {}", path, e.what()));
        }
      },
      origin_us);
}

void write_traces(const record::RunRecord& run,
                  const std::function<void(int rank, const std::string& text)>& sink,
                  double origin_us) {
  if (!run.trace || !run.program)
    throw ProfileError("the run has no trace to write as profiler traces");
  const auto& program = *run.program;
  const double scale = config::microseconds_per_unit(run.trace->time_unit);
  const int P = program.ranks();
  std::vector<nlohmann::json> events(static_cast<std::size_t>(P), nlohmann::json::array());
  std::vector<double> first(static_cast<std::size_t>(P), -1), last(static_cast<std::size_t>(P), 0);
  for (const auto& s : run.trace->spans) {
    if (s.kind != record::SpanKind::compute || s.rank < 0 || s.rank >= P) continue;
    const auto& op = program.ops(s.rank)[static_cast<std::size_t>(s.pos)];
    const double ts = origin_us + s.start * scale, dur = (s.end - s.start) * scale;
    // PyTorch's action text (`2F0`, `(0F7;7B3)OVERLAP_F_B`) behind its `PP:`, on the CPU side
    // and the GPU side.
    const std::string name = "PP:" + program.op_text(s.rank, op);
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
  // Each transfer as ProcessGroupNCCL leaves it on both ranks: a record_param_comms range (its
  // "Rank" the peer's), the launch inside it and the SendRecv kernel that launch ran, tied by a
  // correlation id, the kernel spanning the transfer.
  std::int64_t correlation = 0;
  nlohmann::json group = nlohmann::json::array();
  for (int r = 0; r < P; ++r) group.push_back(r);
  for (const auto& t : run.trace->transfers) {
    if (t.src_rank < 0 || t.src_rank >= P || t.dst_rank < 0 || t.dst_rank >= P) continue;
    const double ts = origin_us + t.start * scale, dur = (t.end - t.start) * scale;
    for (const bool send : {true, false}) {
      const int rank = send ? t.src_rank : t.dst_rank;
      const int peer = send ? t.dst_rank : t.src_rank;
      auto& ev = events[static_cast<std::size_t>(rank)];
      auto& f = first[static_cast<std::size_t>(rank)];  // the step holds the transfers too
      if (f < 0 || ts < f) f = ts;
      last[static_cast<std::size_t>(rank)] =
          std::max(last[static_cast<std::size_t>(rank)], ts + dur);
      const std::int64_t id = ++correlation;
      ev.push_back({{"ph", "X"},
                    {"cat", "cpu_op"},
                    {"name", "record_param_comms"},
                    {"pid", rank},
                    {"tid", 1},
                    {"ts", ts},
                    {"dur", dur},
                    {"args",
                     {{"Collective name", send ? "send" : "recv"},
                      {"In msg nelems", t.bytes},
                      {"Out msg nelems", t.bytes},
                      {"dtype", "Byte"},
                      {"Group size", P},
                      {"Process Group Ranks", group},
                      {"Rank", peer}}}});
      ev.push_back({{"ph", "X"},
                    {"cat", "cuda_runtime"},
                    {"name", "cudaLaunchKernelExC"},
                    {"pid", rank},
                    {"tid", 1},
                    {"ts", ts},
                    {"dur", 0},
                    {"args", {{"correlation", id}}}});
      ev.push_back({{"ph", "X"},
                    {"cat", "kernel"},
                    {"name", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"},
                    {"pid", rank},
                    {"tid", 8},
                    {"ts", ts},
                    {"dur", dur},
                    {"args", {{"correlation", id}, {"stream", 8}}}});
    }
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
    sink(r, doc.dump() + "\n");
  }
}

}  // namespace ppsim::profile
