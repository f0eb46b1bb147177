// Measured against predicted (real/comparison.hpp) on hand-made run records: verdict agreement,
// per-rank peaks, start-time errors (median, nearest-rank p95, max) and calibration from the
// measured durations (mean per op kind and stage, stalls left out).
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "ppsim/real/comparison.hpp"
#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/placement.hpp"
#include "ppsim/schedules/program.hpp"

namespace {

using namespace ppsim;
using record::Span;
using record::SpanKind;
using schedules::Op;
using schedules::OpKind;

// Two ranks of ten forwards each (the comparer reads only positions, not what the ops are).
std::shared_ptr<const schedules::Program> ten_ops_per_rank() {
  auto p = std::make_shared<schedules::Program>(
      10, schedules::make_placement(schedules::PlacementKind::loop, 2, 1));
  for (int r = 0; r < 2; ++r)
    for (int m = 0; m < 10; ++m) p->push(r, Op::compute(OpKind::F, r, m));
  return p;
}

// Op (r, pos) starts at 10 r + pos and lasts 1; metrics with the given peaks.
record::RunRecord base_record() {
  record::RunRecord a;
  a.program = ten_ops_per_rank();
  record::Trace t;
  t.ranks.resize(2);
  for (int r = 0; r < 2; ++r)
    for (int pos = 0; pos < 10; ++pos) {
      const double start = 10.0 * r + pos;
      t.spans.push_back({r, pos, SpanKind::compute, start, start + 1});
    }
  a.trace = t;
  record::RunMetrics m;
  m.makespan = 20;
  m.bubble_fraction = 0.5;
  for (int r = 0; r < 2; ++r) {
    record::RankMetrics rm;
    rm.rank = r;
    rm.peak_inflight = 2 - r;
    rm.peak_memory_bytes = 1000 * (r + 1);
    m.per_rank.push_back(rm);
  }
  a.metrics = m;
  return a;
}

record::Deadlock two_rank_cycle(int position_of_rank1) {
  record::Deadlock d;
  d.cycles.push_back({{0, 3, "0SEND_F0", 1, ""}, {1, position_of_rank1, "1SEND_B0", 0, ""}});
  d.cycles_total = 1;
  return d;
}

}  // namespace

TEST_CASE("comparison.identical_records_agree_zero_start", "[comparison]") {
  // identical records agree with zero start-time error
  const record::RunRecord a = base_record();
  const real::Comparison c = real::compare(a, a);
  CHECK(c.verdicts_agree);
  CHECK(c.predicted_verdict == "ok");
  CHECK(c.measured_verdict == "ok");
  CHECK(c.peaks_agree);
  CHECK(c.makespan_error == 0);
  CHECK(c.predicted_makespan == 20);
  CHECK(c.measured_bubble == 0.5);
  CHECK(c.ops_compared == 20);
  CHECK(c.start_error_median == 0);
  CHECK(c.start_error_p95 == 0);
  CHECK(c.start_error_max == 0);
  REQUIRE(c.ranks.size() == 2);
  CHECK(c.ranks[0].predicted_inflight == 2);
  CHECK(c.ranks[1].measured_memory == 2000);
}

TEST_CASE("comparison.errors_1_20_give_median", "[comparison]") {
  // shifted spans: errors 1..20 give median 10.5, p95 19 (nearest rank), max 20
  const record::RunRecord predicted = base_record();
  record::RunRecord measured = base_record();
  // Op k (k = 0..19 over both ranks) moves by k+1, early on rank 0 and late on rank 1: the error
  // is the absolute difference.
  for (auto& s : measured.trace->spans) {
    const double shift = 10.0 * s.rank + s.pos + 1;
    s.start += s.rank == 0 ? -shift : shift;
    s.end += s.rank == 0 ? -shift : shift;
  }
  measured.metrics->makespan = 21;  // +5%
  const real::Comparison c = real::compare(predicted, measured);
  CHECK(c.ops_compared == 20);
  CHECK(c.start_error_median == Approx(10.5));
  CHECK(c.start_error_p95 == Approx(19));  // ceil(0.95 * 20) = 19th smallest
  CHECK(c.start_error_max == Approx(20));
  CHECK(c.makespan_error == Approx(0.05));
  CHECK(c.verdicts_agree);
}

TEST_CASE("comparison.only_ops_span_both_traces", "[comparison]") {
  // only ops with a span in both traces are compared, an op's first span counts
  const record::RunRecord predicted = base_record();
  record::RunRecord measured = base_record();
  // The measured run stopped after 3 ops on rank 1; rank 0's op 0 has a later second span.
  auto& spans = measured.trace->spans;
  spans.erase(spans.begin() + 13, spans.end());
  spans.push_back({0, 0, SpanKind::blocked, 100, 101});
  for (auto& s : spans) s.start += 2;  // every compared op 2 late, the extra span 102
  const real::Comparison c = real::compare(predicted, measured);
  CHECK(c.ops_compared == 13);
  CHECK(c.start_error_median == Approx(2));
  CHECK(c.start_error_max == Approx(2));
}

TEST_CASE("comparison.records_without_traces_compare_figures", "[comparison]") {
  // records without traces compare figures but no start times
  record::RunRecord predicted = base_record();
  predicted.trace.reset();
  const real::Comparison c = real::compare(predicted, base_record());
  CHECK(c.ops_compared == 0);
  CHECK(c.start_error_max == 0);
  CHECK(c.verdicts_agree);
}

TEST_CASE("comparison.different_peak_rank_peak_disagreement", "[comparison]") {
  // a different peak on one rank is a peak disagreement
  const record::RunRecord predicted = base_record();
  record::RunRecord measured = base_record();
  measured.metrics->per_rank[1].peak_memory_bytes += 1;
  CHECK_FALSE(real::compare(predicted, measured).peaks_agree);
  measured = base_record();
  measured.metrics->per_rank[0].peak_inflight = 3;
  const real::Comparison c = real::compare(predicted, measured);
  CHECK_FALSE(c.peaks_agree);
  CHECK(c.ranks[0].predicted_inflight == 2);
  CHECK(c.ranks[0].measured_inflight == 3);
  CHECK(c.verdicts_agree);  // peaks are not the verdict
}

TEST_CASE("comparison.deadlocks_agree_only_when_cycles", "[comparison]") {
  // deadlocks agree only when cycles, unmatched and blocked ops are the same
  record::RunRecord predicted = base_record();
  predicted.deadlock = two_rank_cycle(5);
  record::RunRecord measured = base_record();
  measured.deadlock = two_rank_cycle(5);
  real::Comparison c = real::compare(predicted, measured);
  CHECK(c.predicted_verdict == "DEADLOCK (1 cycle)");
  CHECK(c.verdicts_agree);

  SECTION("another position in the cycle") {
    measured.deadlock = two_rank_cycle(6);
    CHECK_FALSE(real::compare(predicted, measured).verdicts_agree);
  }
  SECTION("another WAIT target") {
    measured.deadlock->cycles[0][1].waiting_for = "1RECV_F0";
    CHECK_FALSE(real::compare(predicted, measured).verdicts_agree);
  }
  SECTION("an extra blocked rank") {
    measured.deadlock->blocked.push_back({1, 2, "1RECV_F1", 0, ""});
    CHECK_FALSE(real::compare(predicted, measured).verdicts_agree);
  }
  SECTION("a hang (unmatched op) against a cycle") {
    record::Deadlock hang;
    hang.unmatched.push_back({1, 5, "1SEND_B0", 0, ""});
    measured.deadlock = hang;
    const real::Comparison d = real::compare(predicted, measured);
    CHECK(d.measured_verdict == "HANG (1 unmatched)");
    CHECK_FALSE(d.verdicts_agree);
  }
  SECTION("unmatched ops that differ") {
    record::Deadlock a, b;
    a.unmatched.push_back({1, 5, "1SEND_B0", 0, ""});
    b.unmatched.push_back({1, 5, "1SEND_B0", 2, ""});
    predicted.deadlock = a;
    measured.deadlock = b;
    CHECK_FALSE(real::compare(predicted, measured).verdicts_agree);
    measured.deadlock = a;
    CHECK(real::compare(predicted, measured).verdicts_agree);
  }
  SECTION("a run that finished against a predicted deadlock") {
    measured.deadlock.reset();
    CHECK_FALSE(real::compare(predicted, measured).verdicts_agree);
  }
}

TEST_CASE("comparison.mean_measured_duration_per_kind", "[comparison]") {
  // calibrated: mean measured duration per kind and stage, a duration over twice the median left
  // out as a stall, B = I + W when only the split was measured
  auto p = std::make_shared<schedules::Program>(
      4, schedules::make_placement(schedules::PlacementKind::loop, 2, 1));
  // Rank 0 holds stage 0, rank 1 stage 1.
  // F: 1, 3, 3.5 and a stall of 7 (median 3.25: over 6.5 is a stall) -> mean 2.5, not the
  // median 3 of the three (the op's measured busy time is what the replay keeps).
  p->push(0, Op::compute(OpKind::F, 0, 0));       // 0: 1
  p->push(0, Op::compute(OpKind::F, 0, 1));       // 1: 3
  p->push(0, Op::compute(OpKind::F, 0, 2));       // 2: 3.5
  p->push(0, Op::compute(OpKind::F, 0, 3));       // 3: 7, a stall
  p->push(0, Op::comm(OpKind::SEND_F, 0, 0, 0));  // 4: a post, not a compute span
  p->push(0, Op::compute(OpKind::B, 0, 0));       // 5: 4
  p->push(0, Op::compute(OpKind::B, 0, 1));       // 6: 8  -> B mean 6 (8 is not over 2 x 6)
  p->push(1, Op::compute(OpKind::I, 1, 0));       // 0: 1
  p->push(1, Op::compute(OpKind::I, 1, 1));       // 1: 3  -> I mean 2
  p->push(1, Op::compute(OpKind::W, 1, 0));       // 2: 0.9
  p->push(1, Op::compute(OpKind::W, 1, 1));       // 3: 0.3
  p->push(1, Op::compute(OpKind::W, 1, 2));       // 4: 0.6 -> W mean 0.6 (median 0.6)
  p->push(1, Op::compute(OpKind::W, 1, 3));       // 5: 0.2 -> W mean 0.5 (median 0.45)
  const Op parts[] = {Op::compute(OpKind::F, 1, 2), Op::compute(OpKind::B, 1, 1)};
  p->push_composite(1, OpKind::OVERLAP_F_B, parts);  // 6: 100, stage 1's overlapped_fb
  record::RunRecord measured;
  measured.program = p;
  record::Trace t;
  auto add = [&](int rank, int pos, SpanKind kind, double duration) {
    t.spans.push_back({rank, pos, kind, 10.0 * pos, 10.0 * pos + duration});
  };
  add(0, 0, SpanKind::compute, 1);
  add(0, 1, SpanKind::compute, 3);
  add(0, 2, SpanKind::compute, 3.5);
  add(0, 3, SpanKind::compute, 7);
  add(0, 4, SpanKind::post, 50);  // a span that is not compute is never a duration
  add(0, 5, SpanKind::compute, 4);
  add(0, 6, SpanKind::compute, 8);
  add(1, 0, SpanKind::compute, 1);
  add(1, 1, SpanKind::compute, 3);
  add(1, 2, SpanKind::compute, 0.9);
  add(1, 3, SpanKind::compute, 0.3);
  add(1, 4, SpanKind::compute, 0.6);
  add(1, 5, SpanKind::compute, 0.2);
  add(1, 6, SpanKind::compute, 100);
  measured.trace = t;

  model::Model model;
  model.costs = model::CostModel::uniform(2, {10, 11, 12, 23, true});
  model.network.latency = 0.25;
  model.network.bandwidth = 4;
  model.network.boundary_bytes = 2;
  const model::Model c = real::calibrated(model, measured);
  const auto& s0 = c.costs.stages[0];
  CHECK(s0.forward == Approx(2.5));
  CHECK(s0.backward == Approx(6));
  CHECK(s0.backward_input == 11);  // not measured: the model's
  CHECK(s0.backward_weight == 12);
  CHECK(s0.split);
  const auto& s1 = c.costs.stages[1];
  CHECK(s1.forward == 10);  // only inside a composite: not calibrated
  CHECK(s1.backward_input == Approx(2));
  CHECK(s1.backward_weight == Approx(0.5));
  CHECK(s1.backward == Approx(2.5));       // I + W
  CHECK(s1.overlapped_fb == Approx(100));  // the pair measured, by its forward's stage
  CHECK(s0.overlapped_fb < 0);             // none there: the model's (a fraction of F + B)
  CHECK(c.network.latency == 0.25);        // no transfer measured: the model's
  CHECK(c.network.bandwidth == 4);         // the rest of the model is kept

  SECTION("transfers: their median time less bytes / bandwidth is the latency") {
    for (const double d : {1.5, 0.75, 2.0, 0.8, 1.0}) {
      measured.trace->transfers.push_back({0, 3, 1, 0, 5.0, 5.0 + d, 2});
    }
    CHECK(real::calibrated(model, measured).network.latency == Approx(1.0 - 0.5));
    model.network.bandwidth = 0;  // unlimited: all of it is latency
    CHECK(real::calibrated(model, measured).network.latency == Approx(1.0));
    model.network.bandwidth = 0.5;  // faster than the model allows: all of it is the wire
    CHECK(real::calibrated(model, measured).network.latency == 0);
    CHECK(real::calibrated(model, measured).network.bandwidth == Approx(2.0 / 1.0));
    CHECK(real::calibrated(model, measured).costs.stages[0].forward == Approx(2.5));
  }
}

TEST_CASE("comparison.calibrated_without_trace_keeps_model", "[comparison]") {
  // calibrated without a trace keeps the model
  model::Model model;
  model.costs = model::CostModel::uniform(1, {3, 1, 1, 2, true});
  record::RunRecord measured;
  CHECK(real::calibrated(model, measured).costs.stages[0].forward == 3);
}

TEST_CASE("comparison.memory_peaks_follow_program_order", "[comparison]") {
  // memory peaks follow program order unless an async send frees its buffer when its transfer ends
  auto program = [](bool async_send_b, bool async_send_f) {
    auto p = std::make_shared<schedules::Program>(
        1, schedules::make_placement(schedules::PlacementKind::loop, 2, 1));
    p->push(0, Op::compute(OpKind::F, 0, 0));
    p->push(0, Op::comm(OpKind::SEND_F, 0, 0, async_send_f ? 0 : -1));
    p->push(1, Op::compute(OpKind::B, 1, 0));
    p->push(1, Op::comm(OpKind::SEND_B, 1, 0, async_send_b ? 0 : -1));
    return p;
  };
  auto record_of = [](std::shared_ptr<const schedules::Program> p) {
    record::RunRecord a;
    a.program = std::move(p);
    return a;
  };
  model::Model model;
  model.network.boundary_bytes = 100;
  CHECK(real::memory_follows_program_order(record_of(program(false, false)), model));
  CHECK(real::memory_follows_program_order(record_of(program(false, true)), model));
  CHECK_FALSE(real::memory_follows_program_order(record_of(program(true, false)), model));
  SECTION("an async forward send counts only when outputs are deallocated after it") {
    model.memory.deallocate_outputs = true;
    CHECK_FALSE(real::memory_follows_program_order(record_of(program(false, true)), model));
  }
  SECTION("eager sends complete when posted") {
    model.network.eager_limit = 100;
    CHECK(real::memory_follows_program_order(record_of(program(true, false)), model));
    model.network.eager_limit = 99;
    CHECK_FALSE(real::memory_follows_program_order(record_of(program(true, false)), model));
  }
  SECTION("a program with diagnostics") {
    record::RunRecord a = record_of(program(false, false));
    a.diagnostics.push_back({});
    CHECK_FALSE(real::memory_follows_program_order(a, model));
  }
}
