// Kineto traces of one run → the measured run record and the costs it measures.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "action_patterns.hpp"
#include "clock_alignment.hpp"
#include "ppsim/base/excerpt.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/profile/kineto.hpp"
#include "ppsim/real/comparison.hpp"
#include "ppsim/record/metrics.hpp"
#include "transfers.hpp"

namespace ppsim::profile {

using schedules::Op;
using schedules::OpKind;

namespace {

struct Key {
  OpKind kind;
  int stage, mb;
  auto operator<=>(const Key&) const = default;
};

struct Action {
  OpKind kind;
  int stage, mb;
  double start, end;  // microseconds, the rank's clock
  bool device;
  std::size_t index;
  bool launched = false;  // timed by the kernels it launched
  // An OVERLAP_F_B: the backward it runs with its forward (kind, stage, mb above).
  std::optional<Key> backward;
};

// The parts of an action: one, or an OVERLAP_F_B's forward and backward.
std::vector<Key> keys_of(const Action& a) {
  std::vector<Key> out = {{a.kind, a.stage, a.mb}};
  if (a.backward) out.push_back(*a.backward);
  return out;
}

std::optional<Key> parse_action(const std::string& name, const std::vector<ActionPattern>& patterns,
                                int rank) {
  std::vector<std::string_view> m;
  for (const auto& p : patterns) {
    if (!detail::match_groups(p, name, m)) continue;
    auto group_int = [&](int g, long long fallback) -> std::optional<long long> {
      if (g == 0) return fallback;
      const std::string_view s = m[static_cast<std::size_t>(g)];
      if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      return std::stoll(std::string(s));
    };
    OpKind kind = OpKind::F;
    if (p.kind) {
      kind = *p.kind;
    } else {
      const std::string_view k = m[static_cast<std::size_t>(p.kind_group)];
      if (k == "F")
        kind = OpKind::F;
      else if (k == "B")
        kind = OpKind::B;
      else if (k == "I")
        kind = OpKind::I;
      else if (k == "W")
        kind = OpKind::W;
      else
        continue;
    }
    const auto stage = group_int(p.stage_group, rank);
    const auto mb = group_int(p.microbatch_group, -1);
    if (!stage || !mb || *mb < 0) continue;
    return Key{kind, static_cast<int>(*stage), static_cast<int>(*mb)};
  }
  return std::nullopt;
}

// PyTorch's name of an overlapped pair, `PP:(0F7;7B3)OVERLAP_F_B`: its forward and its backward
// (B or I), each as the patterns read `PP:0F7`; nullopt when the name is not one.
std::optional<std::pair<Key, Key>> parse_overlap(const std::string& name,
                                                 const std::vector<ActionPattern>& patterns,
                                                 int rank) {
  constexpr std::string_view kHead = "PP:(", kTail = ")OVERLAP_F_B";
  if (!name.starts_with(kHead) || !name.ends_with(kTail)) return std::nullopt;
  const std::string inner = name.substr(kHead.size(), name.size() - kHead.size() - kTail.size());
  const auto semi = inner.find(';');
  if (semi == std::string::npos) return std::nullopt;
  const auto f = parse_action("PP:" + inner.substr(0, semi), patterns, rank);
  const auto b = parse_action("PP:" + inner.substr(semi + 1), patterns, rank);
  if (!f || !b || f->kind != OpKind::F || (b->kind != OpKind::B && b->kind != OpKind::I))
    return std::nullopt;
  return std::pair{*f, *b};
}

// The step a trace is cut to: the one asked for, else its last; none when it has no steps.
const RangeEvent* pick_step(const RankTrace& t, const ImportOptions& o) {
  const RangeEvent* best = nullptr;
  long long best_n = -1;
  for (const auto& s : t.steps) {
    const std::string digits = s.name.substr(13);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const long long n = std::stoll(digits);
    if (o.step && n == *o.step) return &s;
    if (!o.step && n > best_n) {
      best = &s;
      best_n = n;
    }
  }
  if (o.step) {
    std::string have;
    for (const auto& s : t.steps) have += (have.empty() ? "" : ", ") + s.name;
    throw ProfileError(
        fmt::format("{}: no ProfilerStep#{} (the trace has {})", t.file, *o.step,
                    have.empty() ? std::string("no profiler steps") : base::excerpt(have, 200)));
  }
  return best;
}

bool in_step(const RangeEvent* step, double ts) {
  return !step || (ts >= step->ts && ts < step->ts + step->dur);
}

// The actions of one trace within its step: each timed on the GPU side where the trace has it
// (the n-th device range of a name after the CPU range; else the kernels launched inside the
// CPU range), else on the CPU side.
std::vector<Action> actions_of(const RankTrace& t, const RangeEvent* step,
                               const std::vector<ActionPattern>& patterns, int rank,
                               const detail::Launched& launched) {
  std::vector<const RangeEvent*> cpu;
  std::map<std::string, std::vector<const RangeEvent*>> gpu;
  for (const auto& r : t.ranges) {
    if (r.device) {
      gpu[r.name].push_back(&r);
      continue;
    }
    if (!in_step(step, r.ts)) continue;
    cpu.push_back(&r);
  }
  for (auto& [name, list] : gpu)
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
  std::sort(cpu.begin(), cpu.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
  std::map<std::string, std::size_t> used;
  std::vector<Action> out;
  std::map<Key, std::size_t> seen;
  for (const RangeEvent* c : cpu) {
    std::optional<Key> key = parse_action(c->name, patterns, rank);
    std::optional<Key> backward;
    if (!key)
      if (const auto pair = parse_overlap(c->name, patterns, rank)) {
        key = pair->first;
        backward = pair->second;
      }
    if (!key) continue;
    Action a{key->kind, key->stage, key->mb, c->ts,       c->ts + c->dur,
             false,     c->index,   false,   std::nullopt};
    a.backward = backward;
    for (const Key& k : keys_of(a))
      if (auto [it, fresh] = seen.emplace(k, c->index); !fresh)
        throw ProfileError(
            fmt::format("{}: traceEvents[{}] ('{}'): the action appears twice in the step (also "
                        "traceEvents[{}]); give --step N",
                        t.file, c->index, base::excerpt(c->name, 60), it->second));
    auto g = gpu.find(c->name);
    if (g != gpu.end()) {
      auto& k = used[c->name];
      while (k < g->second.size() && g->second[k]->ts < c->ts) ++k;
      if (k < g->second.size()) {
        a.start = g->second[k]->ts;
        a.end = a.start + g->second[k]->dur;
        a.device = true;
        ++k;
      }
    }
    if (!a.device)
      if (const auto span = launched.span(c->ts, c->dur, c->tid)) {
        a.start = span->first;
        a.end = span->second;
        a.device = a.launched = true;
      }
    out.push_back(a);
  }
  return out;
}

std::string what_it_holds(const RankTrace& t) {
  std::string names;
  for (const auto& n : t.sample) names += (names.empty() ? "" : ", ") + n;
  return fmt::format("{} events{}{}", t.events,
                     t.steps.empty() ? "" : fmt::format(", {} profiler steps", t.steps.size()),
                     names.empty() ? "" : ", e.g. " + names);
}

// A trace's sends and receives within its step, timed by their kernels where they launched any.
std::vector<detail::TimedComm> comms_of(const RankTrace& t, const RangeEvent* step,
                                        const detail::Launched& launched) {
  std::vector<detail::TimedComm> out;
  for (const auto& c : t.comms) {
    if (!in_step(step, c.ts)) continue;
    detail::TimedComm x{c.send, c.peer, c.bytes, c.ts, c.ts + c.dur};
    if (const auto span = launched.span(c.ts, c.dur, c.tid)) {
      x.start = span->first;
      x.end = span->second;
      x.device = true;
    }
    out.push_back(x);
  }
  return out;
}

// The cross-rank pairs (forward s -> s+1, backward s+1 -> s; a transfer's receive cannot end
// before its send started), and the clocks aligned from them.
detail::Alignment align(const std::vector<std::vector<Action>>& acts, int S,
                        const std::vector<detail::TransferPair>& transfers) {
  std::map<Key, std::pair<int, const Action*>> by_key;
  for (std::size_t r = 0; r < acts.size(); ++r)
    for (const auto& x : acts[r])
      for (const Key& k : keys_of(x)) by_key[k] = {static_cast<int>(r), &x};
  auto find = [&](OpKind k, int s, int m) -> std::optional<std::pair<int, const Action*>> {
    auto it = by_key.find({k, s, m});
    if (it == by_key.end()) return std::nullopt;
    return it->second;
  };
  std::vector<detail::Dependency> deps;
  for (const auto& [key, ra] : by_key) {
    if (key.kind == OpKind::F && key.stage + 1 < S)
      if (auto next = find(OpKind::F, key.stage + 1, key.mb))
        deps.push_back({ra.first, next->first, ra.second->end, next->second->start});
    if ((key.kind == OpKind::I || key.kind == OpKind::B) && key.stage > 0)
      for (OpKind k : {OpKind::I, OpKind::B})
        if (auto prev = find(k, key.stage - 1, key.mb))
          deps.push_back({ra.first, prev->first, ra.second->end, prev->second->start});
  }
  // Where two ranks' transfers are timed by their kernels, they alone align the pair: they bound
  // the offset by the transfer itself, where the actions around it add their launch gaps (and a
  // noisy end may even cross its successor's start).
  std::set<std::pair<int, int>> timed;
  for (const auto& t : transfers)
    if (t.device) timed.insert(std::minmax(t.src, t.dst));
  std::erase_if(deps, [&](const auto& d) { return timed.count(std::minmax(d.a, d.b)) > 0; });
  for (const auto& t : transfers)
    if (t.device) deps.push_back({t.src, t.dst, t.send_start, t.recv_end});
  return detail::align_clocks(static_cast<int>(acts.size()), deps);
}

// The transfers on the aligned clocks, from when both sides ran to when the first ended, and
// comm.latency / comm.bandwidth fitted to them (microseconds).
ImportedTransfers time_transfers(const std::vector<detail::TransferPair>& pairs,
                                 std::size_t unpaired, const detail::Alignment& al, double per_unit,
                                 detail::LinkFit& fit) {
  ImportedTransfers out;
  out.pairs = pairs.size();
  out.unpaired = unpaired;
  std::vector<std::pair<std::int64_t, double>> samples;
  std::set<std::int64_t> sizes;
  // Kernel times where both sides have them (a CPU range of an asynchronous op says little).
  const bool device = std::any_of(pairs.begin(), pairs.end(), [](auto& p) { return p.device; });
  for (const auto& p : pairs) {
    if (device && !p.device) continue;
    const double a = al.offset[static_cast<std::size_t>(p.src)];
    const double b = al.offset[static_cast<std::size_t>(p.dst)];
    const double start = std::max(p.send_start + a, p.recv_start + b);
    const double end = std::min(p.send_end + a, p.recv_end + b);
    samples.push_back({p.bytes, std::max(0.0, end - start) / per_unit});
    if (p.bytes >= 0) sizes.insert(p.bytes);
  }
  out.sizes.assign(sizes.begin(), sizes.end());
  fit = detail::fit_link(samples);
  out.median = fit.median;
  return out;
}

// Each rank's actions in the order they ran (sorted here), on the aligned clock from the first
// action's start, in the time unit.
record::Trace measured_trace(std::vector<std::vector<Action>>& acts, const detail::Alignment& al,
                             double per_unit, const std::string& unit) {
  double origin = std::numeric_limits<double>::infinity();
  for (std::size_t r = 0; r < acts.size(); ++r)
    for (const auto& x : acts[r]) origin = std::min(origin, x.start + al.offset[r]);
  record::Trace trace;
  trace.time_unit = unit;
  trace.origin = "measured";
  trace.clock = "profiler";
  trace.ranks.resize(acts.size());
  for (std::size_t r = 0; r < acts.size(); ++r) {
    auto& a = acts[r];
    std::stable_sort(a.begin(), a.end(),
                     [](const Action& x, const Action& y) { return x.start < y.start; });
    auto& tl = trace.ranks[r];
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double start = (a[i].start + al.offset[r] - origin) / per_unit;
      const double end = (a[i].end + al.offset[r] - origin) / per_unit;
      trace.spans.push_back(
          {static_cast<int>(r), static_cast<int>(i), record::SpanKind::compute, start, end});
      if (i == 0) tl.start = start;
      tl.end = std::max(tl.end, end);
    }
  }
  return trace;
}

// The program: each rank's actions in the order they ran; stages by index on their rank.
std::shared_ptr<schedules::Program> program_of(const std::vector<std::vector<Action>>& acts,
                                               const std::map<int, int>& stage_rank, int S, int M) {
  std::vector<schedules::StagePlace> placement(static_cast<std::size_t>(S));
  std::vector<int> chunks(acts.size(), 0);
  for (int s = 0; s < S; ++s) {
    const int r = stage_rank.at(s);
    placement[static_cast<std::size_t>(s)] = {r, chunks[static_cast<std::size_t>(r)]++};
  }
  auto program = std::make_shared<schedules::Program>(M, placement);
  for (std::size_t r = 0; r < acts.size(); ++r)
    for (const auto& x : acts[r]) {
      if (!x.backward) {
        program->push(static_cast<int>(r), Op::compute(x.kind, x.stage, x.mb));
        continue;
      }
      const Key& b = *x.backward;
      const Op parts[] = {Op::compute(x.kind, x.stage, x.mb), Op::compute(b.kind, b.stage, b.mb)};
      program->push_composite(static_cast<int>(r), OpKind::OVERLAP_F_B, parts);
    }
  return program;
}

// The traces in rank order: distributedInfo's ranks when the traces give them, else the order
// given. Traces of one run agree on world_size and give each rank from 0 to P-1 once; anything
// else is traces of different runs (a directory written twice) or a rank left out.
std::vector<std::size_t> rank_order(const std::vector<RankTrace>& traces) {
  const std::size_t P = traces.size();
  const RankTrace* sized = nullptr;  // the first trace that gives world_size
  const RankTrace* ranked = nullptr;
  const RankTrace* unranked = nullptr;
  for (const auto& t : traces) {
    if (t.world_size >= 0 && !sized) sized = &t;
    if (t.world_size >= 0 && t.world_size != sized->world_size)
      throw ProfileError(
          fmt::format("{}: distributedInfo.world_size {}, but {} has {}: traces of different runs",
                      t.file, t.world_size, sized->file, sized->world_size));
    (t.rank >= 0 ? ranked : unranked) = &t;
  }
  if (ranked && unranked)
    throw ProfileError(
        fmt::format("{}: no distributedInfo.rank, but {} has one: traces of different runs?",
                    unranked->file, ranked->file));
  std::vector<std::size_t> order(P);
  for (std::size_t i = 0; i < P; ++i) order[i] = i;
  if (!ranked) return order;
  std::map<int, const RankTrace*> by_rank;
  for (const auto& t : traces)
    if (auto [it, fresh] = by_rank.emplace(t.rank, &t); !fresh)
      throw ProfileError(fmt::format("{}: distributedInfo.rank {} is given by two traces (also {})",
                                     t.file, t.rank, it->second->file));
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return traces[a].rank < traces[b].rank; });
  return order;
}

// Every rank of the run has its trace: the ranks 0 to world_size - 1 (or P - 1) once each.
// (After each trace is known to hold actions: one trace that holds none says so first.)
void check_ranks(const std::vector<RankTrace>& traces) {
  const std::size_t P = traces.size();
  const RankTrace* sized = nullptr;
  for (const auto& t : traces)
    if (t.world_size >= 0 && !sized) sized = &t;
  const std::size_t W = sized ? static_cast<std::size_t>(sized->world_size) : P;
  if (traces.front().rank < 0) {
    if (W != P)
      throw ProfileError(fmt::format(
          "{}: distributedInfo.world_size is {}, but {} traces are given: give one per rank",
          sized->file, W, P));
    return;
  }
  std::vector<bool> seen(W, false);
  for (const auto& t : traces) {
    const auto r = static_cast<std::size_t>(t.rank);
    if (r >= W)
      throw ProfileError(fmt::format(
          "{}: distributedInfo.rank {}, but {}: traces of different runs?", t.file, t.rank,
          sized ? fmt::format("{} has world_size {}", sized->file, W)
                : fmt::format("{} traces are given (ranks 0 to {})", P, P - 1)));
    seen[r] = true;
  }
  for (std::size_t r = 0; r < W; ++r)
    if (!seen[r])
      throw ProfileError(
          fmt::format("{}: distributedInfo.world_size is {}, but rank {} has no trace ({} given): "
                      "give one per rank",
                      (sized ? sized : &traces.front())->file, W, r, P));
}

}  // namespace

Imported import_traces(const std::vector<RankTrace>& traces, const ImportOptions& options,
                       const std::vector<ActionPattern>& patterns) {
  if (traces.empty()) throw ProfileError("no traces given");
  const std::vector<std::size_t> order = rank_order(traces);
  const int P = static_cast<int>(traces.size());
  std::vector<std::vector<Action>> acts(static_cast<std::size_t>(P));
  std::vector<std::vector<detail::TimedComm>> comms(static_cast<std::size_t>(P));
  Imported out;
  std::map<int, int> stage_rank;
  int S = 0, M = 0;
  for (int r = 0; r < P; ++r) {
    const RankTrace& t = traces[order[static_cast<std::size_t>(r)]];
    const RangeEvent* step = pick_step(t, options);
    auto& a = acts[static_cast<std::size_t>(r)];
    const detail::Launched launched(t);
    a = actions_of(t, step, patterns, r, launched);
    comms[static_cast<std::size_t>(r)] = comms_of(t, step, launched);
    if (a.empty())
      throw ProfileError(fmt::format(
          "{}: no pipeline actions{}: found {}; PyTorch pipelining names them `PP:<stage><F|B|I|W>"
          "<microbatch>` (record_function); other frameworks' names need --map FILE",
          t.file, step ? " in " + step->name : std::string(), what_it_holds(t)));
    ImportedRank ir;
    ir.file = t.file;
    ir.rank = r;
    ir.step = step ? std::stoi(step->name.substr(13)) : -1;
    for (const auto& x : a) {
      ir.device += x.device;
      ir.launched += x.launched;
      for (const Key& k : keys_of(x)) {
        if (k.stage < 0 || k.stage > 1'000'000 || k.mb > 100'000'000)
          throw ProfileError(fmt::format("{}: traceEvents[{}]: stage or microbatch out of range",
                                         t.file, x.index));
        auto [it, fresh] = stage_rank.emplace(k.stage, r);
        if (!fresh && it->second != r)
          throw ProfileError(fmt::format("{}: traceEvents[{}]: stage {} also runs on rank {} ({})",
                                         t.file, x.index, k.stage, it->second,
                                         traces[order[static_cast<std::size_t>(it->second)]].file));
        S = std::max(S, k.stage + 1);
        M = std::max(M, k.mb + 1);
      }
    }
    out.ranks.push_back(ir);
  }
  check_ranks(traces);
  for (int s = 0; s < S; ++s)
    if (!stage_rank.count(s))
      throw ProfileError(
          fmt::format("{}: stage {} has no actions in any trace (a rank's trace missing?)",
                      traces.front().file, s));
  // Every stage runs every microbatch's F once, and its backward once, whole (B) or split (I,
  // then W), as DualPipeV mixes them; else the run is not a whole step.
  std::map<std::pair<OpKind, int>, std::set<int>> mbs;
  for (const auto& a : acts)
    for (const auto& x : a)
      for (const Key& k : keys_of(x)) mbs[{k.kind, k.stage}].insert(k.mb);
  for (int s = 0; s < S; ++s) {
    const auto& f = mbs[{OpKind::F, s}];
    const auto& b = mbs[{OpKind::B, s}];
    const auto& i = mbs[{OpKind::I, s}];
    const auto& w = mbs[{OpKind::W, s}];
    std::set<int> backward = b;
    backward.insert(i.begin(), i.end());
    const auto fail = [&](std::size_t have, const char* what) {
      throw ProfileError(fmt::format(
          "{}: stage {} runs {} of {} microbatches' {}: the step is not a whole iteration",
          traces[order[static_cast<std::size_t>(stage_rank[s])]].file, s, have, M, what));
    };
    if (static_cast<int>(f.size()) != M) fail(f.size(), "F actions");
    if (static_cast<int>(backward.size()) != M || backward.size() != b.size() + i.size())
      fail(backward.size(), "backwards (one B, or one I and its W, each)");
    if (w != i) fail(w.size(), "W actions (one after each I)");
  }

  std::size_t unpaired = 0;
  const auto pairs = detail::pair_transfers(comms, unpaired);
  const detail::Alignment al = align(acts, S, pairs);
  const double per_unit = config::microseconds_per_unit(options.time_unit);
  detail::LinkFit fit;
  out.transfers = time_transfers(pairs, unpaired, al, per_unit, fit);
  record::Trace trace = measured_trace(acts, al, per_unit, options.time_unit);
  for (int r = 0; r < P; ++r)
    out.ranks[static_cast<std::size_t>(r)].offset =
        al.offset[static_cast<std::size_t>(r)] / per_unit;
  auto program = program_of(acts, stage_rank, S, M);
  // The link: fitted to the transfers where the traces have them, else the actions' own bound.
  out.latency = pairs.empty() ? al.latency / per_unit : fit.latency;
  out.bandwidth = pairs.empty() ? 0.0 : fit.bandwidth;
  record::RunRecord& rec = out.measured;
  rec.info.name = "imported profile";
  rec.info.source = traces.front().file;
  rec.info.schedule = "custom";
  rec.info.comm_style = "custom";
  rec.info.matching = "fifo";
  rec.info.semantics = "nccl";
  rec.info.time_unit = options.time_unit;
  rec.info.origin = "measured";
  rec.program = program;
  rec.metrics = record::compute_metrics(trace, *program);
  rec.trace = std::move(trace);
  // Costs: the mean of each stage's durations per kind, stalls (over twice the median) left out.
  model::Model base;
  base.costs = model::CostModel::uniform(S, {});
  out.calibrated = real::calibrated(base, rec);
  // A stage that ran split backwards (I and W) as well as whole ones (B, as DualPipeV does)
  // keeps the split: the cost model holds B = I + W, and its I ops need I and W.
  std::set<int> split_stages;
  for (const auto& a : acts)
    for (const auto& x : a)
      for (const Key& k : keys_of(x))
        if (k.kind == OpKind::I) split_stages.insert(k.stage);
  for (const int st : split_stages) {
    auto& c = out.calibrated.costs.stages[static_cast<std::size_t>(st)];
    c.backward = c.backward_input + c.backward_weight;
  }
  out.calibrated.network.latency = out.latency;
  out.calibrated.network.bandwidth = out.bandwidth;
  out.launch_overhead = out.calibrated.costs.launch_overhead;
  return out;
}

nlohmann::json calibration_fragment(const model::Model& m, const schedules::Program* measured_on,
                                    const std::string& time_unit) {
  nlohmann::json stages = nlohmann::json::object();
  for (std::size_t i = 0; i < m.costs.stages.size(); ++i) {
    const model::StageCost& c = m.costs.stages[i];
    nlohmann::json s = {{"forward", c.forward}};
    // The split where it adds up to B (I and W measured, or the model's own), else B alone.
    if (c.split && std::abs(c.backward_input + c.backward_weight - c.backward) <=
                       1e-9 * std::max(1.0, c.backward)) {
      s["backward_input"] = c.backward_input;
      s["backward_weight"] = c.backward_weight;
    } else {
      s["backward"] = c.backward;
    }
    if (c.overlapped_fb >= 0) s["overlapped_fb"] = c.overlapped_fb;
    stages[std::to_string(i)] = std::move(s);
  }
  nlohmann::json out = {
      {"time_unit", time_unit},
      {"costs",
       {{"per_stage", std::move(stages)},
        {"launch_overhead", m.costs.launch_overhead},
        {"start_offset", m.costs.start_offset}}},
      {"comm", {{"latency", m.network.latency}, {"bandwidth", m.network.bandwidth}}}};
  if (measured_on) {
    std::vector<int> ranks;
    for (int s = 0; s < measured_on->stages(); ++s) ranks.push_back(measured_on->rank_of(s));
    out["layout"] = {{"stage_ranks", ranks}};
  }
  return out;
}

}  // namespace ppsim::profile
