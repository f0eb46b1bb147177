#pragma once
// Inside libppsim_mpi.so: what plugin.cpp hands out through the C entry points of
// ppsim/real/mpi_backend.hpp.
#include "ppsim/real/transport.hpp"
#include "ppsim/real/world.hpp"

namespace ppsim::real::mpi {

// MPI started (MPI_THREAD_MULTIPLE) and this process's World; nullptr with `error` filled when
// it cannot be.
World* make_world(char* error, int error_size);
Transport* make_transport();

}  // namespace ppsim::real::mpi
