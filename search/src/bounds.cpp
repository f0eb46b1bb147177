#include "ppsim/search/bounds.hpp"

#include <algorithm>

namespace ppsim::search {

using schedules::OpKind;

double lower_bound(const Instance& in) {
  const int S = in.stages(), M = in.microbatches;
  if (S == 0 || M == 0) return 0;
  std::vector<double> busy(static_cast<std::size_t>(in.ranks), 0.0);
  std::vector<double> head(static_cast<std::size_t>(in.ranks), -1.0);
  double reach = 0, chain = 0;  // when microbatch 0 can reach stage s; one microbatch's path
  for (int s = 0; s < S; ++s) {
    const auto r = static_cast<std::size_t>(in.rank_of(s));
    if (s > 0 && in.rank_of(s - 1) != in.rank_of(s)) reach += in.hop;
    if (head[r] < 0) head[r] = reach;
    const double back = in.split ? in.duration(OpKind::I, s) : in.duration(OpKind::B, s);
    const double w = in.split ? in.duration(OpKind::W, s) : 0.0;
    busy[r] += M * (in.duration(OpKind::F, s) + back + w);
    reach += in.duration(OpKind::F, s);
    chain += in.duration(OpKind::F, s) + back;
  }
  double bound = 0;
  for (std::size_t r = 0; r < busy.size(); ++r)
    if (head[r] >= 0) bound = std::max(bound, head[r] + busy[r]);
  // The last microbatch: stage 0's earlier forwards, its whole path there and back (each hop
  // twice), then stage 0's W of it.
  double hops = 0;
  for (int s = 1; s < S; ++s)
    if (in.rank_of(s - 1) != in.rank_of(s)) hops += 2 * in.hop;
  const double last = (M - 1) * in.duration(OpKind::F, 0) + chain + hops +
                      (in.split ? in.duration(OpKind::W, 0) : 0.0);
  return std::max(bound, last);
}

}  // namespace ppsim::search
