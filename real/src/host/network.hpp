#pragma once
// The `host` transport's network (transports/host.cpp): ranks are threads of this process. A send
// and its receive meet by tag (the tensor) or in fifo order per directed link; a transfer takes
// its link once it is ready and the link is free, for the modelled latency + bytes / bandwidth of
// wall clock, one at a time per directed link in the order they became ready.
//
// When a transfer is ready and when a request completes are the point-to-point rules', two types
// behind this one: MpiProgress (mpi_progress.cpp) and NcclProgress (nccl_progress.cpp), as the
// engine's Engine<MpiProgress> and Engine<NcclProgress> (docs/SEMANTICS.md). Everything is
// decided under one mutex as events happen; a network thread ends transfers at their deadlines.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ppsim/real/transport.hpp"
#include "ppsim/real/waiters.hpp"

namespace ppsim::real::host {

// One message: a send and, once matched, its receive. The rules may keep more in a type derived
// from it.
struct Message {
  virtual ~Message() = default;
  RequestPtr send, recv;
  std::size_t link = 0;          // the directed link it travels (Network::link_index)
  bool arrived = false;          // its transfer has ended
  double ready = 0;              // it became ready to travel, seconds on the run clock
  double start = 0, end = 0;     // the transfer
  std::vector<std::byte> bytes;  // its bytes, when they left the send before the receive took them
  std::string error;             // the send's storage was gone when the transfer read it
};
using MessagePtr = std::shared_ptr<Message>;

class Network : public Transport {
 public:
  ~Network() override;

  void begin(const TransportContext& context) override;
  bool wait(int rank, std::span<const RequestPtr> requests) override;
  bool quiescent() const override;
  std::size_t stuck_waiters() const override;
  void abort() override;
  void end() override;

 protected:
  // ---- what the rules decide; called under mu_ ----
  // The rules' part of begin() (after the network's).
  virtual void configure(const TransportContext& /*context*/) {}
  // Let go of what the rules keep about a run (begin() and end()).
  virtual void clear() {}
  // What wait() waits for: the request's completion, unless the rules add to it.
  virtual bool satisfied(const Request& r) const {
    return r.complete.load(std::memory_order_relaxed);
  }
  // The transfer of `m` took its link at m.start and will end at `ends`.
  virtual void started(Message& m, double ends) = 0;
  // The transfer of `m` ended (m.end, m.arrived set): its bytes are to be delivered.
  virtual void arrived(Message& m) = 0;
  // After the network thread handled an event: the rules run what it made possible.
  virtual void settle() {}

  // ---- for the rules; under mu_ ----
  std::size_t link_index(int src, int dst) const {
    return static_cast<std::size_t>(src) * static_cast<std::size_t>(R_) +
           static_cast<std::size_t>(dst);
  }
  // A send (m->send, on m->link) is posted: true when it met its receive.
  bool match_send(const MessagePtr& m);
  // A receive is posted on `link`: the message it meets, if its send is there.
  MessagePtr match_recv(std::size_t link, const RequestPtr& req);
  // The message may travel: it takes its link when the link is free.
  void make_ready(const MessagePtr& m);
  // A transfer reads the send's storage: when it has been released that is caught and reported
  // in m.error, never a read of freed memory.
  template <typename Fn>
  void read_send(Message& m, Fn&& take) {
    const Buffer& b = *m.send->buffer;
    if (b.has_storage()) {
      take(b.data());
      return;
    }
    m.error = released_error(*ctx_, *m.send);
  }
  // The request carries the message's transfer; then it completes and its rank wakes.
  void complete(const RequestPtr& r, const Message& m);
  void complete(const RequestPtr& r);
  double now() const { return ctx_->clock.now(); }
  // Joins the network thread. The destructor of each rules' type calls it first: the thread calls
  // their overrides.
  void stop_network();

  std::optional<TransportContext> ctx_;
  int R_ = 0;
  bool fifo_ = false;  // matching in post order per link, not by tag
  double xfer_seconds_ = 0;
  mutable std::mutex mu_;
  Waiters waiters_;

 private:
  struct Link {
    std::deque<MessagePtr> ready;  // waiting for the link, in the order they became ready
    bool busy = false;
    // fifo matching: posted and not yet matched, in post order
    std::deque<MessagePtr> sends;
    std::deque<RequestPtr> recvs;
  };
  struct TagSlot {
    MessagePtr send;
    RequestPtr recv;
  };
  struct Pending {
    double end;  // seconds
    std::uint64_t seq;
    std::size_t link;
    MessagePtr message;
    bool operator>(const Pending& o) const { return end != o.end ? end > o.end : seq > o.seq; }
  };

  void start(Link& l, const MessagePtr& m, double t);
  void finish(Message& m, double t);
  void network_loop();
  [[noreturn]] void duplicate(const Request& r) const { throw_duplicate(*ctx_, r); }
  static void record_match(Message& m);

  std::unordered_map<std::size_t, Link> links_;
  std::unordered_map<std::size_t, TagSlot> tag_slot_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  std::uint64_t seq_ = 0;
  bool aborted_ = false, closing_ = false;
  std::condition_variable network_cv_;
  std::thread network_;
};

// The two rules (comm.semantics "mpi" and "nccl").
std::unique_ptr<Network> make_mpi_progress();
std::unique_ptr<Network> make_nccl_progress();

}  // namespace ppsim::real::host
