#include "network.hpp"

#include <algorithm>
#include <chrono>

namespace ppsim::real::host {

Network::~Network() {
  stop_network();
}

void Network::begin(const TransportContext& c) {
  stop_network();
  ctx_.emplace(c);
  R_ = c.program.ranks();
  fifo_ = c.network.matching == model::Matching::fifo;
  const double units =
      c.network.latency + (c.network.bandwidth > 0
                               ? static_cast<double>(c.network.boundary_bytes) / c.network.bandwidth
                               : 0.0);
  xfer_seconds_ = units * c.time_scale;
  links_.clear();
  tag_slot_.clear();
  waiters_.reset(R_);
  pending_ = {};
  seq_ = 0;
  aborted_ = false;
  closing_ = false;
  clear();
  configure(c);
  if (xfer_seconds_ > 0) network_ = std::thread([this] { network_loop(); });
}

bool Network::wait(int rank, std::span<const RequestPtr> requests) {
  std::unique_lock lock(mu_);
  return waiters_.wait(
      lock, rank, requests, [&] { return aborted_; },
      [&](const Request& r) { return satisfied(r); });
}

bool Network::quiescent() const {
  std::lock_guard lock(mu_);
  if (!pending_.empty()) return false;
  for (const auto& [id, l] : links_)
    if (l.busy || !l.ready.empty()) return false;
  return !waiters_.any_about_to_move([&](const Request& r) { return satisfied(r); });
}

std::size_t Network::stuck_waiters() const {
  std::lock_guard lock(mu_);
  return waiters_.stuck([&](const Request& r) { return satisfied(r); });
}

void Network::abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  waiters_.wake_all();
  network_cv_.notify_all();
}

void Network::end() {
  stop_network();
  // Messages still held (unmatched, or queued when the run stopped) let go of their buffers
  // now, while the ranks that own them still exist.
  std::lock_guard lock(mu_);
  links_.clear();
  tag_slot_.clear();
  pending_ = {};
  clear();
}

bool Network::match_send(const MessagePtr& m) {
  if (fifo_) {
    Link& l = links_[m->link];
    if (l.recvs.empty()) {
      l.sends.push_back(m);
      return false;
    }
    m->recv = l.recvs.front();
    l.recvs.pop_front();
    record_match(*m);
    return true;
  }
  auto& slot = tag_slot_[tag_of(*ctx_, *m->send)];
  if (!slot.recv) {
    if (slot.send) duplicate(*m->send);
    slot.send = m;
    return false;
  }
  m->recv = std::move(slot.recv);
  slot = {};
  record_match(*m);
  return true;
}

MessagePtr Network::match_recv(std::size_t link, const RequestPtr& req) {
  MessagePtr m;
  if (fifo_) {
    Link& l = links_[link];
    if (l.sends.empty()) {
      l.recvs.push_back(req);
      return nullptr;
    }
    m = l.sends.front();
    l.sends.pop_front();
  } else {
    auto& slot = tag_slot_[tag_of(*ctx_, *req)];
    if (!slot.send) {
      if (slot.recv) duplicate(*req);
      slot.recv = req;
      return nullptr;
    }
    m = std::move(slot.send);
    slot = {};
  }
  m->recv = req;
  record_match(*m);
  return m;
}

void Network::record_match(Message& m) {
  m.send->peer_rank = m.recv->rank;
  m.send->peer_pos = m.recv->pos;
  m.recv->peer_rank = m.send->rank;
  m.recv->peer_pos = m.send->pos;
}

void Network::make_ready(const MessagePtr& m) {
  Link& l = links_[m->link];
  m->ready = now();
  if (l.busy || !l.ready.empty()) {
    l.ready.push_back(m);
    return;
  }
  start(l, m, m->ready);
}

void Network::start(Link& l, const MessagePtr& m, double t) {
  m->start = t;
  if (xfer_seconds_ <= 0) {  // no modelled time: done at once, the link is free again
    finish(*m, t);
    return;
  }
  l.busy = true;
  const double ends = t + xfer_seconds_;
  started(*m, ends);
  pending_.push({ends, seq_++, m->link, m});
  network_cv_.notify_one();
}

void Network::finish(Message& m, double t) {
  m.end = t;
  m.arrived = true;
  arrived(m);
}

void Network::complete(const RequestPtr& r, const Message& m) {
  r->transfer_start = m.start;
  r->transfer_end = m.end;
  r->error = m.error;
  complete(r);
}

void Network::complete(const RequestPtr& r) {
  r->complete.store(true, std::memory_order_release);
  waiters_.wake(r->rank);
}

// Ends transfers at their deadlines (sleeping until the next one, spinning the last stretch) and
// starts the next transfer on each link freed.
void Network::network_loop() {
  precise_timers();
  std::unique_lock lock(mu_);
  while (!closing_) {
    if (aborted_ || pending_.empty()) {
      network_cv_.wait(lock);
      continue;
    }
    const Pending next = pending_.top();
    const auto deadline = ctx_->clock.at(next.end);
    const auto spin_from = deadline - std::chrono::microseconds(100);
    if (RunClock::Clock::now() < spin_from) {
      network_cv_.wait_until(lock, spin_from);
      continue;  // something may have changed
    }
    lock.unlock();
    sleep_until(deadline);
    lock.lock();
    if (closing_ || pending_.empty() || pending_.top().seq != next.seq) continue;
    pending_.pop();
    Link& l = links_[next.link];
    l.busy = false;
    finish(*next.message, next.end);
    if (!l.ready.empty()) {
      MessagePtr m = l.ready.front();
      l.ready.pop_front();
      // When the previous one ended (or it became ready), not when this thread got round to it.
      start(l, m, std::max(next.end, m->ready));
    }
    settle();
  }
}

void Network::stop_network() {
  if (!network_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    network_cv_.notify_all();
  }
  network_.join();
}

}  // namespace ppsim::real::host
