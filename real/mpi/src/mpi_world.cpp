#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpi_plugin.hpp"

namespace ppsim::real::mpi {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(text, n));
}

class MpiWorld final : public World {
 public:
  MpiWorld() {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    // The watchdog's collectives run beside the transport's messages, on other threads.
    if (provided < MPI_THREAD_MULTIPLE) {
      MPI_Finalize();
      throw std::runtime_error(
          "this MPI library does not support MPI_THREAD_MULTIPLE, which the mpi backend needs");
    }
    // Errors come back as codes (and become exceptions) rather than aborting the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &process_);
    MPI_Comm_size(comm_, &processes_);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(version, &n);
    std::string v(version, static_cast<std::size_t>(n));
    v = v.substr(0, v.find_first_of(",\n"));  // "Open MPI v4.1.4, package: ..." -> its name
    name_ = "MPI (" + v + ")";
  }
  ~MpiWorld() override {
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

  int process() const override { return process_; }
  int processes() const override { return processes_; }
  std::string name() const override { return name_; }

  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

  void sum(std::span<std::int64_t> values) override {
    check(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T,
                        MPI_SUM, comm_),
          "MPI_Allreduce");
  }

  std::vector<std::string> gather(const std::string& mine) override {
    // Sizes first, then the bytes (MPI counts are ints: parts beyond 2 GiB are refused).
    if (mine.size() > static_cast<std::size_t>(INT32_MAX))
      throw std::runtime_error("a process's part of the run exceeds 2 GiB");
    int size = static_cast<int>(mine.size());
    std::vector<int> sizes(process_ == 0 ? static_cast<std::size_t>(processes_) : 0);
    check(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm_), "MPI_Gather");
    std::vector<int> offsets(sizes.size());
    std::int64_t total = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      offsets[i] = static_cast<int>(total);
      total += sizes[i];
    }
    if (total > INT32_MAX) throw std::runtime_error("the run's parts exceed 2 GiB");
    std::string all(static_cast<std::size_t>(total), '\0');
    check(MPI_Gatherv(mine.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(),
                      MPI_BYTE, 0, comm_),
          "MPI_Gatherv");
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      parts.push_back(
          all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(sizes[i])));
    return parts;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // (MPI_Abort does not return)
  }

  void broadcast(std::string& bytes) override {
    std::uint64_t n = bytes.size();
    check(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm_), "MPI_Bcast");
    bytes.resize(n);
    check(MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_BYTE, 0, comm_), "MPI_Bcast");
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int process_ = 0, processes_ = 1;
  std::string name_;
};

}  // namespace

World* make_world(char* error, int error_size) {
  try {
    return new MpiWorld();
  } catch (const std::exception& e) {
    std::snprintf(error, static_cast<std::size_t>(error_size), "%s", e.what());
    return nullptr;
  }
}

}  // namespace ppsim::real::mpi
