// Validation and the async lowering keep per-rank tables indexed by request id / (chunk,
// microbatch) when those are small, hash containers when they are not. Both paths must give the
// same answers: the same program with its request ids (or microbatch ids) moved far apart must
// validate (lower) exactly as the compact one, ids aside.
#include <catch2/catch.hpp>

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "ppsim/schedules/lowering.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/validation.hpp"

using ppsim::schedules::Diagnostic;
using ppsim::schedules::LoweringOptions;
using ppsim::schedules::Program;
using ppsim::schedules::validate;

namespace {

// Adds `offset` to every number that follows '#', '(' or ';' (request ids in op text).
std::string shift_ids(const std::string& text, long long offset) {
  static const std::regex id(R"(([#(;])(\d+))");
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), id);
  std::size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    out += text.substr(last, static_cast<std::size_t>(m.position()) - last);
    out += m[1].str() + std::to_string(std::stoll(m[2].str()) + offset);
    last = static_cast<std::size_t>(m.position() + m.length());
  }
  return out + text.substr(last);
}

}  // namespace

TEST_CASE("request_tables.sparse_request_ids_give_diagnostics", "[validation][request-tables]") {
  // validation: sparse request ids give the diagnostics of dense ones
  const std::string rank1 = "1RECV_F0,1F0,1B0,1SEND_B0";
  const std::vector<std::string> programs = {
      "0F0,0SEND_F0#0,WAIT(0),0RECV_B0#1,WAIT(1),0B0\n" + rank1,  // clean
      "0F0,0SEND_F0#1,0RECV_B0#1,WAIT(1),0B0\n" + rank1,          // duplicate_request
      "0F0,0SEND_F0#1,WAIT(1),0RECV_B0#1,WAIT(1),0B0\n" + rank1,  // reuse after wait
      "0F0,0SEND_F0#0,WAIT(0),WAIT(0),0RECV_B0,0B0\n" + rank1,    // double_wait
      "0F0,0SEND_F0#0,WAIT(0;0),0RECV_B0,0B0\n" + rank1,          // double_wait, one WAIT
      "0F0,0SEND_F0,WAIT(5),0RECV_B0,0B0\n" + rank1,              // unknown_request
      "0F0,WAIT(0),0SEND_F0#0,0RECV_B0,0B0\n" + rank1,            // WAIT before the post
      "0F0,0SEND_F0#5,0RECV_B0#4,0B0\n" + rank1,                  // never_waited, by id
      "0F0,0SEND_F0#0,WAIT(0),0RECV_B0,WAIT(9),0B0\n1RECV_F0#9,WAIT(9),1F0,1B0,1SEND_B0",
  };
  // Far past any dense table for these few ops (ids stay below the parser's 10^9); the order of
  // the ids is unchanged.
  const long long offset = 500000000;
  for (const std::string& text : programs) {
    INFO(text);
    const std::vector<Diagnostic> dense = validate(Program::parse(text));
    const std::vector<Diagnostic> sparse = validate(Program::parse(shift_ids(text, offset)));
    REQUIRE(dense.size() == sparse.size());
    for (std::size_t i = 0; i < dense.size(); ++i) {
      CHECK(dense[i].kind == sparse[i].kind);
      CHECK(dense[i].rank == sparse[i].rank);
      CHECK(dense[i].position == sparse[i].position);
      CHECK(dense[i].fatal == sparse[i].fatal);
      CHECK(shift_ids(dense[i].op, offset) == sparse[i].op);
    }
  }
}

TEST_CASE("request_tables.microbatch_ids_far_apart_lower", "[lowering][request-tables]") {
  // async lowering: microbatch ids far apart lower as compact ones
  // Two ranks, four microbatches in 1F1B order; the sparse copy numbers them 0, 10^7, 2*10^7,
  // 3*10^7 (its (chunk, microbatch) grid is far larger than its ops: the hash-map path).
  auto text = [](const std::vector<long long>& mb) {
    auto m = [&](int k) { return std::to_string(mb[static_cast<std::size_t>(k)]); };
    return "0F" + m(0) + ",0F" + m(1) + ",0B" + m(0) + ",0F" + m(2) + ",0B" + m(1) + ",0F" + m(3) +
           ",0B" + m(2) + ",0B" + m(3) + "\n" + "1F" + m(0) + ",1B" + m(0) + ",1F" + m(1) + ",1B" +
           m(1) + ",1F" + m(2) + ",1B" + m(2) + ",1F" + m(3) + ",1B" + m(3) + "\n";
  };
  const std::vector<long long> compact = {0, 1, 2, 3}, sparse = {0, 10000000, 20000000, 30000000};
  for (const std::int64_t prefetch : {0, 1, 3}) {
    INFO("prefetch " << prefetch);
    const LoweringOptions options{"async", {{"prefetch", prefetch}}};
    const std::string a = lower(Program::parse(text(compact)), options).to_text();
    std::string b = lower(Program::parse(text(sparse)), options).to_text();
    for (int k = 3; k >= 1; --k)  // rename the microbatches back (largest first: no prefix clash)
      b = std::regex_replace(b, std::regex(std::to_string(k) + "0000000"), std::to_string(k));
    CHECK(a == b);
    CHECK(validate(Program::parse(a)).empty());
  }
}
