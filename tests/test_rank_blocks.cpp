// Lowering and validation on several threads: the ranks are cut into contiguous blocks of about
// equal work, and the result (the lowered program, the list of diagnostics with its cap) is the
// same in any thread count, on every generator and style and on programs broken at random.
#include <atomic>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>

#include "helpers.hpp"
#include "ppsim/base/parallel_for.hpp"
#include "ppsim/schedules/rank_blocks.hpp"

using namespace ppsim;
using schedules::Diagnostic;
using schedules::Op;
using schedules::OpKind;
using schedules::Program;

namespace {

std::string diagnostics_text(const std::vector<Diagnostic>& ds) {
  std::string s;
  for (const auto& d : ds)
    s += d.kind + " r" + std::to_string(d.rank) + " p" + std::to_string(d.position) + " [" + d.op +
         "] " + d.message + (d.fatal ? " FATAL" : "") + "\n";
  return s;
}

std::vector<Diagnostic> validate_in(const Program& p, unsigned threads) {
  schedules::ValidateOptions o;
  o.threads = threads;
  return schedules::validate(p, o);
}

// Breaks a program at many places on every rank: ops swapped, dropped, duplicated, moved to
// another stage or microbatch, request ids reused or made up. `mild`: only WAITs dropped or
// moved later, which mostly gives warnings (read_before_wait, never_waited, ...).
void break_program(Program& p, std::mt19937& rng, int edits, bool mild) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int e = 0; e < edits; ++e) {
    auto& ops = p.ops(pick(0, p.ranks() - 1));
    if (ops.size() < 2) continue;
    const auto i = static_cast<std::size_t>(pick(0, static_cast<int>(ops.size()) - 2));
    Op& op = ops[i];
    if (mild) {  // a WAIT dropped or moved past the op after it
      if (op.kind == OpKind::WAIT && pick(0, 1) == 0)
        ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
      else if (op.kind == OpKind::WAIT)
        std::swap(ops[i], ops[i + 1]);
      continue;
    }
    switch (pick(0, 5)) {
      case 0:
        std::swap(ops[i], ops[i + 1]);
        break;
      case 1:
        ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      case 2:
        if (op.kind != OpKind::WAIT && !schedules::is_composite(op.kind))
          ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(i), op);
        break;
      case 3:
        if (op.kind != OpKind::WAIT && !schedules::is_composite(op.kind))
          op.microbatch = pick(-1, p.microbatches());
        break;
      case 4:
        if (op.kind != OpKind::WAIT && !schedules::is_composite(op.kind))
          op.stage = pick(0, p.stages() - 1);
        break;
      default:
        if (schedules::is_comm(op.kind) && op.async) op.request = pick(-3, 40);
        break;
    }
  }
}

}  // namespace

TEST_CASE("rank_blocks.contiguous_non_empty_blocks_about", "[rank_blocks]") {
  // rank_blocks: contiguous, non-empty blocks of about equal weight
  std::mt19937 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    const int ranks = std::uniform_int_distribution<int>(0, 40)(rng);
    const auto blocks = static_cast<unsigned>(std::uniform_int_distribution<int>(1, 9)(rng));
    std::vector<std::size_t> w(static_cast<std::size_t>(ranks));
    const bool lopsided = trial % 3 == 0;
    for (auto& x : w)
      x = static_cast<std::size_t>(
          std::uniform_int_distribution<int>(0, lopsided ? 1000 : 10)(rng));
    INFO("ranks " << ranks << " blocks " << blocks);
    const auto b = base::rank_blocks(w, blocks);
    const std::size_t k = b.size() - 1;
    CHECK(k ==
          static_cast<std::size_t>(std::max(1, std::min<int>(static_cast<int>(blocks), ranks))));
    CHECK(b.front() == 0);
    CHECK(b.back() == ranks);
    const std::size_t total = std::accumulate(w.begin(), w.end(), std::size_t{0});
    const std::size_t heaviest = w.empty() ? 0 : *std::max_element(w.begin(), w.end());
    for (std::size_t i = 0; i < k; ++i) {
      if (ranks > 0) CHECK(b[i] < b[i + 1]);
      const std::size_t sum =
          std::accumulate(w.begin() + b[i], w.begin() + b[i + 1], std::size_t{0});
      // Greedy cuts overshoot a block's share by less than one rank's weight.
      CHECK(sum <= total / k + 2 * heaviest + 1);
    }
  }
  // Equal weights split evenly.
  CHECK(base::rank_blocks(std::vector<std::size_t>(8, 5), 2) == std::vector<int>{0, 4, 8});
  CHECK(base::rank_blocks(std::vector<std::size_t>(9, 5), 3) == std::vector<int>{0, 3, 6, 9});
}

TEST_CASE("rank_blocks.thread_only_enough_work_never", "[rank_blocks][threads]") {
  // blocks_for: a thread only for enough work, never inside another loop's work
  CHECK(base::blocks_for(10, 4) == 4);  // asked for
  CHECK(base::blocks_for(base::kMinWorkPerBlock - 1, 0) == 1);
  CHECK(base::blocks_for(base::kMinWorkPerBlock * 64, 0) == std::min(64u, base::default_jobs()));
  std::vector<unsigned> inside(4, 0);
  base::parallel_for(
      4, 2, [&](std::size_t i) { inside[i] = base::blocks_for(base::kMinWorkPerBlock * 64, 0); },
      [](std::size_t) {});
  for (unsigned n : inside) CHECK(n == 1);
}

TEST_CASE("rank_blocks.block_once_lowest_failing_block", "[rank_blocks][threads]") {
  // for_rank_blocks: every block once, the lowest failing block's exception
  const std::vector<int> bounds{0, 3, 5, 9, 12};
  std::vector<int> seen(12, 0);
  base::for_rank_blocks(bounds, [&](std::size_t, int first, int end) {
    for (int r = first; r < end; ++r) ++seen[static_cast<std::size_t>(r)];
  });
  CHECK(seen == std::vector<int>(12, 1));
  for (int rep = 0; rep < 20; ++rep) {
    CHECK_THROWS_WITH(
        base::for_rank_blocks(bounds,
                              [&](std::size_t b, int first, int) {
                                if (b >= 1)
                                  throw std::runtime_error("block " + std::to_string(b) + " rank " +
                                                           std::to_string(first));
                              }),
        "block 1 rank 3");
  }
}

TEST_CASE("rank_blocks.rank_once_any_worker_count", "[rank_blocks][threads]") {
  // for_each_rank: every rank once on any worker count, the lowest failing rank's error
  for (int ranks : {0, 1, 5, 100}) {
    for (unsigned workers : {1u, 2u, 3u, 8u, 64u, 200u}) {
      INFO("ranks " << ranks << " workers " << workers);
      std::vector<std::atomic<int>> seen(static_cast<std::size_t>(ranks));
      std::atomic<unsigned> highest_worker{0};
      base::for_each_rank(ranks, workers, [&](unsigned w, int r) {
        ++seen[static_cast<std::size_t>(r)];
        unsigned h = highest_worker.load();
        while (w > h && !highest_worker.compare_exchange_weak(h, w)) {
        }
      });
      for (const auto& n : seen) CHECK(n.load() == 1);
      CHECK(highest_worker.load() < std::max(1u, workers));
    }
  }
  // Ranks 37 and above throw (each with its number): a loop in order stops at 37; so must this,
  // whichever worker reaches a higher failing rank first.
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<std::atomic<int>> seen(100);
    CHECK_THROWS_WITH(base::for_each_rank(100, 4,
                                          [&](unsigned, int r) {
                                            ++seen[static_cast<std::size_t>(r)];
                                            if (r >= 37)
                                              throw std::runtime_error("rank " + std::to_string(r));
                                          }),
                      "rank 37");
    for (int r = 0; r <= 37; ++r) CHECK(seen[static_cast<std::size_t>(r)].load() == 1);
  }
}

TEST_CASE("rank_blocks.same_program_schedule_style", "[rank_blocks][threads][lowering]") {
  // Lowering on several threads: the same program as on one, for every schedule and style
  int compared = 0;
  for (const auto& g : schedules::Registry::instance().all()) {
    for (const auto& params : g.test_params) {
      const Program compute = schedules::generate(g.name, params);
      for (auto lowering : test::all_lowerings()) {
        if (!test::accepts(lowering, compute)) continue;
        for (bool groups : {false, true}) {
          lowering.groups = groups;
          lowering.threads = 1;
          const Program one = schedules::lower(compute, lowering);
          const std::string expected = one.to_text();
          for (unsigned threads : {2u, 3u, 8u}) {
            INFO(g.name << " " << test::describe(lowering) << " groups " << groups << " threads "
                        << threads);
            lowering.threads = threads;
            const Program many = schedules::lower(compute, lowering);
            CHECK(many.to_text() == expected);
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared > 300);
}

TEST_CASE("rank_blocks.same_diagnostics_broken_programs", "[rank_blocks][threads][validation]") {
  // Validation on several threads: the same diagnostics as on one, on broken programs
  std::mt19937 rng(11);
  const auto& generators = schedules::Registry::instance().all();
  const auto& lowerings = test::all_lowerings();
  int compared = 0, with_fatal = 0, with_warnings = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto& g = generators[static_cast<std::size_t>(trial) % generators.size()];
    const auto& params = g.test_params[static_cast<std::size_t>(trial / 7) % g.test_params.size()];
    const Program compute = schedules::generate(g.name, params);
    auto lowering = lowerings[static_cast<std::size_t>(trial / 3) % lowerings.size()];
    lowering.groups = trial % 4 == 0;
    if (!test::accepts(lowering, compute)) continue;
    Program p = schedules::lower(compute, lowering);
    break_program(p, rng, trial % 5 == 0 ? 0 : std::uniform_int_distribution<int>(1, 30)(rng),
                  trial % 2 == 1);
    const auto one = validate_in(p, 1);
    with_fatal += schedules::has_fatal(one) ? 1 : 0;
    with_warnings += !one.empty() && !schedules::has_fatal(one) ? 1 : 0;
    for (unsigned threads : {2u, 3u, 16u}) {
      INFO(g.name << " " << test::describe(lowering) << " threads " << threads << "\n"
                  << p.to_text());
      CHECK(diagnostics_text(validate_in(p, threads)) == diagnostics_text(one));
      ++compared;
    }
  }
  CHECK(compared > 600);
  CHECK(with_fatal > 20);
  CHECK(with_warnings > 20);
}

TEST_CASE("rank_blocks.cap_1000_diagnostics_falls_where", "[rank_blocks][threads][validation]") {
  // Validation on several threads: the cap of 1000 diagnostics falls where one thread's does
  // No receives anywhere: every rank reports hundreds of missing_receive and unmatched_send.
  Program p = test::lowered("1f1b", 8, 256, 1, "blocking");
  for (int r = 0; r < p.ranks(); ++r) {
    auto& ops = p.ops(r);
    std::erase_if(
        ops, [](const Op& op) { return op.kind == OpKind::RECV_F || op.kind == OpKind::RECV_B; });
  }
  const auto one = validate_in(p, 1);
  REQUIRE(one.size() == 1001);
  CHECK(one.back().kind == "too_many_diagnostics");
  CHECK(one[999].rank > 0);  // the cap falls past rank 0: several blocks contribute
  for (unsigned threads : {2u, 3u, 5u, 8u}) {
    INFO("threads " << threads);
    CHECK(diagnostics_text(validate_in(p, threads)) == diagnostics_text(one));
  }
}
