// Generators: the exact compute order per rank, the registry, and Megatron's rejections.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/semantics.hpp"

using namespace ppsim;
using schedules::OpKind;

namespace {
schedules::Program gen(const char* kind, int P, int M, int V = 1, int group = 0) {
  schedules::ScheduleParams params{{"ranks", P}, {"microbatches", M}};
  if (V != 1) params.set("chunks", V);
  if (group != 0) params.set("microbatch_group_size", group);
  return schedules::generate(kind, params);
}
}  // namespace

TEST_CASE("generators.forwards_then_backwards", "[generators]") {
  // gpipe: all forwards then all backwards
  const auto p = gen("gpipe", 3, 3);
  test::check_rank_lines(p, {{0, "0F0,0F1,0F2,0B0,0B1,0B2"}, {2, "2F0,2F1,2F2,2B0,2B1,2B2"}});
}

TEST_CASE("generators.rank_r_warms_up_min", "[generators]") {
  // 1f1b: rank r warms up with min(P-r-1, M) forwards, then alternates F and B, then cools down
  const auto p = gen("1f1b", 4, 6);
  test::check_rank_lines(p, {{0, "0F0,0F1,0F2,0F3,0B0,0F4,0B1,0F5,0B2,0B3,0B4,0B5"},
                             {2, "2F0,2F1,2B0,2F2,2B1,2F3,2B2,2F4,2B3,2F5,2B4,2B5"},
                             {3, "3F0,3B0,3F1,3B1,3F2,3B2,3F3,3B3,3F4,3B4,3F5,3B5"}});
  // Fewer microbatches than the warm-up: the warm-up is capped at M.
  CHECK(test::rank_line(gen("1f1b", 4, 2), 0) == "0F0,0F1,0B0,0B1");
  for (int P = 1; P <= 6; ++P)
    for (int M = 1; M <= 8; ++M)
      for (int r = 0; r < P; ++r) {
        const auto prog = gen("1f1b", P, M);
        const auto& ops = prog.ops(r);
        int warm = 0;
        while (warm < static_cast<int>(ops.size()) &&
               ops[static_cast<std::size_t>(warm)].kind == OpKind::F)
          ++warm;
        // the steady phase's first F directly follows the warm-up, unless the warm-up took all M
        CHECK(warm == std::min(P - r - 1, M) + (P - r - 1 < M ? 1 : 0));
      }
}

TEST_CASE("generators.stage_s_rank_s_mod", "[generators]") {
  // interleaved-1f1b: stage s on rank s mod P, groups of P microbatches per chunk, warm-up
  // 2(P-r-1) + (V-1)*group, backward visits chunks in reverse
  const auto p = gen("interleaved-1f1b", 3, 3, 2);
  for (int s = 0; s < 6; ++s) {
    CHECK(p.place(s).rank == s % 3);
    CHECK(p.place(s).chunk == s / 3);
  }
  // rank 2 (last): warm-up (V-1)*P = 3 forwards: chunk 0 microbatches 0..2; then steady F/B pairs.
  CHECK(test::rank_line(p, 2) == "2F0,2F1,2F2,5F0,5B0,5F1,5B1,5F2,5B2,2B0,2B1,2B2");
  // rank 0: warm-up 2*2 + 3 = 7 > M*V = 6, so all forwards first.
  CHECK(test::rank_line(p, 0) == "0F0,0F1,0F2,3F0,3F1,3F2,3B0,3B1,3B2,0B0,0B1,0B2");
  // A custom group size: groups of 4 with M = 8 on P = 3.
  const auto g = gen("interleaved-1f1b", 3, 8, 2, 4);
  std::string fwd;
  for (const auto& op : g.ops(0))
    if (op.kind == OpKind::F)
      fwd += std::to_string(op.stage) + "F" + std::to_string(op.microbatch) + " ";
  CHECK(fwd == "0F0 0F1 0F2 0F3 3F0 3F1 3F2 3F3 0F4 0F5 0F6 0F7 3F4 3F5 3F6 3F7 ");
}

TEST_CASE("generators.interleaved_1f1b_rejects_what_megatron", "[generators]") {
  // interleaved-1f1b rejects what Megatron-LM rejects
  auto key_of = [](int P, int M, int V, int group) {
    try {
      schedules::ScheduleParams params{{"ranks", P}, {"microbatches", M}, {"chunks", V}};
      if (group != 0) params.set("microbatch_group_size", group);
      schedules::generate("interleaved-1f1b", params);
    } catch (const schedules::ParameterError& e) {
      return e.key();
    }
    return std::string("accepted");
  };
  CHECK(key_of(4, 8, 1, 0) == "chunks");                 // one chunk is plain 1F1B
  CHECK(key_of(1, 8, 2, 0) == "ranks");                  // P must be >= 2
  CHECK(key_of(2, 8, 2, 0) == "accepted");               // Megatron Core runs P = 2
  CHECK(key_of(4, 3, 2, 0) == "microbatch_group_size");  // group (default P=4) > M
  CHECK(key_of(4, 8, 2, 3) == "microbatch_group_size");  // group < P
  CHECK(key_of(4, 10, 2, 0) == "microbatches");          // 10 % 4 = 2, in (0, P)
  CHECK(key_of(4, 12, 2, 0) == "accepted");
  CHECK(key_of(4, 11, 2, 0) == "microbatches");  // 11 % 4 = 3 < 4
  CHECK(key_of(3, 11, 2, 4) == "accepted");      // 11 % 4 = 3 >= P = 3
}

TEST_CASE("generators.names_pytorch_aliases_case_insensitive", "[generators]") {
  // Registry: names and PyTorch aliases, case-insensitive, unknown names list the known ones
  const auto& reg = schedules::Registry::instance();
  CHECK(reg.find("gpipe")->name == "gpipe");
  CHECK(reg.find("GPipe")->name == "gpipe");
  CHECK(reg.find("1F1B")->name == "1f1b");
  CHECK(reg.find("interleaved1f1b")->name == "interleaved-1f1b");
  CHECK(reg.find("INTERLEAVED-1F1B")->name == "interleaved-1f1b");
  CHECK(reg.find("zero-bubble") == nullptr);
  try {
    gen("zero-bubble", 4, 8);
    FAIL("expected ParameterError");
  } catch (const schedules::ParameterError& e) {
    CHECK(e.key() == "kind");
    CHECK(std::string(e.what()).find("gpipe, interleaved-1f1b") != std::string::npos);
  }
  CHECK_THROWS_AS(gen("1f1b", 0, 8), schedules::ParameterError);
  CHECK_THROWS_AS(gen("1f1b", 4, 0), schedules::ParameterError);
  CHECK_THROWS_AS(gen("gpipe", 4, 8, 2), schedules::ParameterError);
}

TEST_CASE("generators.generator_registered_test_parameters_stage", "[generators]") {
  // Every generator, on each of its registered test parameters: each (stage, microbatch) has one F
  // and one backward (B, or I + W) on the stage's rank
  for (const auto& g : schedules::Registry::instance().all()) {
    REQUIRE_FALSE(g.test_params.empty());
    for (const auto& params : g.test_params) {
      const auto p = schedules::generate(g.name, params);
      INFO(g.name << " P=" << params.ranks() << " M=" << params.microbatches());
      const std::size_t cells = static_cast<std::size_t>(p.stages() * p.microbatches());
      std::vector<int> f(cells), b(cells), i(cells), w(cells);
      const schedules::Semantics sem(p);
      for (int r = 0; r < p.ranks(); ++r)
        for (const auto& op : p.ops(r))
          sem.for_each_part(r, op, [&](const schedules::Op& part) {
            CHECK(p.rank_of(part.stage) == r);
            const std::size_t c =
                static_cast<std::size_t>(part.stage * p.microbatches() + part.microbatch);
            ++(part.kind == OpKind::F   ? f
               : part.kind == OpKind::B ? b
               : part.kind == OpKind::I ? i
                                        : w)[c];
          });
      for (std::size_t c = 0; c < cells; ++c) {
        if (!p.routes().on_route(static_cast<int>(c) / p.microbatches(),
                                 static_cast<int>(c) % p.microbatches()))
          continue;
        CHECK(f[c] == 1);
        CHECK(((b[c] == 1 && i[c] == 0 && w[c] == 0) || (b[c] == 0 && i[c] == 1 && w[c] == 1)));
      }
    }
  }
}

TEST_CASE("generators.sizes_too_large_simulate_refused", "[generators]") {
  // Sizes too large to simulate are refused without overflowing the size check
  CHECK_THROWS_AS(gen("interleaved-1f1b", 1024, 1 << 29, 1 << 24), schedules::ParameterError);
  CHECK_THROWS_AS(gen("1f1b", 100000, 100000), schedules::ParameterError);
}
