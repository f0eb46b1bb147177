#include "ppsim/real/gpu/backends.hpp"

#include "ppsim/real/compute.hpp"
#include "ppsim/real/transport.hpp"

namespace ppsim::real::gpu {

void register_cuda_compute(ComputeRegistry& registry);
void register_cuda_transport(TransportRegistry& registry);
void register_nccl_transport(TransportRegistry& registry);

void register_backends() {
  // Registering needs no GPU: whether one is there is asked when a run begins, so that the
  // error says what is missing (exit 4) rather than "unknown backend".
  auto& t = TransportRegistry::instance();
  if (!t.find("cuda")) register_cuda_transport(t);
  if (!t.find("nccl")) register_nccl_transport(t);
  auto& c = ComputeRegistry::instance();
  if (!c.find("cuda")) register_cuda_compute(c);
}

}  // namespace ppsim::real::gpu
