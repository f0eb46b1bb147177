// Routes: programs whose microbatches take different paths through the stages (DualPipe's two
// pipelines in opposite directions over the same ranks) validate, lower and simulate, and their
// transfers go the way each microbatch's route says.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/validation.hpp"
#include "ppsim/sim/analysis.hpp"

using namespace ppsim;
using schedules::Op;
using schedules::OpKind;
using schedules::Program;
using schedules::Routes;

namespace {

// Two ranks, two pipelines: microbatch 0 runs stages 0 (rank 0) -> 1 (rank 1), microbatch 1 runs
// stages 2 (rank 1) -> 3 (rank 0). Each rank holds one stage of each direction.
Routes two_way_routes() {
  return Routes(4, {{0, 1}, {2, 3}}, {0, 1});
}
const char* kTwoWayAsync =
    "0F0,0SEND_F0#0,3RECV_F1#1,WAIT(1),3F1,3B1,3SEND_B1#2,0RECV_B0#3,WAIT(0;2;3),0B0\n"
    "2F1,2SEND_F1#0,1RECV_F0#1,WAIT(1),1F0,1B0,1SEND_B0#2,2RECV_B1#3,WAIT(0;2;3),2B1\n";
const char* kTwoWayBlocking =
    "0F0,0SEND_F0,3RECV_F1,3F1,3B1,3SEND_B1,0RECV_B0,0B0\n"
    "2F1,2SEND_F1,1RECV_F0,1F0,1B0,1SEND_B0,2RECV_B1,2B1\n";

// P ranks, stages 0..P-1 down the ranks (route 0) and P..2P-1 back up (route 1); the first half
// of the microbatches take route 0. Compute only, GPipe order per rank: forwards, then backwards.
Program bidirectional(int P, int M) {
  std::vector<schedules::StagePlace> placement;
  for (int s = 0; s < P; ++s) placement.push_back({s, 0});
  for (int s = 0; s < P; ++s) placement.push_back({P - 1 - s, 1});
  std::vector<std::int32_t> down, up, of_mb;
  for (int s = 0; s < P; ++s) {
    down.push_back(s);
    up.push_back(P + s);
  }
  for (int m = 0; m < M; ++m) of_mb.push_back(m < M / 2 ? 0 : 1);
  Program p(M, placement, Routes(2 * P, {down, up}, of_mb));
  for (int r = 0; r < P; ++r) {
    auto stage_of = [&](int m) { return m < M / 2 ? r : 2 * P - 1 - r; };
    for (int m = 0; m < M; ++m) p.push(r, Op::compute(OpKind::F, stage_of(m), m));
    for (int m = M - 1; m >= 0; --m) p.push(r, Op::compute(OpKind::B, stage_of(m), m));
  }
  return p;
}

}  // namespace

TEST_CASE("routes.next_previous_stage_depend_microbatch", "[routes]") {
  // Routes: next and previous stage depend on the microbatch
  const Routes r = two_way_routes();
  CHECK(r.next(0, 0) == 1);
  CHECK(r.next(1, 0) == Routes::kNone);
  CHECK(r.prev(0, 0) == Routes::kNone);
  CHECK(r.next(2, 1) == 3);
  CHECK(r.prev(3, 1) == 2);
  CHECK(r.next(0, 1) == Routes::kOffRoute);  // microbatch 1 never visits stage 0
  CHECK_FALSE(r.on_route(2, 0));
  // One route through 0..S-1 is the linear case.
  CHECK(Routes(3, {{0, 1, 2}}).is_linear());
  CHECK(Routes(3, {{0, 1, 2}}) == Routes::linear(3));
}

TEST_CASE("routes.stage_twice_stage_out_range", "[routes]") {
  // Routes: a stage twice, a stage out of range, or a missing route is refused
  CHECK_THROWS_AS(Routes(3, {{0, 1, 0}}), schedules::ParameterError);
  CHECK_THROWS_AS(Routes(3, {{0, 3}}), schedules::ParameterError);
  CHECK_THROWS_AS(Routes(3, {{0, 1}}, {0, 1}), schedules::ParameterError);
  CHECK_THROWS_AS(Routes(3, {}), schedules::ParameterError);
}

TEST_CASE("routes.hand_written_bidirectional_2_rank", "[routes]") {
  // A hand-written bidirectional 2-rank program validates and simulates, each direction's tensors
  // cross the way its route says
  const Program p = Program::parse(kTwoWayAsync, two_way_routes());
  REQUIRE(p.stages() == 4);
  CHECK(p.rank_of(3) == 0);
  CHECK(p.rank_of(2) == 1);
  CHECK(schedules::validate(p).empty());
  // Without its routes the same ops read as one pipeline 0 -> 1 -> 2 -> 3: nonsense.
  CHECK_FALSE(schedules::validate(Program::parse(kTwoWayAsync)).empty());

  auto o = test::uniform(4, 1, 2);
  o.network.boundary_bytes = 10;
  record::Trace trace;
  record::TraceRecorder recorder(trace);
  const auto r = sim::simulate(p, o, &recorder);
  REQUIRE_FALSE(r.deadlock);
  CHECK(r.errors.empty());
  REQUIRE(trace.transfers.size() == 4);
  test::for_each_transfer(p, trace, [](const record::TransferEvent& t, const Op& send) {
    // Forward activations of microbatch 0 go down (0 -> 1), of microbatch 1 up (1 -> 0); the
    // gradients go the other way.
    const bool down = (send.kind == OpKind::SEND_F) == (send.microbatch == 0);
    CHECK(t.src_rank == (down ? 0 : 1));
    CHECK(t.dst_rank == (down ? 1 : 0));
  });
  // Each rank sends one activation and one gradient.
  for (const auto& m : r.per_rank) CHECK(m.sent_bytes == 20);
}

TEST_CASE("routes.blocking_bidirectional_program_deadlocks_rank", "[routes][deadlock]") {
  // The blocking bidirectional program deadlocks: each rank sends first, to the other
  const Program p = Program::parse(kTwoWayBlocking, two_way_routes());
  CHECK(schedules::validate(p).empty());
  const auto r = sim::simulate(p, test::uniform(4, 1, 2));
  const auto& c = test::two_rank_cycle(r);
  CHECK(c[0].op == "0SEND_F0");
  CHECK(c[0].peer == 1);
  CHECK(c[1].op == "2SEND_F1");
  CHECK(c[1].peer == 0);
}

TEST_CASE("routes.generated_bidirectional_4_rank_program", "[routes][lowering]") {
  // A generated bidirectional 4-rank program lowers with every comm style to clean programs, under
  // async it runs and moves 2(P-1) tensors per microbatch, each the way its route goes
  for (int P : {2, 4}) {
    const int M = 4;
    const Program compute = bidirectional(P, M);
    for (const auto& lowering : test::all_lowerings()) {
      INFO("P=" << P << " " << test::describe(lowering));
      if (!test::accepts(lowering, compute)) continue;
      const Program p = schedules::lower(compute, lowering);
      CHECK(p.routes() == compute.routes());
      CHECK(schedules::validate(p).empty());
    }
    const Program p = schedules::lower(compute, {"async", {{"prefetch", 1}}});
    auto o = test::uniform(2 * P, 1, 2);
    o.network.boundary_bytes = 1;
    record::Trace trace;
    record::TraceRecorder recorder(trace);
    const auto r = sim::simulate(p, o, &recorder);
    REQUIRE_FALSE(r.deadlock);
    CHECK(r.comm_bytes == 2 * (P - 1) * M);
    for (const auto& t : trace.transfers) {
      const Op& send = p.ops(t.src_rank)[static_cast<std::size_t>(t.src_pos)];
      const bool route0 = send.microbatch < M / 2;
      const bool forward = send.kind == OpKind::SEND_F;
      // route 0 runs down the ranks, route 1 up; gradients go against the route
      CHECK(t.dst_rank - t.src_rank == ((route0 == forward) ? 1 : -1));
    }
  }
}

TEST_CASE("routes.schedule_routes_read_checked_used", "[routes][config]") {
  // A custom config with routes: schedule.routes is read, checked and used
  nlohmann::json j = {
      {"schedule",
       {{"kind", "custom"},
        {"ops",
         {"0F0,0SEND_F0#0,3RECV_F1#1,WAIT(1),3F1,3B1,3SEND_B1#2,0RECV_B0#3,WAIT(0;2;3),0B0",
          "2F1,2SEND_F1#0,1RECV_F0#1,WAIT(1),1F0,1B0,1SEND_B0#2,2RECV_B1#3,WAIT(0;2;3),2B1"}},
        {"routes",
         {{{"stages", {0, 1}}, {"microbatches", {0}}},
          {{"stages", {2, 3}}, {"microbatches", {1}}}}}}}};
  const auto rec = sim::analyze(config::parse_config(j, "two-way.json"));
  CHECK(rec.ok());
  // A microbatch on two routes, and a route through a stage twice, name the key.
  auto bad = j;
  bad["schedule"]["routes"][1]["microbatches"] = {0};
  CHECK_THROWS_WITH(
      config::parse_config(bad, "x.json"),
      Catch::Contains("schedule.routes[1].microbatches") && Catch::Contains("already on route 0"));
  bad = j;
  bad["schedule"]["routes"][0]["stages"] = {0, 0};
  CHECK_THROWS_WITH(config::parse_config(bad, "x.json"),
                    Catch::Contains("schedule.routes") && Catch::Contains("twice"));
}
