// The C entry points of libppsim_mpi.so, the only symbols it exports.
#include "mpi_plugin.hpp"
#include "ppsim/real/mpi_backend.hpp"

#define PPSIM_EXPORT __attribute__((visibility("default")))

extern "C" {
PPSIM_EXPORT int ppsim_mpi_abi() {
  return kPpsimMpiAbi;
}
PPSIM_EXPORT ppsim::real::World* ppsim_mpi_world(char* error, int error_size) {
  return ppsim::real::mpi::make_world(error, error_size);
}
PPSIM_EXPORT ppsim::real::Transport* ppsim_mpi_transport() {
  return ppsim::real::mpi::make_transport();
}
}
