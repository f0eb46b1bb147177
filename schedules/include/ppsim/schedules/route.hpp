#pragma once
// Routes: the stages a microbatch passes through, in forward order. Most schedules have one route
// (0, 1, ..., S-1) for every microbatch; DualPipe runs two pipelines in opposite directions over
// the same ranks, so which stage comes next depends on the microbatch.
#include <cstdint>
#include <vector>

namespace ppsim::schedules {

class Routes {
 public:
  Routes() = default;
  // One route through stages 0..stages-1 for every microbatch.
  static Routes linear(int stages);
  // `paths[k]` is route k; `route_of_microbatch[m]` says which route microbatch m takes (empty:
  // every microbatch takes route 0). Throws ParameterError (key "routes") when a path names a stage
  // outside [0, stages) or twice, or a microbatch names a route that does not exist.
  Routes(int stages, std::vector<std::vector<std::int32_t>> paths,
         std::vector<std::int32_t> route_of_microbatch = {});

  int stages() const { return stages_; }
  int count() const { return static_cast<int>(paths_.size()); }
  bool is_linear() const { return linear_; }
  const std::vector<std::int32_t>& path(int route) const {
    return paths_[static_cast<std::size_t>(route)];
  }
  const std::vector<std::int32_t>& route_of_microbatch() const { return of_mb_; }
  int route_of(int microbatch) const {
    return of_mb_.empty() || microbatch < 0 || static_cast<std::size_t>(microbatch) >= of_mb_.size()
               ? 0
               : of_mb_[static_cast<std::size_t>(microbatch)];
  }

  // Neighbours of `stage` on the route of `microbatch`: kNone at either end of it, kOffRoute when
  // the stage is not on that route at all.
  static constexpr std::int32_t kNone = -1;
  static constexpr std::int32_t kOffRoute = -2;
  int next(int stage, int microbatch) const {
    if (stage < 0 || stage >= stages_) return kOffRoute;
    if (linear_) return stage + 1 < stages_ ? stage + 1 : kNone;
    return next_[cell(stage, microbatch)];
  }
  int prev(int stage, int microbatch) const {
    if (stage < 0 || stage >= stages_) return kOffRoute;
    if (linear_) return stage > 0 ? stage - 1 : kNone;
    return prev_[cell(stage, microbatch)];
  }
  bool on_route(int stage, int microbatch) const { return next(stage, microbatch) != kOffRoute; }

  friend bool operator==(const Routes& a, const Routes& b) {
    return a.stages_ == b.stages_ && a.paths_ == b.paths_ && a.of_mb_ == b.of_mb_;
  }

 private:
  std::size_t cell(int stage, int microbatch) const {
    return static_cast<std::size_t>(route_of(microbatch)) * static_cast<std::size_t>(stages_) +
           static_cast<std::size_t>(stage);
  }

  int stages_ = 0;
  bool linear_ = true;  // the common case answers without tables
  std::vector<std::vector<std::int32_t>> paths_;
  std::vector<std::int32_t> of_mb_;
  std::vector<std::int32_t> next_, prev_;  // route * stages + stage
};

}  // namespace ppsim::schedules
