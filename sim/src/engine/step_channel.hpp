#pragma once
// The step after the pipeline (model/step_phases.hpp), on a channel of each rank's own beside its
// compute and point-to-point streams: the engine reports each stage's gradient-producing ops as
// they end; at the end the buckets run in the order their gradients became ready, then the
// embedding's all-reduce and the optimizer. Nothing here delays a pipeline op.
#include <algorithm>
#include <vector>

#include "ppsim/model/step_phases.hpp"
#include "ppsim/record/step.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::sim::engine {

class StepChannel {
 public:
  StepChannel(const model::StepPhases& phases, int stages)
      : phases_(phases), last_(phases.enabled ? static_cast<std::size_t>(stages) : 0) {}

  bool enabled() const { return phases_.enabled; }

  // A W, or a whole B, of `stage` ran from `begin` to `end`.
  void gradient(int stage, double begin, double end) {
    if (stage < 0 || static_cast<std::size_t>(stage) >= last_.size()) return;
    Span& s = last_[static_cast<std::size_t>(stage)];
    if (end >= s.end) s = {begin, end};
  }

  // `ends[r]`: rank r's last pipeline op.
  record::StepTiming finish(const schedules::Program& p, const std::vector<double>& ends) const {
    const int R = p.ranks();
    record::StepTiming out;
    out.ranks.resize(static_cast<std::size_t>(R));
    struct Ready {
      double at, duration;
    };
    std::vector<std::vector<Ready>> ready(static_cast<std::size_t>(R));
    // (A model built by hand may give fewer bucket lists than stages: the others have none.)
    const int stages = std::min<int>(p.stages(), static_cast<int>(phases_.buckets.size()));
    for (int s = 0; s < stages && static_cast<std::size_t>(s) < last_.size(); ++s) {
      const int r = p.rank_of(s);
      const Span& last = last_[static_cast<std::size_t>(s)];
      for (const model::GradBucket& b : phases_.buckets[static_cast<std::size_t>(s)]) {
        const double at = phases_.overlap_grad_reduce
                              ? last.begin + b.ready * (last.end - last.begin)
                              : ends[static_cast<std::size_t>(r)];
        ready[static_cast<std::size_t>(r)].push_back({at, b.duration});
      }
    }
    for (int r = 0; r < R; ++r) {
      record::RankStep& rs = out.ranks[static_cast<std::size_t>(r)];
      rs.pipeline_end = ends[static_cast<std::size_t>(r)];
      auto& mine = ready[static_cast<std::size_t>(r)];
      std::stable_sort(mine.begin(), mine.end(),
                       [](const Ready& a, const Ready& b) { return a.at < b.at; });
      double free = 0;
      for (const Ready& b : mine) free = std::max(free, b.at) + b.duration;
      rs.reduced = std::max(rs.pipeline_end, free);
    }
    // The tied embedding: both ranks start it once both have reduced their own gradients.
    const int a = phases_.embedding_first, b = phases_.embedding_last;
    if (a >= 0 && b >= 0 && a < R && b < R && a != b) {
      auto& ra = out.ranks[static_cast<std::size_t>(a)];
      auto& rb = out.ranks[static_cast<std::size_t>(b)];
      const double done = std::max(ra.reduced, rb.reduced) + phases_.embedding_sync;
      ra.reduced = rb.reduced = done;
    }
    // The optimizer starts on every rank once the last has reduced (its all-reduces of the
    // gradient norm and the overflow flag span the model).
    double sync = 0;
    for (int r = 0; r < R; ++r)
      if (out.ranks[static_cast<std::size_t>(r)].reduced > sync) {
        sync = out.ranks[static_cast<std::size_t>(r)].reduced;
        out.critical_rank = r;
      }
    for (int r = 0; r < R; ++r) {
      record::RankStep& rs = out.ranks[static_cast<std::size_t>(r)];
      rs.optimizer_start = sync;
      rs.end = sync + at(phases_.optimizer, r) + at(phases_.param_gather, r);
      out.time = std::max(out.time, rs.end);
    }
    return out;
  }

 private:
  struct Span {
    double begin = 0, end = 0;
  };
  static double at(const std::vector<double>& v, int r) {
    return static_cast<std::size_t>(r) < v.size() ? v[static_cast<std::size_t>(r)] : 0.0;
  }
  const model::StepPhases& phases_;
  std::vector<Span> last_;
};

}  // namespace ppsim::sim::engine
