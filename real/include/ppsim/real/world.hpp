#pragma once
// The processes one run spans. Without a World the executor runs every rank as a thread of this
// process. Under a launcher (mpirun) each process runs one rank: the World is how the processes
// start their clocks together, agree on how the run goes (the watchdog) and bring what their
// ranks measured to process 0, which reports. Its calls are collective: every process makes the
// same calls in the same order.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ppsim::real {

class World {
 public:
  virtual ~World() = default;
  virtual int process() const = 0;       // this process, 0 .. processes() - 1
  virtual int processes() const = 0;     // also the number of ranks: process p runs rank p
  virtual std::string name() const = 0;  // for messages: "MPI (Open MPI 4.1.4)"

  virtual void barrier() = 0;
  // Every process gets the element-wise sum over all processes of `values` (same length
  // everywhere).
  virtual void sum(std::span<std::int64_t> values) = 0;
  // Process 0 gets every process's bytes, in process order; the others get nothing.
  virtual std::vector<std::string> gather(const std::string& mine) = 0;
  // Every process gets process 0's `bytes`.
  virtual void broadcast(std::string& bytes) = 0;
  // Not collective: this process failed where the others may wait for it. Ends every process of
  // the job with `code` (the launcher says so) and does not return.
  [[noreturn]] virtual void abort(int code) = 0;
};

}  // namespace ppsim::real
