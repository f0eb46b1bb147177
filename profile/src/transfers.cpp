#include "transfers.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace ppsim::profile::detail {

Launched::Launched(const RankTrace& t) : launches_(t.launches) {
  std::sort(launches_.begin(), launches_.end(),
            [](const LaunchEvent& a, const LaunchEvent& b) { return a.ts < b.ts; });
  device_.reserve(t.device.size());
  for (const auto& d : t.device) {
    auto [it, fresh] = device_.emplace(d.correlation, std::pair{d.ts, d.ts + d.dur});
    if (!fresh) {  // one launch, several activities (a graph): the whole of them
      it->second.first = std::min(it->second.first, d.ts);
      it->second.second = std::max(it->second.second, d.ts + d.dur);
    }
  }
}

std::optional<std::pair<double, double>> Launched::span(double ts, double dur,
                                                        std::int64_t tid) const {
  if (device_.empty()) return std::nullopt;
  auto it = std::lower_bound(launches_.begin(), launches_.end(), ts,
                             [](const LaunchEvent& l, double t) { return l.ts < t; });
  std::optional<std::pair<double, double>> out;
  for (; it != launches_.end() && it->ts <= ts + dur; ++it) {
    if (tid >= 0 && it->tid >= 0 && it->tid != tid) continue;
    const auto d = device_.find(it->correlation);
    if (d == device_.end()) continue;
    if (!out)
      out = d->second;
    else
      out =
          std::pair{std::min(out->first, d->second.first), std::max(out->second, d->second.second)};
  }
  return out;
}

std::vector<TransferPair> pair_transfers(const std::vector<std::vector<TimedComm>>& by_rank,
                                         std::size_t& unpaired) {
  const int P = static_cast<int>(by_rank.size());
  // Per directed link (src, dst): the sends and the receives, each in its rank's issue order.
  std::map<std::pair<int, int>,
           std::pair<std::vector<const TimedComm*>, std::vector<const TimedComm*>>>
      links;
  unpaired = 0;
  for (int r = 0; r < P; ++r)
    for (const auto& c : by_rank[static_cast<std::size_t>(r)]) {
      if (c.peer < 0 || c.peer >= P || c.peer == r) {
        ++unpaired;
        continue;
      }
      if (c.send)
        links[{r, c.peer}].first.push_back(&c);
      else
        links[{c.peer, r}].second.push_back(&c);
    }
  std::vector<TransferPair> out;
  for (auto& [link, sr] : links) {
    auto by_start = [](const TimedComm* a, const TimedComm* b) { return a->start < b->start; };
    std::stable_sort(sr.first.begin(), sr.first.end(), by_start);
    std::stable_sort(sr.second.begin(), sr.second.end(), by_start);
    const std::size_t n = std::min(sr.first.size(), sr.second.size());
    unpaired += sr.first.size() + sr.second.size() - 2 * n;
    for (std::size_t k = 0; k < n; ++k) {
      const TimedComm& s = *sr.first[k];
      const TimedComm& r = *sr.second[k];
      out.push_back({link.first, link.second, s.bytes >= 0 ? s.bytes : r.bytes, s.start, s.end,
                     r.start, r.end, s.device && r.device});
    }
  }
  return out;
}

LinkFit fit_link(const std::vector<std::pair<std::int64_t, double>>& samples) {
  LinkFit out;
  if (samples.empty()) return out;
  std::vector<double> times;
  for (const auto& s : samples) times.push_back(s.second);
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                   times.end());
  const double median = times[times.size() / 2];
  out.median = median;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
  for (const auto& [bytes, t] : samples) {
    if (bytes < 0) continue;
    const double x = static_cast<double>(bytes);
    n += 1;
    sx += x;
    sy += t;
    sxx += x * x;
    sxy += x * t;
    lo = std::min(lo, bytes);
    hi = std::max(hi, bytes);
  }
  const double var = n * sxx - sx * sx;
  if (n >= 2 && hi > lo && var > 0) {
    const double slope = (n * sxy - sx * sy) / var;
    if (slope > 0) {
      out.bandwidth = 1 / slope;
      out.latency = std::max(0.0, (sy - slope * sx) / n);
      return out;
    }
  }
  out.latency = median;
  return out;
}

}  // namespace ppsim::profile::detail
