// Simulator throughput and memory: ops simulated per second and resident bytes per op.
//
// Every case runs in a fresh child process (this binary re-executed with --case NAME), because a
// process's peak RSS (VmHWM) only grows. The child measures, from /proc/self/status:
//   program bytes   = VmRSS after generate + lower  - VmRSS before (the baseline)
//   sim peak bytes  = VmHWM over the simulate calls - VmRSS right before them
// (VmHWM is reset through /proc/self/clear_refs before simulating where the kernel allows it, so
// the lowering's own peak does not count against the simulator.) Throughput is
// program.total_ops() / seconds of sim::simulate, best of --reps runs, steady_clock; the CPU time
// of the simulating thread is reported next to it, for machines shared with other work.
//
//   ppsim_bench_sim [--reps N] [--json] [--small] [--filter TEXT] [--check]
//   ppsim_bench_sim --case NAME [--reps N]  (one case in this process, JSON out; for valgrind)
//   ppsim_bench_sim --list
#include <fmt/format.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ppsim/record/observer.hpp"
#include "ppsim/record/trace.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/sim/simulator.hpp"

namespace {

using ppsim::schedules::LoweringOptions;
using ppsim::schedules::Program;
using ppsim::schedules::ScheduleParams;

constexpr double kTargetMopsPerSecond = 10.0;  // on one core
constexpr double kTargetBytesPerOp = 100.0;    // simulator peak, metrics-only
constexpr int kDefaultReps = 3;

struct Case {
  std::string name;
  std::string kind;  // generator name
  int ranks = 0;
  int microbatches = 0;
  int chunks = 1;
  bool trace = false;  // TraceRecorder into a Trace; otherwise no observer
  bool small = false;  // a quick variant, run with --small
};

std::vector<Case> all_cases() {
  struct Shape {
    std::string kind;
    int ranks, microbatches, chunks;
    bool small;
  };
  const std::vector<Shape> shapes = {
      {"1f1b", 64, 1024, 1, false},
      {"interleaved-1f1b", 256, 4096, 2, false},
      {"1f1b", 16, 256, 1, true},
      {"interleaved-1f1b", 16, 256, 2, true},
  };
  std::vector<Case> cases;
  for (const Shape& s : shapes) {
    std::string base = fmt::format("{}-p{}-m{}", s.kind, s.ranks, s.microbatches);
    if (s.chunks > 1) base += fmt::format("-v{}", s.chunks);
    for (bool trace : {false, true})
      cases.push_back({base + (trace ? "/trace" : "/metrics"), s.kind, s.ranks, s.microbatches,
                       s.chunks, trace, s.small});
  }
  return cases;
}

std::optional<Case> find_case(std::string_view name) {
  for (const Case& c : all_cases())
    if (c.name == name) return c;
  return std::nullopt;
}

// ---- the model every case uses ------------------------------------------------------------------

LoweringOptions lowering_options() {
  return LoweringOptions{"async", {{"prefetch", 1}}};
}

ppsim::sim::SimOptions sim_options(int stages) {
  ppsim::sim::SimOptions o;
  ppsim::sim::StageCost cost;
  cost.forward = 1.0;
  cost.backward = 2.0;
  cost.backward_input = 1.0;
  cost.backward_weight = 1.0;
  o.costs = ppsim::sim::CostModel::uniform(stages, cost);
  o.network.latency = 0.01;
  o.network.bandwidth = 1e9;
  o.network.boundary_bytes = std::int64_t{1} << 20;
  o.memory.activation_bytes = std::int64_t{1} << 28;
  return o;
}

constexpr std::string_view kModelText =
    "costs F=1 B=2, latency 0.01, bandwidth 1e9 B/unit, boundary 1 MiB, activation 256 MiB; "
    "async comm, prefetch 1";

// ---- /proc/self/status --------------------------------------------------------------------------

// A "VmRSS"-style field of /proc/self/status in bytes; -1 when it cannot be read.
std::int64_t status_bytes(std::string_view key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == ':')
      return std::strtoll(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
  }
  return -1;
}
std::int64_t rss_bytes() {
  return status_bytes("VmRSS");
}
std::int64_t peak_rss_bytes() {
  return status_bytes("VmHWM");
}

// Sets VmHWM back to the current RSS (Linux >= 4.0); false where that is not allowed.
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Hands freed heap pages back to the kernel so that RSS reflects what is live.
void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// ---- one case, in this process ------------------------------------------------------------------

nlohmann::json run_case(const Case& c, int reps) {
  const std::int64_t baseline = rss_bytes();
  const bool hwm_reset = reset_peak_rss();

  Program program;
  {
    const Program compute = ppsim::schedules::generate(
        c.kind, c.chunks > 1
                    ? ScheduleParams{{"ranks", c.ranks},
                                     {"microbatches", c.microbatches},
                                     {"chunks", c.chunks}}
                    : ScheduleParams{{"ranks", c.ranks}, {"microbatches", c.microbatches}});
    program = ppsim::schedules::lower(compute, lowering_options());
  }
  trim_heap();
  const std::int64_t after_program = rss_bytes();
  const std::int64_t program_peak = peak_rss_bytes();
  const auto ops = static_cast<std::uint64_t>(program.total_ops());
  const ppsim::sim::SimOptions options = sim_options(program.stages());

  const std::int64_t before_sim = rss_bytes();
  reset_peak_rss();
  std::vector<double> seconds, cpu_seconds;
  std::string problem;
  std::uint64_t trace_records = 0;
  double makespan = 0;
  for (int rep = 0; rep < reps; ++rep) {
    ppsim::record::Trace trace;
    ppsim::record::TraceRecorder recorder(trace);
    const double cpu_start = thread_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    const ppsim::sim::SimResult result =
        ppsim::sim::simulate(program, options, c.trace ? &recorder : nullptr);
    const auto stop = std::chrono::steady_clock::now();
    cpu_seconds.push_back(thread_cpu_seconds() - cpu_start);
    seconds.push_back(std::chrono::duration<double>(stop - start).count());
    makespan = result.makespan;
    trace_records = trace.spans.size() + trace.transfers.size() + trace.counters.size();
    if (rep == 0) {
      if (result.deadlock)
        problem = "deadlock: " + result.deadlock->describe();
      else if (!result.errors.empty())
        problem = fmt::format("{} errors, first: {}", result.errors.size(),
                              result.errors.front().message);
      else if (result.ops_executed != ops)
        problem = fmt::format("executed {} of {} ops", result.ops_executed, ops);
    }
  }
  const std::int64_t sim_peak = peak_rss_bytes();

  const double best = *std::min_element(seconds.begin(), seconds.end());
  const double best_cpu = *std::min_element(cpu_seconds.begin(), cpu_seconds.end());
  const double dops = static_cast<double>(ops);
  nlohmann::json j;
  j["case"] = c.name;
  j["kind"] = c.kind;
  j["ranks"] = c.ranks;
  j["microbatches"] = c.microbatches;
  j["chunks"] = c.chunks;
  j["observer"] = c.trace ? "trace" : "none";
  j["ops"] = ops;
  j["reps"] = reps;
  j["seconds"] = seconds;
  j["best_seconds"] = best;
  j["mops_per_second"] = best > 0 ? dops / best / 1e6 : 0.0;
  j["cpu_seconds"] = cpu_seconds;
  j["best_cpu_seconds"] = best_cpu;
  j["cpu_mops_per_second"] = best_cpu > 0 ? dops / best_cpu / 1e6 : 0.0;
  j["makespan"] = makespan;
  j["trace_records"] = trace_records;
  j["baseline_rss_bytes"] = baseline;
  j["program_bytes"] = after_program - baseline;
  j["program_bytes_per_op"] = static_cast<double>(after_program - baseline) / dops;
  j["program_peak_bytes"] = program_peak - baseline;  // generate + lower, meaningful if hwm_reset
  j["sim_peak_bytes"] = sim_peak - before_sim;
  j["sim_peak_bytes_per_op"] = static_cast<double>(sim_peak - before_sim) / dops;
  j["peak_reset"] = hwm_reset;  // false: VmHWM includes everything since exec
  j["ok"] = problem.empty();
  if (!problem.empty()) j["problem"] = problem;
  return j;
}

// ---- the driver ---------------------------------------------------------------------------------

// Re-executes this binary with --case NAME; returns the child's JSON or an error text.
nlohmann::json run_child(const Case& c, int reps) {
  const std::string reps_text = std::to_string(reps);
  std::vector<std::string> args = {"ppsim_bench_sim", "--case", c.name, "--reps", reps_text};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (pipe(fds) != 0) return {{"case", c.name}, {"ok", false}, {"problem", "pipe failed"}};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return {{"case", c.name}, {"ok", false}, {"problem", "fork failed"}};
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string why = WIFSIGNALED(status)
                                ? fmt::format("killed by signal {}", WTERMSIG(status))
                                : fmt::format("exit {}", WEXITSTATUS(status));
    return {{"case", c.name}, {"ok", false}, {"problem", "child " + why}};
  }
  try {
    return nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception&) {
    return {{"case", c.name}, {"ok", false}, {"problem", "unreadable child output"}};
  }
}

std::string grouped(std::uint64_t n) {  // 786432 -> "786,432"
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

double mib(double bytes) {
  return bytes / (1024.0 * 1024.0);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  in >> first;
  return first.empty() ? "?" : first;
}

struct Verdict {
  bool speed_ok, memory_ok;  // memory_ok is true for traced cases (no target)
};

Verdict judge(const nlohmann::json& r) {
  const bool speed = r.value("mops_per_second", 0.0) >= kTargetMopsPerSecond;
  const bool memory = r.value("observer", "") != "none" ||
                      r.value("sim_peak_bytes_per_op", 1e300) < kTargetBytesPerOp;
  return {r.value("ok", false) && speed, r.value("ok", false) && memory};
}

void print_table(const std::vector<nlohmann::json>& results, int reps) {
  fmt::print(
      "ppsim simulator benchmark: best of {} runs of sim::simulate, each case in a fresh "
      "process ({} cpus, load {})\n",
      reps, std::thread::hardware_concurrency(), load_average());
  fmt::print("model: {}\n", kModelText);
#ifndef NDEBUG
  fmt::print("warning: built without NDEBUG; configure with -DCMAKE_BUILD_TYPE=Release\n");
#endif
  fmt::print("\n");
  const std::string header = fmt::format(
      "{:<30} {:<8} {:>12} {:>8} {:>7} {:>7} {:>9} {:>6} {:>9} {:>6}  {:<9} {}", "case", "observer",
      "ops", "best s", "Mops/s", "cpu", "prog MiB", "B/op", "sim MiB", "B/op",
      fmt::format(">={:g}Mops", kTargetMopsPerSecond), fmt::format("<{:g}B/op", kTargetBytesPerOp));
  fmt::print("{}\n{}\n", header, std::string(header.size(), '-'));
  for (const auto& r : results) {
    const std::string name = r.value("case", "?");
    const std::string shown = name.substr(0, name.rfind('/'));
    if (!r.contains("ops")) {
      fmt::print("{:<30} FAILED: {}\n", shown, r.value("problem", "?"));
      continue;
    }
    const Verdict v = judge(r);
    const bool metrics_only = r.value("observer", "") == "none";
    fmt::print(
        "{:<30} {:<8} {:>12} {:>8.3f} {:>7.2f} {:>7.2f} {:>9.1f} {:>6.1f} {:>9.1f} {:>6.1f}  "
        "{:<9} {}\n",
        shown, r.value("observer", "?"), grouped(r.value("ops", std::uint64_t{0})),
        r.value("best_seconds", 0.0), r.value("mops_per_second", 0.0),
        r.value("cpu_mops_per_second", 0.0), mib(r.value("program_bytes", 0.0)),
        r.value("program_bytes_per_op", 0.0), mib(r.value("sim_peak_bytes", 0.0)),
        r.value("sim_peak_bytes_per_op", 0.0), v.speed_ok ? "ok" : "MISSED",
        metrics_only ? (v.memory_ok ? "ok" : "MISSED") : "-");
    if (!r.value("ok", false)) fmt::print("  ! {}\n", r.value("problem", "?"));
  }
  fmt::print(
      "\nMops/s:   ops / best wall-clock seconds of sim::simulate (steady_clock); cpu: ops / best "
      "CPU seconds of the simulating thread (what other processes on the machine do not "
      "slow down).\n");
  fmt::print("prog MiB: VmRSS after generate + lower minus VmRSS before (an Op is {} B).\n",
             sizeof(ppsim::schedules::Op));
  fmt::print(
      "sim MiB:  VmHWM during the simulate calls minus VmRSS before them (engine state, "
      "result, and the Trace when traced).\n");
  fmt::print(
      "targets:  >= {:g} Mops/s (wall) on one core for every case; < {:g} B/op simulator peak "
      "with no observer.\n",
      kTargetMopsPerSecond, kTargetBytesPerOp);
  for (const auto& r : results)
    if (!r.value("peak_reset", true))
      fmt::print("note: {}: VmHWM could not be reset, sim MiB includes the lowering's peak\n",
                 r.value("case", "?"));
}

int usage(int code) {
  std::FILE* out = code == 0 ? stdout : stderr;
  std::fputs(
      "usage: ppsim_bench_sim [--reps N] [--json] [--small] [--filter TEXT] [--check]\n"
      "       ppsim_bench_sim --case NAME [--reps N]\n"
      "       ppsim_bench_sim --list\n"
      "  --reps N       runs of sim::simulate per case, best one counts (default 3)\n"
      "  --json         print the results as JSON instead of the table\n"
      "  --small        run the small cases (P=16, M=256) instead of the issue's\n"
      "  --filter TEXT  only the cases whose name contains TEXT\n"
      "  --check        exit 1 when a target is missed or a case fails\n"
      "  --case NAME    run one case in this process and print its JSON line\n",
      out);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = kDefaultReps;
  bool json = false, small = false, check = false;
  std::string filter, one_case;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--reps" && has_value) {
      reps = std::atoi(argv[++i]);
      if (reps < 1) return usage(2);
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--small") {
      small = true;
    } else if (arg == "--check") {
      check = true;
    } else if (arg == "--filter" && has_value) {
      filter = argv[++i];
    } else if (arg == "--case" && has_value) {
      one_case = argv[++i];
    } else if (arg == "--list") {
      for (const Case& c : all_cases()) fmt::print("{}{}\n", c.name, c.small ? "  (--small)" : "");
      return 0;
    } else if (arg == "--help" || arg == "-h") {
      return usage(0);
    } else {
      fmt::print(stderr, "unknown or incomplete argument: {}\n", arg);
      return usage(2);
    }
  }

  if (!one_case.empty()) {
    const auto c = find_case(one_case);
    if (!c) {
      fmt::print(stderr, "unknown case {} (see --list)\n", one_case);
      return 2;
    }
    try {
      fmt::print("{}\n", run_case(*c, reps).dump());
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}: {}\n", one_case, e.what());
      return 1;
    }
    return 0;
  }

  std::vector<nlohmann::json> results;
  for (const Case& c : all_cases()) {
    if (c.small != small || c.name.find(filter) == std::string::npos) continue;
    fmt::print(stderr, "running {} ...\n", c.name);
    results.push_back(run_child(c, reps));
  }
  if (results.empty()) {
    fmt::print(stderr, "no case matches (see --list)\n");
    return 2;
  }

  if (json) {
    nlohmann::json out;
    out["reps"] = reps;
    out["model"] = kModelText;
    out["targets"] = {{"mops_per_second", kTargetMopsPerSecond},
                      {"sim_peak_bytes_per_op_metrics_only", kTargetBytesPerOp}};
    out["cases"] = results;
    fmt::print("{}\n", out.dump(2));
  } else {
    print_table(results, reps);
  }

  if (!check) return 0;
  for (const auto& r : results) {
    const Verdict v = judge(r);
    if (!v.speed_ok || !v.memory_ok) return 1;
  }
  return 0;
}
