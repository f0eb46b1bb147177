// The run record: metrics computed from a Trace equal the engine's own accumulators exactly (on
// every bundled config and hundreds of random programs, deadlocked ones included); observers fan
// out and tolerate one thread per rank; config sections owned by other libraries plug in.
#include <catch2/catch.hpp>
#include <random>
#include <thread>

#include "helpers.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/config/section.hpp"
#include "ppsim/record/metrics.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;

namespace {

void with_engine_stash_split(record::RunMetrics& from_trace, const record::RunMetrics& engine) {
  for (std::size_t r = 0; r < from_trace.per_rank.size() && r < engine.per_rank.size(); ++r)
    from_trace.per_rank[r].peak_activation_bytes = engine.per_rank[r].peak_activation_bytes;
}

void check_same_metrics(const schedules::Program& p, const sim::SimOptions& o) {
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  const sim::SimResult fast = sim::simulate(p, o);
  const sim::SimResult traced = sim::simulate(p, o, &recorder);
  const record::RunMetrics& engine = fast;
  record::RunMetrics from_trace = record::compute_metrics(trace, p);
  // A trace's counters hold each rank's total memory only, not the stash part of its peak.
  with_engine_stash_split(from_trace, engine);
  CHECK(static_cast<const record::RunMetrics&>(traced) == engine);  // observing changes nothing
  CHECK(from_trace == engine);
  if (!(from_trace == engine)) {
    CHECK(from_trace.makespan == engine.makespan);
    CHECK(from_trace.comm_bytes == engine.comm_bytes);
    for (std::size_t r = 0; r < engine.per_rank.size(); ++r) {
      INFO("rank " << r);
      CHECK(from_trace.per_rank[r].busy == engine.per_rank[r].busy);
      CHECK(from_trace.per_rank[r].comm_exposed == engine.per_rank[r].comm_exposed);
      CHECK(from_trace.per_rank[r].peak_memory_bytes == engine.per_rank[r].peak_memory_bytes);
      CHECK(from_trace.per_rank[r].peak_inflight == engine.per_rank[r].peak_inflight);
      CHECK(from_trace.per_rank[r].ops_done == engine.per_rank[r].ops_done);
      CHECK(from_trace.per_rank[r].end == engine.per_rank[r].end);
    }
  }
}

}  // namespace

TEST_CASE("run_record.compute_metrics_trace_equals_engine", "[run_record][golden]") {
  // compute_metrics(trace) equals the engine's accumulators on every bundled config
  const int configs = test::for_each_bundled_config([](const config::Prepared& prep) {
    check_same_metrics(*prep.program, prep.model);
    // And through the run record, as the CLI gets it.
    const record::RunRecord rec = sim::analyze(prep, {.trace = true});
    REQUIRE(rec.trace);
    record::RunMetrics from_trace = record::compute_metrics(*rec.trace, *rec.program);
    with_engine_stash_split(from_trace, *rec.metrics);
    CHECK(from_trace == *rec.metrics);
  });
  CHECK(configs >= 6);
}

TEST_CASE("run_record.compute_metrics_trace_equals_engine_2", "[run_record][property]") {
  // compute_metrics(trace) equals the engine's accumulators on random programs (random schedules,
  // styles, costs, networks, memory, ops swapped or dropped)
  std::mt19937 rng(5);
  int run = 0, deadlocked = 0;
  while (run < 300) {
    const auto [p, o, name] = test::random_case(rng);
    INFO("program " << run << ": " << name << "\n" << p.to_text());
    check_same_metrics(p, o);
    deadlocked += sim::simulate(p, o).deadlock ? 1 : 0;
    ++run;
  }
  // The sample covers runs that hang as well as runs that finish.
  CHECK(deadlocked > 10);
  CHECK(deadlocked < 290);
}

TEST_CASE("run_record.stuck_rank_s_timeline_records", "[run_record]") {
  // A stuck rank's timeline records the op it blocked in and when
  const auto p = test::lowered("1f1b", 4, 8, 1, "blocking");
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  const auto r = sim::simulate(p, test::uniform(4, 1, 2), &recorder);
  REQUIRE(r.deadlock);
  REQUIRE(trace.ranks.size() == 4);
  for (int rank = 0; rank < 4; ++rank) {
    const auto& t = trace.ranks[static_cast<std::size_t>(rank)];
    CHECK_FALSE(t.finished);
    CHECK(t.stuck_pos == static_cast<int>(r.per_rank[static_cast<std::size_t>(rank)].ops_done));
    CHECK(t.end == r.per_rank[static_cast<std::size_t>(rank)].end);
  }
  // Rank 2 is stuck in 2SEND_F1, as the deadlock report says.
  CHECK(p.op_text(2, p.ops(2)[static_cast<std::size_t>(trace.ranks[2].stuck_pos)]) == "2SEND_F1");
}

namespace {
// Counts events and checks the contract: on_begin first, on_end last, per-rank order kept.
class Counting : public record::Observer {
 public:
  void on_begin(int ranks, bool) override {
    CHECK(events == 0);
    last_time.assign(static_cast<std::size_t>(ranks), 0);
    begun = true;
  }
  void on_compute(int rank, int, double start, double end) override { seen(rank, start, end); }
  void on_blocked(int rank, int, double start, double end) override { seen(rank, start, end); }
  void on_post(int rank, int, double time) override { seen(rank, time, time); }
  void on_end() override { ended = true; }
  void seen(int rank, double start, double end) {
    CHECK(begun);
    CHECK_FALSE(ended);
    CHECK(start >= last_time[static_cast<std::size_t>(rank)]);  // issue order on each rank
    last_time[static_cast<std::size_t>(rank)] = end;
    ++events;
  }
  std::vector<double> last_time;
  std::size_t events = 0;
  bool begun = false, ended = false;
};
}  // namespace

TEST_CASE("run_record.several_sinks_once_see_event", "[run_record][observer]") {
  // Observers: several sinks at once see every event, in the contract's order
  const auto p = test::lowered("interleaved-1f1b", 4, 8, 2, "async");
  Counting a, b;
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  record::ObserverList list;
  list.add(&a);
  list.add(&b);
  list.add(&recorder);
  list.add(nullptr);  // ignored
  sim::simulate(p, test::uniform(8, 1, 2), list.get());
  CHECK(a.ended);
  CHECK(a.events == p.total_ops());  // one span per op
  CHECK(b.events == a.events);
  CHECK(trace.spans.size() == a.events);
  record::ObserverList none;
  CHECK(none.get() == nullptr);  // producers keep their fast path
}

TEST_CASE("run_record.tracerecorder_under_concurrent_producer_thread",
          "[run_record][observer][threads]") {
  // TraceRecorder under a concurrent producer: one thread per rank, no locks, every event kept in
  // per-rank order
  constexpr int kRanks = 8, kEvents = 2000;
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  recorder.on_begin(kRanks, /*concurrent=*/true);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      for (int i = 0; i < kEvents; ++i) {
        recorder.on_compute(r, i, i, i + 1);
        recorder.on_counter(r, i, i, 1);
        recorder.on_transfer({(r + 1) % kRanks, i, r, i, double(i), i + 0.5, 8});
      }
      recorder.on_rank_end(r, {0, kEvents, true, -1, 0});
    });
  for (auto& t : threads) t.join();
  recorder.on_end();
  REQUIRE(trace.spans.size() == static_cast<std::size_t>(kRanks * kEvents));
  CHECK(trace.counters.size() == trace.spans.size());
  CHECK(trace.transfers.size() == trace.spans.size());
  for (std::size_t i = 0; i < trace.spans.size(); ++i) {
    CHECK(trace.spans[i].rank == static_cast<int>(i) / kEvents);
    CHECK(trace.spans[i].pos == static_cast<int>(i) % kEvents);
  }
}

TEST_CASE("run_record.transfers_ready_same_instant_link", "[sim][links]") {
  // One tie rule: transfers ready at the same instant on one link go in the sender's post order
  // Rank 0 posts microbatch 1's send before microbatch 0's; rank 1 posted both receives earlier,
  // in the other order. Both transfers become ready at t = 2 on link 0 -> 1: the one rank 0
  // posted first (microbatch 1) goes first.
  const auto p = schedules::Program::parse(
      "0F0,0F1,0SEND_F1#0,0SEND_F0#1,WAIT(0;1),0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0#0,1RECV_F1#1,WAIT(0;1),1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n");
  auto o = test::uniform(2, 1, 2);
  o.network.latency = 1.0;
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  sim::simulate(p, o, &recorder);
  std::vector<std::pair<double, int>> forward;  // (start, microbatch) of transfers 0 -> 1
  for (const auto& t : trace.transfers)
    if (t.src_rank == 0)
      forward.emplace_back(t.start, p.ops(0)[static_cast<std::size_t>(t.src_pos)].microbatch);
  std::sort(forward.begin(), forward.end());
  REQUIRE(forward.size() == 2);
  CHECK(forward[0] == std::pair<double, int>{2.0, 1});
  CHECK(forward[1] == std::pair<double, int>{3.0, 0});
}

TEST_CASE("run_record.two_receives_posted_instant_reverse", "[sim][links]") {
  // Tie rule: two receives posted at one instant in the reverse of the sender's post order still
  // get their transfers in the sender's post order
  // Microbatches 0 and 2 run stages 0 (rank 0) -> 1 (rank 1); microbatch 1 runs stages 2 (rank 1)
  // -> 3 (rank 0). Rank 0 posts its sends of microbatch 2 then 0 at t = 2; rank 1 is busy in 2F1
  // until t = 5 and then posts the receives for 0 then 2. Both transfers are ready at t = 5:
  // microbatch 2's, posted first by the sender, takes the link first.
  const auto p = schedules::Program::parse(
      "0F0,0F2,0SEND_F2#0,0SEND_F0#1,3RECV_F1#2,WAIT(2),3F1,3B1,3SEND_B1#3,0RECV_B0#4,"
      "0RECV_B2#5,WAIT(0;1;3;4;5),0B0,0B2\n"
      "2F1,2SEND_F1#0,1RECV_F0#1,1RECV_F2#2,WAIT(1;2),1F0,1B0,1SEND_B0#3,1F2,1B2,1SEND_B2#4,"
      "2RECV_B1#5,WAIT(0;3;4;5),2B1\n",
      schedules::Routes(4, {{0, 1}, {2, 3}}, {0, 1, 0}));
  REQUIRE(schedules::validate(p).empty());
  for (const auto matching : {model::Matching::tag, model::Matching::fifo}) {
    auto o = test::uniform(4, 1, 2);
    o.costs.stages[2].forward = 5;
    o.network.latency = 1.0;
    o.network.matching = matching;
    record::Trace trace;
    record::TraceRecorder recorder(trace);
    const auto r = sim::simulate(p, o, &recorder);
    REQUIRE_FALSE(r.deadlock);
    std::vector<std::pair<double, int>> forward;  // (start, microbatch) of rank 0's SEND_Fs
    for (const auto& t : trace.transfers) {
      const auto& op = p.ops(t.src_rank)[static_cast<std::size_t>(t.src_pos)];
      if (t.src_rank == 0 && op.kind == schedules::OpKind::SEND_F)
        forward.emplace_back(t.start, op.microbatch);
    }
    std::sort(forward.begin(), forward.end());
    REQUIRE(forward.size() == 2);
    CHECK(forward[0] == std::pair<double, int>{5.0, 2});
    CHECK(forward[1] == std::pair<double, int>{6.0, 0});
  }
}

TEST_CASE("run_record.config_section_owned_another_library", "[config][sections]") {
  // A config section owned by another library plugs in without touching the simulator
  config::SectionRegistry::instance().add(
      {"example_executor", "settings of a test-only section", [](config::Reader& r) {
         r.integer("threads", 1, 1);
         r.reject_unknown();
       }});
  nlohmann::json j = {{"schedule", {{"kind", "1f1b"}, {"ranks", 2}, {"microbatches", 2}}},
                      {"example_executor", {{"threads", 4}}}};
  const auto c = config::parse_config(j, "s.json");
  REQUIRE(c.sections.count("example_executor"));
  CHECK(c.sections.at("example_executor")["threads"] == 4);
  CHECK(sim::analyze(c).ok());  // the simulator ignores sections it does not own
  j["example_executor"]["thread"] = 4;
  CHECK_THROWS_WITH(config::parse_config(j, "s.json"),
                    Catch::Contains("example_executor.thread") && Catch::Contains("unknown key"));
}
