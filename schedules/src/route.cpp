#include "ppsim/schedules/route.hpp"

#include <fmt/format.h>

#include "ppsim/schedules/error.hpp"

namespace ppsim::schedules {

Routes Routes::linear(int stages) {
  Routes r;
  r.stages_ = stages;
  std::vector<std::int32_t> path(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) path[static_cast<std::size_t>(s)] = s;
  r.paths_.push_back(std::move(path));
  return r;
}

Routes::Routes(int stages, std::vector<std::vector<std::int32_t>> paths,
               std::vector<std::int32_t> route_of_microbatch)
    : stages_(stages),
      linear_(false),
      paths_(std::move(paths)),
      of_mb_(std::move(route_of_microbatch)) {
  if (paths_.empty()) throw ParameterError("routes", "expected at least one route");
  const std::size_t S = static_cast<std::size_t>(stages);
  next_.assign(paths_.size() * S, kOffRoute);
  prev_.assign(paths_.size() * S, kOffRoute);
  for (std::size_t k = 0; k < paths_.size(); ++k) {
    const auto& path = paths_[k];
    if (path.empty()) throw ParameterError("routes", fmt::format("route {} is empty", k));
    for (std::size_t i = 0; i < path.size(); ++i) {
      const std::int32_t s = path[i];
      if (s < 0 || s >= stages)
        throw ParameterError("routes",
                             fmt::format("route {} names stage {}, outside [0, {})", k, s, stages));
      if (next_[k * S + static_cast<std::size_t>(s)] != kOffRoute)
        throw ParameterError("routes", fmt::format("route {} passes through stage {} twice", k, s));
      next_[k * S + static_cast<std::size_t>(s)] = i + 1 < path.size() ? path[i + 1] : kNone;
      prev_[k * S + static_cast<std::size_t>(s)] = i > 0 ? path[i - 1] : kNone;
    }
  }
  for (std::size_t m = 0; m < of_mb_.size(); ++m)
    if (of_mb_[m] < 0 || static_cast<std::size_t>(of_mb_[m]) >= paths_.size())
      throw ParameterError("routes", fmt::format("microbatch {} takes route {}, but there are {}",
                                                 m, of_mb_[m], paths_.size()));
  // One route that is 0..S-1 is the linear case: answer it without tables.
  if (paths_.size() == 1 && paths_[0] == linear(stages).paths_[0]) *this = linear(stages);
}

}  // namespace ppsim::schedules
