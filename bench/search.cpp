// `ppsim search` speed on the zero-bubble paper's largest profiled setting (p = 32, m = 256,
// tests/data/zb_settings.json) at memory limits of 1, 1.5 and 2 x p x one microbatch's
// activations: wall seconds per search (median of --repeat), candidates run, the best.
//   ppsim_bench_search [--repeat N] [--jobs N]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ppsim/base/jobs.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/search/search.hpp"

int main(int argc, char** argv) {
  int repeat = 3;
  unsigned jobs = ppsim::base::default_jobs();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeat")) repeat = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--jobs"))
      jobs = static_cast<unsigned>(std::max(1, std::atoi(argv[i + 1])));
  }
  // Setting 12 of iclr_mem(): F/B/W/comm measured on the 6144-hidden model, s = 1024.
  const int p = 32, m = 256, h = 6144, a = 48;
  const std::int64_t act = 34LL * h + 5LL * a * 1024;
  const nlohmann::json cfg = {
      {"name", "zb-p32-m256"},
      {"time_unit", "us"},
      {"schedule", {{"kind", "zb-h1"}, {"ranks", p}, {"microbatches", m}}},
      {"costs", {{"forward", 10402}, {"backward_input", 10248}, {"backward_weight", 7698}}},
      {"comm", {{"latency", 460}}},
      {"memory", {{"activation_bytes", act}, {"weight_stash_bytes", 32 * h}}}};
  const ppsim::config::Config base = ppsim::config::parse_config(cfg, "bench");
  fmt::print("search p={} m={} on {} threads, median of {}\n", p, m, jobs, repeat);
  fmt::print("{:>5} {:>10} {:>11} {:>14} {:>9}  {}\n", "k", "seconds", "candidates", "makespan",
             "bubble", "best");
  for (double k : {1.0, 1.5, 2.0}) {
    ppsim::search::SearchOptions o;
    o.memory_limit = static_cast<std::int64_t>(k * p * act);
    o.jobs = jobs;
    std::vector<double> secs;
    ppsim::search::SearchResult r;
    for (int i = 0; i < repeat; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      r = ppsim::search::search(base, o);
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(secs.begin(), secs.end());
    const auto& b = r.candidates[*r.best];
    fmt::print("{:>5} {:>10.3f} {:>11} {:>14.0f} {:>9.4f}  {}\n", k, secs[secs.size() / 2],
               r.candidates.size(), b.makespan, b.bubble_fraction, b.schedule);
  }
}
