// Where `ppsim run CONFIG --json` spends its time, phase by phase: the same library calls in the
// same order (read the config, prepare = generate + lower + checks, validate, simulate, the JSON
// report), each timed in wall-clock and process CPU seconds. Every repetition runs in a fresh
// child process (fork), so each one pays the page faults a real run pays.
//
//   ppsim_bench_phases CONFIG [--set KEY=VALUE]... [--reps N] [--json]
#include <fmt/format.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/simulator.hpp"
#include "ppsim/viz/json_report.hpp"

namespace {

constexpr std::array<std::string_view, 5> kPhases = {"config", "prepare", "validate", "simulate",
                                                     "report"};

struct Times {
  double wall[kPhases.size()] = {};
  double cpu[kPhases.size()] = {};
  // The lowered program's ops and ranks (bench/floor.py sizes its event loop by them).
  std::uint64_t ops = 0;
  int ranks = 0;
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One run of the phases in this process.
Times run_once(const std::string& path, const std::vector<std::string>& overrides) {
  using namespace ppsim;
  Times t;
  std::size_t phase = 0;
  double w = wall_seconds(), c = cpu_seconds();
  auto lap = [&] {
    const double w2 = wall_seconds(), c2 = cpu_seconds();
    t.wall[phase] = w2 - w;
    t.cpu[phase] = c2 - c;
    ++phase;
    w = w2;
    c = c2;
  };
  const config::Config cfg = config::load_config(path, overrides);
  lap();
  const config::Prepared prepared = config::prepare(cfg);
  lap();
  t.ops = prepared.program->total_ops();
  t.ranks = prepared.program->ranks();
  const auto diagnostics =
      schedules::validate(*prepared.program, model::validate_options(prepared.model.network));
  lap();
  if (schedules::has_fatal(diagnostics)) {
    std::fprintf(stderr, "ppsim_bench_phases: %s: the program is invalid\n", path.c_str());
    std::exit(2);
  }
  sim::SimResult r = sim::simulate(*prepared.program, prepared.model, nullptr);
  lap();
  record::RunRecord rec;
  rec.program = prepared.program;
  rec.diagnostics = diagnostics;
  rec.metrics = static_cast<record::RunMetrics&&>(std::move(r));
  const std::string json = viz::to_json(rec).dump(2);
  lap();
  if (json.empty()) std::abort();  // keeps the report from being optimised away
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  std::vector<std::string> overrides;
  int reps = 3;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--set" && i + 1 < argc) {
      overrides.emplace_back(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--json") {
      as_json = true;
    } else if (!a.empty() && a[0] != '-' && path.empty()) {
      path = a;
    } else {
      std::fprintf(stderr,
                   "usage: ppsim_bench_phases CONFIG [--set KEY=VALUE]... [--reps N] [--json]\n");
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "ppsim_bench_phases: no config given\n");
    return 2;
  }
  Times best;
  for (auto& x : best.wall) x = 1e300;
  for (auto& x : best.cpu) x = 1e300;
  for (int rep = 0; rep < reps; ++rep) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const Times t = run_once(path, overrides);
      const ssize_t n = write(fds[1], &t, sizeof t);
      _exit(n == static_cast<ssize_t>(sizeof t) ? 0 : 1);
    }
    close(fds[1]);
    Times t;
    const ssize_t n = read(fds[0], &t, sizeof t);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (n != static_cast<ssize_t>(sizeof t) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "ppsim_bench_phases: the run failed\n");
      return 1;
    }
    for (std::size_t p = 0; p < kPhases.size(); ++p) {
      best.wall[p] = std::min(best.wall[p], t.wall[p]);
      best.cpu[p] = std::min(best.cpu[p], t.cpu[p]);
    }
    best.ops = t.ops;
    best.ranks = t.ranks;
  }
  double total_wall = 0, total_cpu = 0;
  for (std::size_t p = 0; p < kPhases.size(); ++p) {
    total_wall += best.wall[p];
    total_cpu += best.cpu[p];
  }
  if (as_json) {
    std::string out = "{";
    for (std::size_t p = 0; p < kPhases.size(); ++p)
      out += fmt::format("{}\"{}\": {{\"wall_s\": {:.6f}, \"cpu_s\": {:.6f}}}", p ? ", " : "",
                         kPhases[p], best.wall[p], best.cpu[p]);
    out += fmt::format(", \"ops\": {}, \"ranks\": {}}}\n", best.ops, best.ranks);
    std::cout << out;
    return 0;
  }
  std::string args;
  for (const auto& o : overrides) args += " --set " + o;
  std::cout << fmt::format(
      "phases of ppsim run {}{} --json: best of {} (each phase on its own)\n\n", path, args, reps);
  std::cout << fmt::format("{:<10}  {:>8}  {:>8}  {:>6}\n", "phase", "wall s", "CPU s", "share");
  for (std::size_t p = 0; p < kPhases.size(); ++p)
    std::cout << fmt::format("{:<10}  {:>8.4f}  {:>8.4f}  {:>5.1f}%\n", kPhases[p], best.wall[p],
                             best.cpu[p], 100.0 * best.cpu[p] / total_cpu);
  std::cout << fmt::format("{:<10}  {:>8.4f}  {:>8.4f}\n", "sum", total_wall, total_cpu);
  return 0;
}
