#pragma once
// The executor across processes (docs/EXECUTOR.md "Several processes: mpi"): one process per
// rank, started by a launcher (mpirun), their World and the `mpi` transport over MPI. They live
// in a plugin, libppsim_mpi.so (real/mpi/, linked with Open MPI), loaded on first use: linked
// into ppsim, MPI's libraries cost every run ~2 ms and 2 MiB before main.
#include <memory>

#include "ppsim/real/transport.hpp"
#include "ppsim/real/world.hpp"

namespace ppsim::real {

// Adds `mpi` to TransportRegistry (idempotent). Where ppsim was built without MPI, or the plugin
// cannot be loaded, a run asking for it throws BackendUnavailable saying why.
void register_mpi_backend();

// Starts MPI (loading the plugin) and returns this process's World; MPI ends when it goes. One
// per process. Throws BackendUnavailable when there is no plugin or MPI cannot give what the
// executor needs.
std::unique_ptr<World> make_mpi_world();

// How many processes the launcher that started this one started (1: none, or alone). Read from
// the launcher's environment (Open MPI's mpirun, PMIx, PMI), without loading MPI.
int launched_processes();

}  // namespace ppsim::real

// The plugin's entry points (C names, looked up with dlsym).
extern "C" {
using PpsimMpiAbi = int (*)();
using PpsimMpiWorld = ppsim::real::World* (*)(char* error, int error_size);
using PpsimMpiTransport = ppsim::real::Transport* (*)();
}
inline constexpr int kPpsimMpiAbi = 1;  // bumped when World or Transport change
