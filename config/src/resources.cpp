#include "ppsim/config/resources.hpp"

#include "ppsim/base/enum_names.hpp"
#include "ppsim/base/human_bytes.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/op.hpp"
#include "ppsim/schedules/rank_blocks.hpp"

namespace ppsim::config {

// By Workload: program, run, trace.
constexpr std::array<std::string_view, 3> kWorkloadNames = {"export", "run", "run --trace"};
// Per estimated op: the peak RSS slopes measured by tests/measure_rss.sh (docs/LIMITS.md: 45,
// 52 and 151 B per estimated op), with about 1/3 more for allocator slack and other schedules.
constexpr std::array<double, 3> kBytesPerOp = {64, 80, 200};

std::string_view to_string(Workload w) {
  return base::enum_value(w, kWorkloadNames, std::string_view("run"));
}

double bytes_per_op(Workload w) {
  return base::enum_value(w, kBytesPerOp, 200.0);
}

std::uint64_t default_max_memory() {
  static const std::uint64_t value = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    std::uint64_t limit = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) *
                                                      static_cast<std::uint64_t>(page) / 2
                                                : std::uint64_t{4} << 30;
    // A container's limit is what the kernel enforces, whatever the host has.
    std::ifstream cgroup("/sys/fs/cgroup/memory.max");
    std::string text;
    if (cgroup >> text && !text.empty() && std::isdigit(static_cast<unsigned char>(text[0])))
      limit = std::min<std::uint64_t>(limit, std::stoull(text) / 2);
    rlimit as{};
    if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
      limit = std::min<std::uint64_t>(limit, as.rlim_cur);
    return std::min(limit, kDefaultMaxMemoryCap);
  }();
  return value;
}

namespace {

// An integer parameter as the config holds it (after overrides), else the declared default.
std::int64_t param_value(const Config& c, const schedules::ParamSpec& spec) {
  const nlohmann::json& raw = c.raw;
  if (raw.is_object() && raw.contains("schedule") && raw["schedule"].is_object()) {
    const auto& s = raw["schedule"];
    if (s.contains(spec.name) && s[spec.name].is_number_integer())
      return std::max<std::int64_t>(1, s[spec.name].get<std::int64_t>());
  }
  return std::max<std::int64_t>(1, spec.default_value);
}

// A written compute op gains at most a receive, a send and their WAITs per part from the lowering.
constexpr double kLoweredOpsPerWrittenOp = 5;

// Ops of a `custom` program: one per separator, one per line (WAIT lists count extra).
double custom_ops(const Config& c) {
  const nlohmann::json& raw = c.raw;
  if (!raw.is_object() || !raw.contains("schedule") || !raw["schedule"].is_object()) return 0;
  const auto& s = raw["schedule"];
  if (!s.contains("ops")) return 0;
  double n = 0;
  auto count = [&](const std::string& text) {
    n += 1 + static_cast<double>(std::count(text.begin(), text.end(), ','));
  };
  if (s["ops"].is_string()) {
    const auto& text = s["ops"].get_ref<const std::string&>();
    count(text);
    n += static_cast<double>(std::count(text.begin(), text.end(), '\n'));
  } else if (s["ops"].is_array()) {
    for (const auto& line : s["ops"])
      if (line.is_string()) count(line.get_ref<const std::string&>());
  }
  return n;
}

// Ranks of a `custom` program: its lines or array elements.
double custom_ranks(const Config& c) {
  const nlohmann::json& raw = c.raw;
  if (!raw.is_object() || !raw.contains("schedule") || !raw["schedule"].is_object()) return 0;
  const auto& s = raw["schedule"];
  if (!s.contains("ops")) return 0;
  if (s["ops"].is_array()) return static_cast<double>(s["ops"].size());
  if (!s["ops"].is_string()) return 0;
  const auto& text = s["ops"].get_ref<const std::string&>();
  return 1 + static_cast<double>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

OpEstimate estimate_ops(const Config& c) {
  OpEstimate out;
  const schedules::Generator* g = schedules::Registry::instance().find(c.kind);
  if (g == nullptr) {
    out.ops = custom_ops(c);
    out.ranks = custom_ranks(c);
    out.key = "schedule.ops";
    out.formula = fmt::format("{:.0f} ops written in schedule.ops", out.ops);
    if (c.comm_style() != "custom") {  // compute ops only: the lowering adds the communication
      out.formula += fmt::format(" x {:.0f} once lowered", kLoweredOpsPerWrittenOp);
      out.ops *= kLoweredOpsPerWrittenOp;
    }
    return out;
  }
  // The product of the size parameters; the largest one is the key to lower.
  double cells = 1, largest = 0;
  std::vector<std::string> factors;
  for (const char* name : {"ranks", "chunks", "microbatches"}) {
    const schedules::ParamSpec* spec = schedules::find_param(g->params, name);
    if (spec == nullptr) continue;
    const std::int64_t v = param_value(c, *spec);
    cells *= static_cast<double>(v);
    if (std::string_view(name) == "ranks") out.ranks = static_cast<double>(v);
    factors.push_back(fmt::format("schedule.{}={}", name, v));
    if (static_cast<double>(v) >= largest) {
      largest = static_cast<double>(v);
      out.key = fmt::format("schedule.{}", name);
    }
  }
  out.ops = cells * kOpsPerStageMicrobatch;
  out.formula = fmt::format("{} x {:.0f} = {:.4g} ops", fmt::join(factors, " x "),
                            kOpsPerStageMicrobatch, out.ops);
  return out;
}

double estimated_bytes(const OpEstimate& e, Workload w) {
  return kBaseBytes + e.ops * bytes_per_op(w) + e.ranks * kBytesPerRank;
}

void check_resources(const Config& c, const ResourceLimits& limits) {
  const OpEstimate e = estimate_ops(c);
  const std::string fix = e.key == "schedule.ops" ? "write fewer ops" : "lower " + e.key;
  if (e.ops > kMaxOps)
    throw ConfigError(c.source, e.key,
                      fmt::format("too large to index: the program would have up to {}, above "
                                  "the {:.0f} ops that 32-bit op and endpoint ids can number; {}",
                                  e.formula, kMaxOps, fix));
  if (limits.max_memory == 0) return;
  const double need = estimated_bytes(e, limits.workload);
  const double limit = static_cast<double>(limits.max_memory);
  if (need > limit)
    throw ConfigError(
        c.source, e.key,
        fmt::format("too large for memory: the {} needs about {} ({} at ~{:.0f} B/op, {:.0f} "
                    "ranks at ~{:.0f} B), above --max-memory {}; {} or raise --max-memory",
                    to_string(limits.workload), base::human_bytes(need, 1), e.formula,
                    bytes_per_op(limits.workload), e.ranks, kBytesPerRank,
                    base::human_bytes(limit, 1), fix));
}

unsigned jobs_within_memory(const std::vector<Config>& configs, const ResourceLimits& limits,
                            unsigned jobs) {
  jobs = std::max(1u, jobs);
  if (limits.max_memory == 0) return jobs;
  double largest = kBaseBytes;
  for (const Config& c : configs)
    largest = std::max(largest, estimated_bytes(estimate_ops(c), limits.workload));
  const double fit = std::floor(static_cast<double>(limits.max_memory) / largest);
  return static_cast<unsigned>(std::clamp(fit, 1.0, static_cast<double>(jobs)));
}

namespace {

// Sums of non-negative contributions by the key they come from.
class Blame {
 public:
  void add(const std::string& key, double v) {
    by_key_[key] += v;
    total_ += v;
  }
  double total() const { return total_; }
  const std::string& top() const {
    auto it = std::max_element(by_key_.begin(), by_key_.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
    return it->first;
  }
  std::string parts() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : by_key_)
      if (v > 0) out.push_back(fmt::format("{} {:.4g}", k, v));
    return fmt::format("{}", fmt::join(out, " + "));
  }

 private:
  std::map<std::string, double> by_key_;
  double total_ = 0;
};

// The key a stage's cost field came from.
std::string cost_key(const Config& c, int stage, const char* field) {
  auto given = [&](const CostSpec& s) {
    const std::string f = field;
    return f == "forward"          ? s.forward.has_value()
           : f == "backward"       ? s.backward.has_value()
           : f == "backward_input" ? s.backward_input.has_value()
           : f == "overlapped_fb"  ? s.overlapped_fb.has_value()
                                   : s.backward_weight.has_value();
  };
  if (auto it = c.stage_costs.find(stage); it != c.stage_costs.end() && given(it->second))
    return fmt::format("costs.per_stage.{}.{}", stage, field);
  return fmt::format("costs.{}", field);
}

// An I or W op needs its stage's split costs: refused here, naming the key that gave only a
// full backward, rather than by the simulator halfway through a run.
void check_split_cost(const Config& c, const schedules::Program& p, const Model& m, int r,
                      const schedules::Op& o) {
  if (o.kind != schedules::OpKind::I && o.kind != schedules::OpKind::W) return;
  if (m.costs.stages[static_cast<std::size_t>(o.stage)].split) return;
  const bool own =
      c.stage_costs.count(o.stage) != 0 && c.stage_costs.at(o.stage).backward.has_value();
  throw ConfigError(
      c.source, own ? fmt::format("costs.per_stage.{}.backward", o.stage) : "costs.backward",
      fmt::format("rank {} runs {}, which needs backward_input and backward_weight costs for "
                  "stage {}; only backward was given",
                  r, p.op_text(r, o), o.stage));
}

// The column of a compute kind in the per-stage counts below.
int compute_column(schedules::OpKind k) {
  return schedules::plain_compute_index(k);
}

// Compute ops per (stage, kind), overlapped pairs by their forward's stage, and sends.
struct Tally {
  std::vector<std::array<std::uint64_t, 4>> count;  // F, B, I, W
  std::vector<std::uint64_t> pairs;
  std::uint64_t sends = 0;
};

// Single byte counts: exact as doubles, so every figure derived from them is. Returns the largest
// stash a forward may leave.
std::int64_t check_byte_counts(const Config& c, const Model& m) {
  const std::pair<const char*, std::int64_t> counts[] = {
      {"comm.boundary_bytes", m.network.boundary_bytes},
      {"comm.eager_limit", m.network.eager_limit},
      {"memory.activation_bytes", m.memory.activation_bytes},
      {"memory.weight_stash_bytes", m.memory.weight_stash_bytes},
      {"memory.static_bytes", m.memory.static_bytes}};
  std::int64_t largest_stash = m.memory.largest_activation();
  for (const auto& st : m.memory.per_stage) {
    largest_stash = std::max(largest_stash, st.weight_stash_bytes);
    if (st.static_bytes > kMaxBytes || st.activation_bytes > kMaxBytes ||
        st.weight_stash_bytes > kMaxBytes)
      throw ConfigError(c.source, "model",
                        fmt::format("a stage's bytes exceed 2^53 = {}: the model is too large to "
                                    "count in bytes exactly",
                                    kMaxBytes));
  }
  for (const auto& [key, v] : counts)
    if (v < 0 || v > kMaxBytes)
      throw ConfigError(
          c.source, key,
          fmt::format("expected a whole number of bytes in [0, 2^53 = {}], got {}", kMaxBytes, v));
  return largest_stash;
}

// Rank r's ops into `tally`, its split costs checked, and the most it could hold at once (all it
// ever takes, none of it freed) held under 2^62 bytes.
void tally_rank(const Config& c, const schedules::Program& p, const Model& m, int r,
                std::int64_t largest_stash, Tally& tally) {
  using schedules::OpKind;
  const std::size_t S = m.costs.stages.size();
  // Counted in integers (exact, and a double's ++ made one long dependency chain over every op)
  // and in locals (through `tally` every ++ was a store), turned into doubles where used.
  std::uint64_t f_parts = 0, comm = 0, sends = 0;
  auto compute = [&](const schedules::Op& op) {
    if (op.kind == OpKind::F) ++f_parts;
    const int k = compute_column(op.kind);
    if (op.stage >= 0 && static_cast<std::size_t>(op.stage) < S && k >= 0) {
      check_split_cost(c, p, m, r, op);
      ++tally.count[static_cast<std::size_t>(op.stage)][static_cast<std::size_t>(k)];
    }
  };
  for (const schedules::Op& op : p.ops(r)) {
    if (schedules::is_composite(op.kind)) {
      for (const schedules::Op& part : p.parts(r, op)) compute(part);
      if (const auto parts = p.parts(r, op);
          !parts.empty() && parts[0].stage >= 0 && static_cast<std::size_t>(parts[0].stage) < S)
        ++tally.pairs[static_cast<std::size_t>(parts[0].stage)];
    } else if (schedules::is_compute(op.kind)) {
      compute(op);
    } else if (schedules::is_comm(op.kind)) {
      ++comm;
      if (schedules::is_send(op.kind)) ++sends;
    }
  }
  tally.sends += sends;
  double statics = static_cast<double>(m.memory.static_bytes) * static_cast<double>(p.chunks_on(r));
  if (!m.memory.per_stage.empty()) {
    statics = 0;
    for (int s = 0; s < p.stages(); ++s)
      if (p.rank_of(s) == r) statics += static_cast<double>(m.memory.stage(s).static_bytes);
  }
  const double stashes = static_cast<double>(largest_stash) * static_cast<double>(f_parts),
               buffers = static_cast<double>(m.network.boundary_bytes) * static_cast<double>(comm);
  if (statics + stashes + buffers > static_cast<double>(kMaxByteSum)) {
    Blame peak;
    peak.add("memory.static_bytes", statics);
    peak.add("memory.activation_bytes", stashes);
    peak.add("comm.boundary_bytes", buffers);
    throw ConfigError(
        c.source, peak.top(),
        fmt::format("rank {}'s memory could reach {:.4g} bytes ({}), above the 2^62 bytes a "
                    "64-bit counter holds with margin; lower {}",
                    r, peak.total(), peak.parts(), peak.top()));
  }
}

// Every rank's tally. Ranks are counted in blocks on several threads (a pass over every op); the
// counts are integers, so their sum is the same in any order, and the lowest block's error is
// the first in rank order.
Tally tally_ranks(const Config& c, const schedules::Program& p, const Model& m,
                  std::int64_t largest_stash) {
  const std::size_t S = m.costs.stages.size();
  const std::vector<int> bounds = schedules::rank_blocks(p, 0);
  std::vector<Tally> tallies(bounds.size() - 1);
  for (Tally& t : tallies) {
    t.count.assign(S, {0, 0, 0, 0});
    t.pairs.assign(S, 0);
  }
  base::for_rank_blocks(bounds, [&](std::size_t b, int first, int end) {
    for (int r = first; r < end; ++r) tally_rank(c, p, m, r, largest_stash, tallies[b]);
  });
  Tally& all = tallies[0];
  for (std::size_t b = 1; b < tallies.size(); ++b) {
    for (std::size_t st = 0; st < S; ++st) {
      for (std::size_t k = 0; k < 4; ++k) all.count[st][k] += tallies[b].count[st][k];
      all.pairs[st] += tallies[b].pairs[st];
    }
    all.sends += tallies[b].sends;
  }
  return std::move(all);
}

}  // namespace

void check_numbers(const Config& c, const schedules::Program& p, const Model& m) {
  const std::int64_t largest_stash = check_byte_counts(c, m);
  const Tally all = tally_ranks(c, p, m, largest_stash);
  // An upper bound on the makespan: until the run ends some op or transfer is in progress, so
  // it is at most every compute op's duration plus every transfer's time, one after another.
  // Compute ops were counted per (stage, kind): keys are formatted per stage, not per op.
  Blame time;
  Blame total_bytes;
  const double xfer_bw = m.network.bandwidth > 0
                             ? static_cast<double>(m.network.boundary_bytes) / m.network.bandwidth
                             : 0.0;
  const std::size_t S = m.costs.stages.size();
  const auto& count = all.count;
  const auto& pairs = all.pairs;
  const std::uint64_t sends = all.sends;
  for (std::size_t st = 0; st < S; ++st) {
    const StageCost& sc = m.costs.stages[st];
    const int stage = static_cast<int>(st);
    std::array<double, 4> n;
    for (std::size_t k = 0; k < 4; ++k) n[k] = static_cast<double>(count[st][k]);
    if (n[0] > 0) time.add(cost_key(c, stage, "forward"), n[0] * sc.forward);
    if (n[1] > 0) {
      const bool split = sc.split && sc.backward_input > 0 && sc.backward_weight > 0;
      time.add(cost_key(c, stage,
                        !split                                    ? "backward"
                        : sc.backward_input >= sc.backward_weight ? "backward_input"
                                                                  : "backward_weight"),
               n[1] * sc.backward);
    }
    if (n[2] > 0) time.add(cost_key(c, stage, "backward_input"), n[2] * sc.backward_input);
    if (n[3] > 0) time.add(cost_key(c, stage, "backward_weight"), n[3] * sc.backward_weight);
    // A pair given a time may take longer than its parts, which are counted above.
    if (pairs[st] > 0 && sc.overlapped_fb >= 0)
      time.add(cost_key(c, stage, "overlapped_fb"),
               static_cast<double>(pairs[st]) * sc.overlapped_fb);
  }
  const auto transfers = static_cast<double>(sends);
  total_bytes.add("comm.boundary_bytes", static_cast<double>(m.network.boundary_bytes) * transfers);
  if (total_bytes.total() > static_cast<double>(kMaxByteSum))
    throw ConfigError(c.source, "comm.boundary_bytes",
                      fmt::format("{:.0f} transfers of {} bytes sum to {:.4g} bytes, above the "
                                  "2^62 bytes a 64-bit counter holds with margin; lower "
                                  "comm.boundary_bytes",
                                  transfers, m.network.boundary_bytes, total_bytes.total()));
  if (sends > 0) {
    time.add("comm.latency", transfers * m.network.latency);
    time.add("comm.bandwidth", transfers * xfer_bw);
  }
  if (!(time.total() <= kMaxTime))  // also catches inf and nan
    throw ConfigError(
        c.source, time.top(),
        fmt::format("the run could last up to {:.4g} {} ({}), above the bound of {:.0e} time "
                    "units that keeps times exact to 1/8 unit; lower {} or use a larger "
                    "time_unit",
                    time.total(), c.time_unit, time.parts(), kMaxTime, time.top()));
}

std::uint64_t parse_bytes(std::string_view text) {
  const std::string s(text);
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument(fmt::format("expected bytes such as 512M or 8G, got '{}'", s));
  }
  std::string suffix = s.substr(used);
  for (auto& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (suffix.size() > 1 && suffix.back() == 'B') suffix.pop_back();
  if (suffix.size() > 1 && suffix.back() == 'I') suffix.pop_back();
  double scale = 1;
  if (suffix.empty() || suffix == "B")
    scale = 1;
  else if (suffix == "K")
    scale = 1024.0;
  else if (suffix == "M")
    scale = 1024.0 * 1024;
  else if (suffix == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    throw std::invalid_argument(
        fmt::format("unknown unit in '{}': use B, K, M, G or T (powers of 1024)", s));
  const double bytes = v * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes >= 1.8e19)
    throw std::invalid_argument(fmt::format("expected bytes >= 0 (0 = no limit), got '{}'", s));
  // A positive value below one byte would round to 0, which switches the limit off.
  if (bytes > 0 && bytes < 1)
    throw std::invalid_argument(
        fmt::format("expected at least 1 byte (0 = no limit), got '{}'", s));
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace ppsim::config
