#pragma once
// Runs a Program for real: one thread per rank issuing its ops in order through a Transport and a
// Compute, with real buffers, real blocking and the run clock, and returns the measured run in the
// simulator's schema (RunRecord, origin "measured"). A watchdog turns a hang into the simulator's
// deadlock report; an interrupt or a rank that throws stops every rank cleanly.
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/config/prepare.hpp"
#include "ppsim/real/collective_fit.hpp"
#include "ppsim/real/settings.hpp"
#include "ppsim/real/world.hpp"
#include "ppsim/record/run_record.hpp"

namespace ppsim::real {

enum class Outcome {
  finished,     // every rank ran its ops to the end
  hang,         // the watchdog stopped a run that could not progress (record.deadlock says why)
  interrupted,  // `stop` was set (SIGINT)
  failed,       // a rank threw (failure says which rank, op and why)
};

struct Execution {
  Outcome outcome = Outcome::finished;
  std::string failure;
  record::RunRecord record;                   // the reported iteration, with its trace
  std::vector<double> makespans;              // of each measured iteration, time units
  std::int64_t real_peak_bytes = 0;           // the most real bytes any rank held
  double memory_scale = 1;                    // the scale used (0: payload stamps only)
  std::vector<std::string> notes;             // the transport's and the compute's report lines
  std::vector<CollectiveSample> collectives;  // with ExecOptions::measure_collectives
};

struct ExecOptions {
  Settings settings;
  const std::atomic<bool>* stop = nullptr;  // set from a signal handler to interrupt
  // The processes of a run under a launcher (one rank each): every process calls execute() and
  // process 0's Execution holds the whole run; the others' hold its outcome only. None: every
  // rank is a thread of this process.
  World* world = nullptr;
  // After a finished run, the transport's collectives (Transport::measure_collectives).
  bool measure_collectives = false;
};

// What execute() refuses before it starts (an unknown backend or compute, a rank count the
// backend cannot run, a launcher that does not fit, times the clock cannot hold, real buffers past
// --max-memory): throws config::ConfigError naming the key. Cheap: callers run it before anything
// costly (ppsim real, before its prediction).
void check_runnable(const config::Prepared& prepared, const ExecOptions& options);
// `prepared` as from config::prepare. Throws config::ConfigError for settings the backend cannot
// honour (unknown backend, I/W without split costs, ...). A program validation rejects as fatal is
// not run: the record holds its diagnostics and no metrics.
Execution execute(const config::Prepared& prepared, const ExecOptions& options);

const char* to_string(Outcome outcome);

}  // namespace ppsim::real
