#include "commands.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <new>
#include <stdexcept>

#include "ppsim/config/prepare.hpp"
#include "ppsim/config/sweep.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/viz/chrome_trace.hpp"
#include "ppsim/viz/json_report.hpp"
#include "ppsim/viz/summary_table.hpp"

namespace ppsim::cli {

namespace {

constexpr int kOk = 0, kWrong = 1, kBadInput = 2;

int bad_input(const std::string& message) {
  std::cerr << "ppsim: error: " << message << "\n";
  return kBadInput;
}

// Write through a temporary file so a failure never leaves a partial output behind.
void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& body) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw config::ConfigError(path, "", "cannot open the output file for writing");
      body(out);
      out.flush();
      if (!out) throw config::ConfigError(path, "", "write failed");
    }
    std::filesystem::rename(tmp, path);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
}

// Runs `body`, turning bad input into exit code 2 with a message naming file and key.
template <typename F>
int guarded(const std::string& source, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {  // parameters too large for memory: bad input, not a crash
    return bad_input(
        fmt::format("{}: out of memory: the schedule is too large to simulate", source));
  } catch (const std::length_error&) {
    return bad_input(fmt::format("{}: the schedule is too large to simulate", source));
  } catch (const config::ConfigError& e) {
    return bad_input(e.what());
  } catch (const sim::SimulationError& e) {
    return bad_input(e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    return bad_input(e.what());
  }
}

}  // namespace

int cmd_run(const std::string& path, bool json, const std::string& trace_file,
            const CommonOptions& common) {
  return guarded(path, [&] {
    const config::Config cfg = config::load_config(path, common.overrides);
    const record::RunRecord a =
        sim::analyze(cfg, {.trace = !trace_file.empty(), .max_memory = common.max_memory});
    if (!trace_file.empty()) {
      if (!a.trace)
        return bad_input(fmt::format("{}: the program is invalid, no trace to write:\n{}", path,
                                     viz::summary_text(a)));
      write_atomically(trace_file, [&](std::ostream& out) {
        viz::write_chrome_trace(out, *a.trace, *a.program,
                                {config::microseconds_per_unit(cfg.time_unit), cfg.name});
      });
    }
    if (json)
      std::cout << viz::to_json(a).dump(2) << "\n";
    else
      std::cout << viz::summary_text(a);
    return a.ok() ? kOk : kWrong;
  });
}

int cmd_compare(const std::vector<std::string>& paths, bool json, bool csv,
                const std::vector<std::string>& kinds, const std::vector<int>& microbatches,
                const std::vector<int>& chunks, const CommonOptions& common) {
  return guarded(fmt::format("{}", fmt::join(paths, ", ")), [&] {
    std::vector<record::RunRecord> runs;
    for (const auto& path : paths) {
      const config::Config base = config::load_config(path, common.overrides);
      const config::SweepAxes axes{kinds, microbatches, chunks};
      if (!config::sweep_requested(axes)) {
        runs.push_back(sim::analyze(base, {.max_memory = common.max_memory}));
        continue;
      }
      for (const auto& one : config::sweep(base, axes))
        runs.push_back(sim::analyze(one, {.max_memory = common.max_memory}));
    }
    if (json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& a : runs) arr.push_back(viz::to_json(a));
      std::cout << arr.dump(2) << "\n";
    } else if (csv) {
      std::cout << viz::compare_csv(runs);
    } else {
      std::cout << viz::compare_table(runs);
    }
    for (const auto& a : runs)
      if (!a.ok()) return kWrong;
    return kOk;
  });
}

int cmd_check(const std::vector<std::string>& paths, bool json, const CommonOptions& common) {
  int code = kOk;
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& path : paths) {
    const int one = guarded(path, [&] {
      const record::RunRecord a = sim::analyze(config::load_config(path, common.overrides),
                                               {.max_memory = common.max_memory});
      if (json)
        arr.push_back(viz::check_json(a, path));
      else
        std::cout << viz::check_text(a, path);
      return a.ok() ? kOk : kWrong;
    });
    code = std::max(code, one);
  }
  if (json) std::cout << arr.dump(2) << "\n";
  return code;
}

int cmd_list() {
  std::cout << "schedules (schedule.kind):\n";
  for (const auto& g : schedules::Registry::instance().all()) {
    std::cout << fmt::format("  {:<18} {}\n", g.name, g.summary);
    if (!g.aliases.empty())
      std::cout << fmt::format("  {:<18} aliases: {}\n", "", fmt::join(g.aliases, ", "));
    for (const auto& p : g.params)
      std::cout << fmt::format("  {:<18}   {:<22} {}\n", "", p.name, p.description);
  }
  for (const auto& src : config::SourceRegistry::instance().all())
    if (src.name != "generated") std::cout << fmt::format("  {:<18} {}\n", src.name, src.summary);
  std::cout << "comm styles (comm.style):\n";
  for (const auto& st : schedules::LoweringRegistry::instance().all()) {
    std::cout << fmt::format("  {:<18} {}\n", st.name, st.summary);
    for (const auto& p : st.params)
      std::cout << fmt::format("  {:<18}   {:<22} {}\n", "", "comm." + p.name, p.description);
  }
  std::cout << fmt::format("matching (comm.matching): {}, {}\n",
                           config::to_string(config::Matching::tag),
                           config::to_string(config::Matching::fifo));
  return kOk;
}

int cmd_export(const std::string& path, const CommonOptions& common) {
  return guarded(path, [&] {
    const config::Prepared run = config::prepare(config::load_config(path, common.overrides),
                                                 {common.max_memory, config::Workload::program});
    std::cout << run.program->to_text();
    return kOk;
  });
}

}  // namespace ppsim::cli
