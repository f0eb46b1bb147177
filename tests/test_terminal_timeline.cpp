// Terminal timeline (viz/terminal_timeline.hpp): one line per rank of exactly the requested width,
// columns proportional to time (GPipe with free communication: rank r idles r forward slots before
// its first F), busy columns matching 1 - bubble_fraction, ANSI colours only when asked, and the
// stuck ranks of a deadlock marked.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ppsim/config/prepare.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/terminal_timeline.hpp"

namespace {

using namespace ppsim;
using nlohmann::json;

record::RunRecord simulate(const std::string& kind, int P, int M, const std::string& style,
                           bool free_comm) {
  json comm = {{"style", style}, {"boundary_bytes", 4096}};
  if (!free_comm) comm["latency"] = 0.05;
  if (style == "blocking") comm["eager_limit"] = 0;
  json j = {{"name", "term"},
            {"schedule", {{"kind", kind}, {"ranks", P}, {"microbatches", M}}},
            {"costs", {{"forward", 1.0}, {"backward", 2.0}}},
            {"comm", comm}};
  return sim::analyze(config::parse_config(j, "term-test.json"), {.trace = true});
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The bar of rank r: the characters between the two '|'.
std::string bar(const std::vector<std::string>& lines, int r) {
  const std::string& line = lines.at(static_cast<std::size_t>(r) + 1);
  const auto a = line.find('|'), b = line.rfind('|');
  return line.substr(a + 1, b - a - 1);
}

}  // namespace

TEST_CASE("terminal_timeline.line_per_rank_exactly_width", "[terminal]") {
  // terminal timeline: one line per rank, exactly the width asked for
  const auto rec = simulate("1f1b", 4, 8, "async", false);
  for (const int width : {40, 100, 173}) {
    const std::string text = viz::terminal_timeline(rec, {.width = width, .color = false});
    CHECK(text.find('\x1b') == std::string::npos);  // plain
    const auto lines = lines_of(text);
    REQUIRE(lines.size() >= 1 + 4 + 2);
    CHECK(lines[0].find("term") != std::string::npos);
    CHECK(lines[0].find("simulated") != std::string::npos);
    for (int r = 0; r < 4; ++r) {
      CHECK(lines[static_cast<std::size_t>(r) + 1].starts_with("rank " + std::to_string(r)));
      CHECK(lines[static_cast<std::size_t>(r) + 1].size() == static_cast<std::size_t>(width));
    }
  }
}

TEST_CASE("terminal_timeline.gpipe_free_comm_rank_r", "[terminal]") {
  // terminal timeline: GPipe, free comm: rank r starts after r forwards, busy = 1 - bubble
  // Makespan (M + P - 1) (f + b) = 11 * 3 = 33; rank r's first F starts at t = r.
  const int P = 4, M = 8;
  const auto rec = simulate("gpipe", P, M, "async", true);
  REQUIRE(rec.metrics);
  CHECK(rec.metrics->makespan == Approx(33));
  // "rank 3 |" + 132 columns + "|"
  const auto lines = lines_of(viz::terminal_timeline(rec, {.width = 141, .color = false}));
  const double cols = static_cast<double>(bar(lines, 0).size());
  REQUIRE(cols == 132);
  const double per_unit = cols / 33;  // 4 columns per time unit
  std::size_t busy = 0;
  for (int r = 0; r < P; ++r) {
    const std::string b = bar(lines, r);
    const auto first_f = b.find('F');
    CHECK(static_cast<double>(first_f) == Approx(r * per_unit).margin(1));
    // F columns: M forwards of 1 unit; B columns: M backwards of 2 units.
    const auto fs = static_cast<double>(std::count(b.begin(), b.end(), 'F'));
    const auto bs = static_cast<double>(std::count(b.begin(), b.end(), 'B'));
    CHECK(fs == Approx(M * 1 * per_unit).margin(2));
    CHECK(bs == Approx(M * 2 * per_unit).margin(2));
    busy += static_cast<std::size_t>(fs + bs);
  }
  // Bubble fraction (P-1)/(M+P-1) = 3/11 of the P x columns grid is idle.
  CHECK(static_cast<double>(busy) == Approx((1 - 3.0 / 11) * P * cols).margin(2 * P));
  CHECK(rec.metrics->bubble_fraction == Approx(3.0 / 11));
}

TEST_CASE("terminal_timeline.ansi_colours_only_when_asked", "[terminal]") {
  // terminal timeline: ANSI colours only when asked
  const auto rec = simulate("1f1b", 2, 4, "async", false);
  const std::string coloured = viz::terminal_timeline(rec, {.width = 80, .color = true});
  CHECK(coloured.find("\x1b[44;97mF") != std::string::npos);  // F on blue
  CHECK(coloured.find("\x1b[42;97mB") != std::string::npos);  // B on green
  // Each bar ends with the attributes reset: its last escape is "\x1b[0m".
  for (const auto& line : lines_of(coloured))
    if (line.starts_with("rank")) CHECK(line.substr(line.rfind('\x1b')).starts_with("\x1b[0m"));
  // Without escapes the text is the plain timeline.
  std::string stripped;
  for (std::size_t i = 0; i < coloured.size(); ++i) {
    if (coloured[i] == '\x1b') {
      i = coloured.find('m', i);
      continue;
    }
    stripped += coloured[i];
  }
  CHECK(stripped == viz::terminal_timeline(rec, {.width = 80, .color = false}));
}

TEST_CASE("terminal_timeline.deadlock_marks_where_rank_blocked", "[terminal]") {
  // terminal timeline: a deadlock marks where each rank blocked for good
  const auto rec = simulate("1f1b", 4, 8, "blocking", false);
  REQUIRE(rec.deadlock);
  const auto lines = lines_of(viz::terminal_timeline(rec, {.width = 100}));
  for (int r = 0; r < 4; ++r) {
    const bool finished = rec.trace->ranks[static_cast<std::size_t>(r)].finished;
    const std::string b = bar(lines, r);
    CHECK((b.back() == '!') == !finished);
    // Once stuck, always stuck: no op after the first '!'.
    const auto first = b.find('!');
    if (first != std::string::npos) CHECK(b.find_first_not_of('!', first) == std::string::npos);
  }
  const std::string text = viz::terminal_timeline(rec, {.width = 100});
  CHECK(text.find(rec.deadlock->describe()) != std::string::npos);
  CHECK(lines[0].find("DEADLOCK") != std::string::npos);
}

TEST_CASE("terminal_timeline.measured_run_labelled_trace_error", "[terminal]") {
  // terminal timeline: a measured run is labelled, no trace is an error
  auto rec = simulate("gpipe", 2, 2, "async", false);
  rec.trace->origin = "measured";
  CHECK(lines_of(viz::terminal_timeline(rec))[0].find("measured") != std::string::npos);
  rec.trace.reset();
  CHECK_THROWS_AS(viz::terminal_timeline(rec), std::invalid_argument);
}

TEST_CASE("terminal_timeline.header_names_point_point_model", "[terminal]") {
  // terminal timeline: the header names the point-to-point model when it is NCCL's
  json j = {{"name", "term-nccl"},
            {"schedule", {{"kind", "1f1b"}, {"ranks", 2}, {"microbatches", 2}}},
            {"costs", {{"forward", 1.0}, {"backward", 2.0}}},
            {"comm", {{"style", "batched"}, {"semantics", "nccl"}}}};
  const auto nccl = sim::analyze(config::parse_config(j, "term-nccl.json"), {.trace = true});
  CHECK(lines_of(viz::terminal_timeline(nccl, {.width = 80, .color = false}))
            .at(0)
            .starts_with("term-nccl \u2014 1f1b (batched, nccl) \u00b7 simulated"));
  const auto mpi = simulate("1f1b", 2, 2, "batched", true);
  CHECK(lines_of(viz::terminal_timeline(mpi, {.width = 80, .color = false}))
            .at(0)
            .starts_with("term \u2014 1f1b (batched) \u00b7 simulated"));
}
