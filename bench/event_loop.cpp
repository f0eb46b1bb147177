// The physical limit of a discrete-event simulator on this machine: events per second of a minimal
// event loop with the shape of ppsim's engine and nothing else.
//
// P ranks, each a list of N 16-byte ops in its own vector (as a Program holds them). The loop pops
// the earliest (time, rank) from a heap, reads the rank's next op, adds its duration and pushes
// the rank back: one event per op, no communication, no memory model, no metrics. Ranks start
// staggered so that, as in a pipeline, successive events hop between ranks. Whatever ppsim's
// engine does beyond this costs time on top; this loop's rate is the ceiling for one core.
//
//   ppsim_bench_event_loop [--ranks P] [--ops N] [--reps R] [--json]
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <queue>
#include <string_view>
#include <vector>

namespace {

struct MiniOp {  // the size of schedules::Op
  std::uint8_t kind;
  std::uint8_t pad[3];
  std::int32_t stage, microbatch, extra;
};
static_assert(sizeof(MiniOp) == 16);

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Result {
  double wall, cpu, checksum;
};

Result run(const std::vector<std::vector<MiniOp>>& ops) {
  using Event = std::pair<double, std::int32_t>;  // (time, rank)
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue;
  std::vector<std::size_t> pc(ops.size(), 0);
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t r = 0; r < ops.size(); ++r) queue.emplace(1e-3 * static_cast<double>(r), r);
  double last = 0;
  while (!queue.empty()) {
    const auto [t, r] = queue.top();
    queue.pop();
    const auto rank = static_cast<std::size_t>(r);
    const MiniOp& op = ops[rank][pc[rank]];
    last = t + 1.0 + 0.5 * op.kind;  // F=1, B=1.5: durations differ by kind, as in the engine
    if (++pc[rank] < ops[rank].size()) queue.emplace(last, r);
  }
  const auto t1 = std::chrono::steady_clock::now();
  return {std::chrono::duration<double>(t1 - t0).count(), cpu_seconds() - cpu0, last};
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 256, reps = 3;
  long long per_rank = 65536;  // P=256: 16.8 M events, the size of the interleaved P=256 case
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--ranks" && i + 1 < argc)
      ranks = std::atoi(argv[++i]);
    else if (a == "--ops" && i + 1 < argc)
      per_rank = std::atoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--json")
      json = true;
    else {
      fmt::print(stderr,
                 "usage: ppsim_bench_event_loop [--ranks P] [--ops N] [--reps R] [--json]\n");
      return 2;
    }
  }
  if (ranks < 1 || per_rank < 1 || reps < 1) {
    fmt::print(stderr, "--ranks, --ops and --reps must be >= 1\n");
    return 2;
  }
  std::vector<std::vector<MiniOp>> ops(static_cast<std::size_t>(ranks));
  for (auto& list : ops) {
    list.resize(static_cast<std::size_t>(per_rank));
    for (std::size_t k = 0; k < list.size(); ++k)
      list[k] = MiniOp{static_cast<std::uint8_t>(k % 2), {}, 0, static_cast<std::int32_t>(k), 0};
  }
  const double events = static_cast<double>(ranks) * static_cast<double>(per_rank);
  double best_wall = 1e300, best_cpu = 1e300, check = 0;
  for (int i = 0; i < reps; ++i) {
    const Result r = run(ops);
    best_wall = std::min(best_wall, r.wall);
    best_cpu = std::min(best_cpu, r.cpu);
    check = r.checksum;
  }
  if (json) {
    fmt::print(
        "{{\"ranks\": {}, \"events\": {:.0f}, \"best_wall\": {:.6f}, \"best_cpu\": {:.6f}, "
        "\"mevents_per_second_wall\": {:.3f}, \"mevents_per_second_cpu\": {:.3f}, "
        "\"last_time\": {}}}\n",
        ranks, events, best_wall, best_cpu, events / best_wall / 1e6, events / best_cpu / 1e6,
        check);
  } else {
    fmt::print(
        "minimal event loop: {} ranks, {:.0f} events, best of {}: {:.3f} s wall ({:.1f} M "
        "events/s), {:.3f} s CPU ({:.1f} M events/s)\n",
        ranks, events, reps, best_wall, events / best_wall / 1e6, best_cpu,
        events / best_cpu / 1e6);
  }
  return 0;
}
