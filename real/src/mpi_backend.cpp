#include "ppsim/real/mpi_backend.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "ppsim/real/backend_error.hpp"

namespace ppsim::real {

namespace {

struct Plugin {
  PpsimMpiWorld world = nullptr;
  PpsimMpiTransport transport = nullptr;
};

// Where the plugin may be: the build tree's (PPSIM_MPI_PLUGIN), then beside the executable and in
// ../lib/ppsim (an installed ppsim).
std::vector<std::string> candidates() {
  std::vector<std::string> out;
#ifdef PPSIM_MPI_PLUGIN
  out.emplace_back(PPSIM_MPI_PLUGIN);
#endif
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / "libppsim_mpi.so").string());
    out.push_back((exe.parent_path().parent_path() / "lib/ppsim/libppsim_mpi.so").string());
  }
  return out;
}

const Plugin& plugin() {
  static std::once_flag once;
  static Plugin p;
  static std::string error;
  std::call_once(once, [] {
    std::vector<std::string> tried;
    for (const auto& path : candidates()) {
      if (!std::filesystem::exists(path)) continue;
      // RTLD_LOCAL: the plugin keeps its own copies of what it uses of ppsim.
      void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) {
        tried.push_back(fmt::format("{} ({})", path, dlerror()));
        continue;
      }
      auto abi = reinterpret_cast<PpsimMpiAbi>(dlsym(h, "ppsim_mpi_abi"));
      auto world = reinterpret_cast<PpsimMpiWorld>(dlsym(h, "ppsim_mpi_world"));
      auto transport = reinterpret_cast<PpsimMpiTransport>(dlsym(h, "ppsim_mpi_transport"));
      if (!abi || !world || !transport || abi() != kPpsimMpiAbi) {
        tried.push_back(fmt::format("{} (not a plugin of this ppsim)", path));
        continue;
      }
      p = {world, transport};
      return;
    }
    error = tried.empty() ? "this ppsim was built without MPI (apt-get install libopenmpi-dev "
                            "openmpi-bin, then build again)"
                          : fmt::format("cannot load the MPI plugin: {}", fmt::join(tried, "; "));
  });
  if (p.world == nullptr) throw BackendUnavailable("the mpi backend: " + error);
  return p;
}

}  // namespace

void register_mpi_backend() {
  auto& t = TransportRegistry::instance();
  if (t.find("mpi")) return;
  TransportInfo info{"mpi", "one process per rank under mpirun; transfers are MPI messages",
                     [] { return std::unique_ptr<Transport>(plugin().transport()); }};
  info.per_process = true;
  t.add(std::move(info));
}

std::unique_ptr<World> make_mpi_world() {
  char error[512] = {};
  World* w = plugin().world(error, sizeof error);
  if (w == nullptr) throw BackendUnavailable(fmt::format("the mpi backend: {}", error));
  return std::unique_ptr<World>(w);
}

int launched_processes() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var)) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      return end != v && n > 1 ? static_cast<int>(std::min(n, 1L << 20)) : 1;
    }
  return 1;
}

}  // namespace ppsim::real
