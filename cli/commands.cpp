#include "commands.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <new>
#include <stdexcept>

#include "ppsim/schedules/generator.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/sim/report_json.hpp"
#include "ppsim/sim/sweep.hpp"
#include "ppsim/sim/trace.hpp"
#include "ppsim/viz/chrome_trace.hpp"
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
      if (!out) throw sim::ConfigError(path, "", "cannot open the output file for writing");
      body(out);
      out.flush();
      if (!out) throw sim::ConfigError(path, "", "write failed");
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
  } catch (const sim::ConfigError& e) {
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
    const sim::Config config = sim::load_config(path, common.overrides);
    sim::Trace trace;
    trace.time_unit = config.time_unit;
    sim::TraceRecorder recorder(trace);
    const sim::Analysis a = sim::analyze(config, trace_file.empty() ? nullptr : &recorder);
    if (!trace_file.empty()) {
      if (!a.result)
        return bad_input(fmt::format("{}: the program is invalid, no trace to write:\n{}", path,
                                     viz::summary_text(a)));
      write_atomically(trace_file, [&](std::ostream& out) {
        viz::write_chrome_trace(out, trace, a.run.program,
                                {sim::microseconds_per_unit(config.time_unit), config.name});
      });
    }
    if (json)
      std::cout << sim::to_json(a).dump(2) << "\n";
    else
      std::cout << viz::summary_text(a);
    return a.ok() ? kOk : kWrong;
  });
}

int cmd_compare(const std::vector<std::string>& paths, bool json, bool csv,
                const std::vector<std::string>& kinds, const std::vector<int>& microbatches,
                const std::vector<int>& chunks, const CommonOptions& common) {
  return guarded(fmt::format("{}", fmt::join(paths, ", ")), [&] {
    std::vector<sim::Analysis> runs;
    for (const auto& path : paths) {
      const sim::Config base = sim::load_config(path, common.overrides);
      const sim::SweepAxes axes{kinds, microbatches, chunks};
      if (!sim::sweep_requested(axes)) {
        runs.push_back(sim::analyze(base));
        continue;
      }
      for (const auto& config : sim::sweep(base, axes)) runs.push_back(sim::analyze(config));
    }
    if (json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& a : runs) arr.push_back(sim::to_json(a));
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
      const sim::Analysis a = sim::analyze(sim::load_config(path, common.overrides));
      if (json) {
        nlohmann::json j = {{"config", path},
                            {"name", a.config.name},
                            {"ok", a.ok()},
                            {"verdict", viz::verdict(a)}};
        nlohmann::json errors = nlohmann::json::array();
        for (const auto& d : a.errors) errors.push_back(sim::to_json(d));
        j["errors"] = errors;
        j["deadlock"] = a.result && a.result->deadlock ? sim::to_json(*a.result->deadlock)
                                                       : nlohmann::json(nullptr);
        arr.push_back(j);
      } else if (a.ok()) {
        std::cout << fmt::format("ok    {} ({})\n", path, a.config.name);
      } else {
        std::cout << fmt::format("FAIL  {} ({}): {}\n", path, a.config.name, viz::verdict(a));
        if (a.result && a.result->deadlock) {
          std::string d = a.result->deadlock->describe();
          for (std::size_t p = 0; (p = d.find('\n', p)) != std::string::npos; p += 7)
            d.replace(p, 1, "\n      ");
          std::cout << "      " << d << "\n";
        }
        for (const auto& e : a.errors)
          std::cout << fmt::format("      {}: {}\n", e.kind, e.message);
      }
      return a.ok() ? kOk : kWrong;
    });
    code = std::max(code, one);
  }
  if (json) std::cout << arr.dump(2) << "\n";
  return code;
}

int cmd_list() {
  std::cout << "schedules:\n";
  for (const auto& g : schedules::Registry::instance().all()) {
    std::cout << fmt::format("  {:<18} {}\n", g.name, g.summary);
    if (!g.aliases.empty())
      std::cout << fmt::format("  {:<18} aliases: {}\n", "", fmt::join(g.aliases, ", "));
    for (const auto& p : g.params)
      std::cout << fmt::format("  {:<18}   {:<22} {}\n", "", p.name, p.description);
  }
  std::cout << fmt::format("  {:<18} {}\n", "custom",
                           "your own op lists: schedule.ops, one string per rank");
  std::cout << "comm styles (comm.style): blocking, async-send, batched, async\n";
  std::cout << "matching (comm.matching): tag, fifo\n";
  return kOk;
}

int cmd_export(const std::string& path, const CommonOptions& common) {
  return guarded(path, [&] {
    const sim::BuiltRun run = sim::build(sim::load_config(path, common.overrides));
    std::cout << run.program.to_text();
    return kOk;
  });
}

}  // namespace ppsim::cli
