#include "transfers.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace ppsim::profile::detail {

Launched::Launched(const RankTrace& t) {
  std::unordered_map<std::int64_t, Span> device;  // by correlation id
  device.reserve(t.device.size());
  for (const auto& d : t.device) {
    auto [it, fresh] = device.emplace(d.correlation, Span{d.ts, d.ts + d.dur});
    if (!fresh) {  // one launch, several activities (a graph): the whole of them
      it->second.first = std::min(it->second.first, d.ts);
      it->second.second = std::max(it->second.second, d.ts + d.dur);
    }
  }
  // Only launches that ran something can change a span.
  std::vector<std::pair<double, Span>> all, untagged;
  std::unordered_map<std::int64_t, std::vector<std::pair<double, Span>>> tagged;
  for (const auto& l : t.launches) {
    const auto d = device.find(l.correlation);
    if (d == device.end()) continue;
    all.push_back({l.ts, d->second});
    (l.tid < 0 ? untagged : tagged[l.tid]).push_back({l.ts, d->second});
  }
  build(all_, all);
  build(untagged_, untagged);
  for (auto& [tid, list] : tagged) build(by_tid_[tid], list);
}

void Launched::build(Group& g, std::vector<std::pair<double, Span>>& launches) {
  std::stable_sort(launches.begin(), launches.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::size_t n = launches.size();
  g.ts.resize(n);
  g.tree.resize(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    g.ts[i] = launches[i].first;
    g.tree[n + i] = launches[i].second;
  }
  for (std::size_t i = n; i-- > 1;)
    g.tree[i] = {std::min(g.tree[2 * i].first, g.tree[2 * i + 1].first),
                 std::max(g.tree[2 * i].second, g.tree[2 * i + 1].second)};
}

std::optional<Launched::Span> Launched::query(const Group& g, double lo, double hi) const {
  // The launches with lo <= ts <= hi: [l, r) in time order, then the tree bottom up.
  const std::size_t n = g.ts.size();
  auto l = static_cast<std::size_t>(std::lower_bound(g.ts.begin(), g.ts.end(), lo) - g.ts.begin());
  auto r = static_cast<std::size_t>(std::upper_bound(g.ts.begin(), g.ts.end(), hi) - g.ts.begin());
  std::optional<Span> out;
  auto add = [&](const Span& s) {
    ++visits_;
    out = out ? Span{std::min(out->first, s.first), std::max(out->second, s.second)} : s;
  };
  for (l += n, r += n; l < r; l /= 2, r /= 2) {
    if (l & 1) add(g.tree[l++]);
    if (r & 1) add(g.tree[--r]);
  }
  return out;
}

std::optional<std::pair<double, double>> Launched::span(double ts, double dur,
                                                        std::int64_t tid) const {
  if (all_.ts.empty()) return std::nullopt;
  if (tid < 0) return query(all_, ts, ts + dur);
  // The thread's own launches and those that do not say their thread.
  std::optional<Span> out = query(untagged_, ts, ts + dur);
  if (const auto g = by_tid_.find(tid); g != by_tid_.end())
    if (const auto own = query(g->second, ts, ts + dur))
      out = out ? Span{std::min(out->first, own->first), std::max(out->second, own->second)} : own;
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
