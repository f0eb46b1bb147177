// comm.semantics "mpi" on the host network (network.hpp): a transfer is ready once its send and its
// receive are both posted, and each request completes when its transfer ends. An eager send (a
// message of at most comm.eager_limit bytes) completes when it is posted: its bytes leave at
// once, travel whether or not the receive is posted, and wait at the receiver.
#include <memory>

#include "network.hpp"

namespace ppsim::real::host {

namespace {

struct MpiMessage : Message {
  bool eager = false;  // its bytes were copied out when the send was posted
};

class MpiProgress final : public Network {
 public:
  ~MpiProgress() override { stop_network(); }

  RequestPtr post(int rank, int pos, const schedules::Op& op,
                  std::shared_ptr<Buffer> buffer) override {
    auto req = new_request(*ctx_, rank, pos, op, std::move(buffer));
    const int peer = ctx_->semantics.peer_of(op);
    const std::size_t link = req->send ? link_index(rank, peer) : link_index(peer, rank);
    std::lock_guard lock(mu_);
    if (req->send) {
      auto m = std::make_shared<MpiMessage>();
      m->send = req;
      m->link = link;
      if (eager_) {
        m->eager = true;
        read_send(*m, [&](std::span<const std::byte> b) { m->bytes.assign(b.begin(), b.end()); });
        req->error = m->error;
        complete(req);
        match_send(m);
        make_ready(m);
      } else if (match_send(m)) {
        make_ready(m);
      }
    } else if (MessagePtr m = match_recv(link, req)) {
      auto& mm = static_cast<MpiMessage&>(*m);
      if (!mm.eager)
        make_ready(m);
      else if (mm.arrived)  // an eager message waiting here
        deliver(mm);
    }
    return req;
  }

 private:
  void configure(const TransportContext& c) override {
    eager_ = c.network.eager_limit > 0 && c.network.boundary_bytes <= c.network.eager_limit;
  }

  void started(Message& m, double ends) override {
    m.send->ends_at.store(ends, std::memory_order_relaxed);
  }

  // The data is at the receiver (if it is posted; an eager message waits for it).
  void arrived(Message& m) override {
    auto& mm = static_cast<MpiMessage&>(m);
    if (!mm.eager) {
      read_send(m, [&](std::span<const std::byte> b) { m.recv->buffer->copy_from(b); });
      complete(m.send, m);
    }
    if (m.recv) deliver(mm);
  }

  // The receive completes with the message's bytes.
  void deliver(MpiMessage& m) {
    if (m.eager && m.error.empty()) m.recv->buffer->copy_from(m.bytes);
    complete(m.recv, m);
  }

  bool eager_ = false;
};

}  // namespace

std::unique_ptr<Network> make_mpi_progress() {
  return std::make_unique<MpiProgress>();
}

}  // namespace ppsim::real::host
