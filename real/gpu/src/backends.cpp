#include "ppsim/real/gpu/backends.hpp"

#include "ppsim/real/compute.hpp"
#include "ppsim/real/transport.hpp"

namespace ppsim::real::gpu {

// Generated from src/transports/*.cpp and src/computes/*.cpp (CMakeLists.txt).
void register_builtins(TransportRegistry& registry);
void register_builtins(ComputeRegistry& registry);

void register_backends() {
  // Registering needs no GPU: whether one is there is asked when a run begins, so that the
  // error says what is missing (exit 4) rather than "unknown backend". Adding is idempotent.
  gpu::register_builtins(TransportRegistry::instance());
  gpu::register_builtins(ComputeRegistry::instance());
}

}  // namespace ppsim::real::gpu
