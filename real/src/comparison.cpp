#include "ppsim/real/comparison.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <vector>

#include "ppsim/schedules/op.hpp"

namespace ppsim::real {

namespace {

bool same(const record::BlockedOp& a, const record::BlockedOp& b) {
  return a.rank == b.rank && a.position == b.position && a.op == b.op && a.peer == b.peer &&
         a.waiting_for == b.waiting_for;
}

bool same(const std::vector<record::BlockedOp>& a, const std::vector<record::BlockedOp>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](const auto& x, const auto& y) { return same(x, y); });
}

bool same(const record::Deadlock& a, const record::Deadlock& b) {
  if (a.cycles.size() != b.cycles.size() || a.cycle_count() != b.cycle_count()) return false;
  for (std::size_t i = 0; i < a.cycles.size(); ++i)
    if (!same(a.cycles[i], b.cycles[i])) return false;
  return same(a.unmatched, b.unmatched) && same(a.blocked, b.blocked);
}

// The middle value (the mean of the two middle ones for an even count); 0 for none.
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const std::size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

// A stage's measured cost: the mean of its durations, so that the replay keeps each stage's busy
// time as measured (ranks that share a GPU share its memory: on an H100 an op ran up to 19% faster
// while fewer ranks computed, which a median leaves out), less stalls: a duration over twice the
// median is not what the op costs.
double busy_mean(const std::vector<double>& v) {
  const double cap = 2 * median(v);
  double sum = 0;
  std::size_t n = 0;
  for (const double d : v)
    if (d <= cap) {
      sum += d;
      ++n;
    }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

// Start of each (rank, pos) that has a span: the first span of the op (its post, block or
// compute). NaN where the op has none.
std::vector<std::vector<double>> starts_of(const record::Trace& trace, int ranks) {
  std::vector<std::vector<double>> out(static_cast<std::size_t>(std::max(ranks, 0)));
  for (const auto& s : trace.spans) {
    if (s.rank < 0 || s.rank >= ranks || s.pos < 0) continue;
    auto& row = out[static_cast<std::size_t>(s.rank)];
    if (static_cast<std::size_t>(s.pos) >= row.size())
      row.resize(static_cast<std::size_t>(s.pos) + 1, std::numeric_limits<double>::quiet_NaN());
    double& slot = row[static_cast<std::size_t>(s.pos)];
    if (std::isnan(slot)) slot = s.start;
  }
  return out;
}

// Every gap between a rank's consecutive spans (and before its first), in issue order: time it
// had no op in progress. A blocked span covers a wait, so a gap is the host's own delay.
std::vector<double> gaps_of(const record::Trace& trace, int ranks) {
  std::vector<double> out;
  std::vector<double> last(static_cast<std::size_t>(std::max(ranks, 0)), 0.0);
  for (const auto& s : trace.spans) {
    if (s.rank < 0 || s.rank >= ranks) continue;
    double& prev = last[static_cast<std::size_t>(s.rank)];
    out.push_back(std::max(0.0, s.start - prev));
    prev = std::max(prev, s.end);
  }
  return out;
}

// Composites and non-compute ops are not calibrated (-1).
int kind_column(schedules::OpKind k) {
  return schedules::plain_compute_index(k);
}

}  // namespace

Comparison compare(const record::RunRecord& predicted, const record::RunRecord& measured) {
  Comparison c;
  const record::Verdict pv = predicted.verdict(), mv = measured.verdict();
  c.predicted_verdict = pv.text();
  c.measured_verdict = mv.text();
  c.verdicts_agree = pv.kind == mv.kind;
  if (c.verdicts_agree &&
      (pv.kind == record::VerdictKind::deadlock || pv.kind == record::VerdictKind::hang))
    c.verdicts_agree =
        predicted.deadlock && measured.deadlock && same(*predicted.deadlock, *measured.deadlock);

  if (predicted.metrics) {
    c.predicted_makespan = predicted.metrics->makespan;
    c.predicted_bubble = predicted.metrics->bubble_fraction;
  }
  if (measured.metrics) {
    c.measured_makespan = measured.metrics->makespan;
    c.measured_bubble = measured.metrics->bubble_fraction;
  }
  if (c.predicted_makespan != 0)
    c.makespan_error = (c.measured_makespan - c.predicted_makespan) / c.predicted_makespan;

  // Peaks: both runs must have metrics for every rank, or neither does (nothing ran).
  c.peaks_agree = predicted.metrics.has_value() == measured.metrics.has_value();
  if (predicted.metrics && measured.metrics) {
    const auto& pr = predicted.metrics->per_rank;
    const auto& mr = measured.metrics->per_rank;
    c.peaks_agree = pr.size() == mr.size();
    for (std::size_t r = 0; r < std::max(pr.size(), mr.size()); ++r) {
      RankComparison rc;
      rc.rank = static_cast<int>(r);
      if (r < pr.size()) {
        rc.predicted_inflight = pr[r].peak_inflight;
        rc.predicted_memory = pr[r].peak_memory_bytes;
      }
      if (r < mr.size()) {
        rc.measured_inflight = mr[r].peak_inflight;
        rc.measured_memory = mr[r].peak_memory_bytes;
      }
      if (rc.predicted_inflight != rc.measured_inflight ||
          rc.predicted_memory != rc.measured_memory)
        c.peaks_agree = false;
      c.ranks.push_back(rc);
    }
  }

  if (predicted.trace && measured.trace) {
    const int ranks = predicted.program ? predicted.program->ranks()
                                        : static_cast<int>(predicted.trace->ranks.size());
    const auto ps = starts_of(*predicted.trace, ranks);
    const auto ms = starts_of(*measured.trace, ranks);
    std::vector<double> errors;
    for (std::size_t r = 0; r < ps.size(); ++r)
      for (std::size_t i = 0; i < std::min(ps[r].size(), ms[r].size()); ++i)
        if (!std::isnan(ps[r][i]) && !std::isnan(ms[r][i]))
          errors.push_back(std::abs(ms[r][i] - ps[r][i]));
    c.ops_compared = errors.size();
    if (!errors.empty()) {
      std::sort(errors.begin(), errors.end());
      c.start_error_median = median(errors);
      // Nearest rank: the smallest value with at least 95% of the errors at or below it.
      const auto rank95 =
          static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(errors.size())));
      c.start_error_p95 = errors[std::max<std::size_t>(rank95, 1) - 1];
      c.start_error_max = errors.back();
    }
    std::vector<double> measured_gaps = gaps_of(*measured.trace, ranks);
    const std::vector<double> predicted_gaps = gaps_of(*predicted.trace, ranks);
    double lag = 0;
    for (double g : measured_gaps) lag += g;
    for (double g : predicted_gaps) lag -= g;
    if (c.measured_makespan > 0 && ranks > 0)
      c.host_lag_fraction = std::max(0.0, lag) / (c.measured_makespan * ranks);
    // Each compute op's measured duration beyond its predicted one, by (rank, position).
    std::map<std::pair<int, int>, double> predicted_length;
    for (const auto& sp : predicted.trace->spans)
      if (sp.kind == record::SpanKind::compute)
        predicted_length[{sp.rank, sp.pos}] = sp.end - sp.start;
    double overrun = 0;
    for (const auto& sp : measured.trace->spans)
      if (sp.kind == record::SpanKind::compute)
        if (auto it = predicted_length.find({sp.rank, sp.pos}); it != predicted_length.end())
          overrun += std::max(0.0, (sp.end - sp.start) - it->second);
    if (c.measured_makespan > 0 && ranks > 0)
      c.compute_overrun_fraction = overrun / (c.measured_makespan * ranks);
    if (!measured_gaps.empty()) {
      std::sort(measured_gaps.begin(), measured_gaps.end());
      c.host_lag_median = median(measured_gaps);
    }
  }
  return c;
}

bool memory_follows_program_order(const record::RunRecord& predicted, const model::Model& model) {
  if (!predicted.diagnostics.empty() || !predicted.program) return false;
  const auto& p = *predicted.program;
  const auto& net = model.network;
  // (NCCL has no eager sends: comm.eager_limit means nothing under nccl.)
  const bool eager = net.semantics == model::P2pSemantics::mpi && net.eager_limit > 0 &&
                     net.boundary_bytes <= net.eager_limit;
  if (eager) return true;
  for (int r = 0; r < p.ranks(); ++r)
    for (const auto& op : p.ops(r))
      if (op.async && (op.kind == schedules::OpKind::SEND_B ||
                       (op.kind == schedules::OpKind::SEND_F && model.memory.deallocate_outputs)))
        return false;
  return true;
}

model::Model calibrated(const model::Model& model, const record::RunRecord& measured) {
  model::Model out = model;
  if (!measured.trace || !measured.program) return out;
  const auto& program = *measured.program;
  const std::size_t stages = out.costs.stages.size();
  // durations[stage][column]: F, B, I, W; and overlapped pairs by their forward's stage.
  std::vector<std::array<std::vector<double>, 4>> durations(stages);
  std::vector<std::vector<double>> pairs(stages);
  for (const auto& s : measured.trace->spans) {
    if (s.kind != record::SpanKind::compute || s.rank < 0 || s.rank >= program.ranks()) continue;
    const auto& ops = program.ops(s.rank);
    if (s.pos < 0 || static_cast<std::size_t>(s.pos) >= ops.size()) continue;
    const schedules::Op& op = ops[static_cast<std::size_t>(s.pos)];
    if (schedules::is_composite(op.kind)) {
      const auto parts = program.parts(s.rank, op);
      if (!parts.empty() && parts.front().stage >= 0 &&
          static_cast<std::size_t>(parts.front().stage) < stages)
        pairs[static_cast<std::size_t>(parts.front().stage)].push_back(s.end - s.start);
      continue;
    }
    const int col = kind_column(op.kind);
    if (col < 0 || op.stage < 0 || static_cast<std::size_t>(op.stage) >= stages) continue;
    durations[static_cast<std::size_t>(op.stage)][static_cast<std::size_t>(col)].push_back(s.end -
                                                                                           s.start);
  }
  for (std::size_t st = 0; st < stages; ++st) {
    auto& cost = out.costs.stages[st];
    const auto& d = durations[st];
    if (!d[0].empty()) cost.forward = busy_mean(d[0]);
    if (!d[2].empty()) cost.backward_input = busy_mean(d[2]);
    if (!d[3].empty()) cost.backward_weight = busy_mean(d[3]);
    if (!d[1].empty())
      cost.backward = busy_mean(d[1]);  // B measured: the split stays as the model had it
    else if (!d[2].empty() && !d[3].empty())
      cost.backward = cost.backward_input + cost.backward_weight;
    if (!pairs[st].empty()) cost.overlapped_fb = busy_mean(pairs[st]);  // a time: the fraction goes
  }
  out.costs.launch_overhead = launch_overhead(measured);
  out.costs.start_offset = start_offset(measured, out.costs.launch_overhead);
  // Transfers: the median measured time (from the copy's start to its completion being seen)
  // less the bandwidth term becomes the latency; every message has comm.boundary_bytes. Faster
  // than the model's bandwidth allows (a real network, not the modelled one), the whole median
  // is the bandwidth term: no latency, and the bandwidth that moves a message in that time.
  std::vector<double> transfers;
  for (const auto& t : measured.trace->transfers)
    if (t.end >= t.start) transfers.push_back(t.end - t.start);
  if (!transfers.empty()) {
    auto& net = out.network;
    const double wire =
        net.bandwidth > 0 ? static_cast<double>(net.boundary_bytes) / net.bandwidth : 0.0;
    const double m = median(transfers);
    if (m >= wire || m <= 0) {
      net.latency = std::max(0.0, m - wire);
    } else {
      net.latency = 0;
      net.bandwidth = static_cast<double>(net.boundary_bytes) / m;
    }
  }
  return out;
}

double launch_overhead(const record::RunRecord& measured) {
  if (!measured.trace || !measured.program) return 0;
  using schedules::OpKind;
  const auto& p = *measured.program;
  const auto M = static_cast<std::size_t>(p.microbatches()),
             S = static_cast<std::size_t>(p.stages());
  auto plain = [&](const schedules::Op& op) {
    return (op.kind == OpKind::F || op.kind == OpKind::B || op.kind == OpKind::I ||
            op.kind == OpKind::W) &&
           op.stage >= 0 && static_cast<std::size_t>(op.stage) < S && op.microbatch >= 0 &&
           static_cast<std::size_t>(op.microbatch) < M;
  };
  // Each rank's compute spans in start order, and when each (stage, microbatch)'s F and B or I
  // ended: the inputs of the next and the previous stage.
  std::vector<std::vector<std::pair<const record::Span*, const schedules::Op*>>> by_rank(
      static_cast<std::size_t>(p.ranks()));
  std::vector<double> end_f(S * M, -1), end_b(S * M, -1);
  for (const auto& s : measured.trace->spans) {
    if (s.kind != record::SpanKind::compute || s.rank < 0 || s.rank >= p.ranks()) continue;
    const auto& ops = p.ops(s.rank);
    if (s.pos < 0 || static_cast<std::size_t>(s.pos) >= ops.size()) continue;
    const schedules::Op& op = ops[static_cast<std::size_t>(s.pos)];
    by_rank[static_cast<std::size_t>(s.rank)].push_back({&s, &op});
    if (plain(op) && op.kind != OpKind::W)
      (op.kind == OpKind::F ? end_f : end_b)[static_cast<std::size_t>(op.stage) * M +
                                             static_cast<std::size_t>(op.microbatch)] = s.end;
  }
  std::vector<double> gaps;
  for (auto& spans : by_rank) {
    std::sort(spans.begin(), spans.end(),
              [](const auto& a, const auto& b) { return a.first->start < b.first->start; });
    for (std::size_t i = 1; i < spans.size(); ++i) {
      const auto& [span, op] = spans[i];
      if (!plain(*op)) continue;
      const std::size_t at =
          static_cast<std::size_t>(op->stage) * M + static_cast<std::size_t>(op->microbatch);
      double input = -1;  // when its input from another stage was there
      if (op->kind == OpKind::F && op->stage > 0) input = end_f[at - M];
      if ((op->kind == OpKind::I || op->kind == OpKind::B) &&
          static_cast<std::size_t>(op->stage) + 1 < S)
        input = end_b[at + M];
      const double prev = spans[i - 1].first->end;
      if (input >= 0 && input >= prev) continue;  // it may have waited for its input
      gaps.push_back(std::max(0.0, span->start - prev));
    }
  }
  return gaps.empty() ? 0.0 : median(std::move(gaps));
}

double start_offset(const record::RunRecord& measured, double launch_overhead) {
  if (!measured.trace || !measured.program || !measured.metrics) return 0;
  const auto& p = *measured.program;
  const int r = p.rank_of(0);
  if (r < 0 || static_cast<std::size_t>(r) >= measured.metrics->per_rank.size()) return 0;
  const record::Span* first = nullptr;
  for (const auto& s : measured.trace->spans)
    if (s.kind == record::SpanKind::compute && s.rank == r && (!first || s.start < first->start))
      first = &s;
  if (!first) return 0;
  const schedules::Op& op = p.ops(r)[static_cast<std::size_t>(first->pos)];
  if (op.kind != schedules::OpKind::F || op.stage != 0) return 0;  // it waited for something
  return std::max(0.0, first->start -
                           measured.metrics->per_rank[static_cast<std::size_t>(r)].start -
                           launch_overhead);
}

}  // namespace ppsim::real
