// `host`: ranks are threads of this process, over the network of real/src/host/network.hpp, under
// the point-to-point rules comm.semantics names: MPI's (rendezvous or eager, tag or fifo matching)
// or NCCL's (kernels in stream order, groups, the pair's buffer). The rules are chosen when a run
// begins; this forwards to them.
#include <memory>

#include "host/network.hpp"

namespace ppsim::real::transports {

namespace {

class HostTransport final : public Transport {
 public:
  void begin(const TransportContext& c) override {
    const bool nccl = c.network.semantics == model::P2pSemantics::nccl;
    if (!rules_ || nccl != nccl_) {
      rules_ = nccl ? host::make_nccl_progress() : host::make_mpi_progress();
      nccl_ = nccl;
    }
    rules_->begin(c);
  }
  RequestPtr post(int rank, int pos, const schedules::Op& op,
                  std::shared_ptr<Buffer> buffer) override {
    return rules_->post(rank, pos, op, std::move(buffer));
  }
  bool wait(int rank, std::span<const RequestPtr> requests) override {
    return rules_->wait(rank, requests);
  }
  bool quiescent() const override { return rules_->quiescent(); }
  std::size_t stuck_waiters() const override { return rules_->stuck_waiters(); }
  void abort() override {
    if (rules_) rules_->abort();
  }
  void end() override {
    if (rules_) rules_->end();
  }
  void group_start(int rank) override { rules_->group_start(rank); }
  void group_end(int rank) override { rules_->group_end(rank); }
  std::vector<RequestPtr> blockers(const Request& r) const override { return rules_->blockers(r); }

 private:
  std::unique_ptr<host::Network> rules_;
  bool nccl_ = false;
};

}  // namespace

void register_host(TransportRegistry& registry) {
  registry.add({"host", "ranks are threads of this process; modelled latency and bandwidth",
                [] { return std::make_unique<HostTransport>(); }});
}

}  // namespace ppsim::real::transports
