#pragma once
// The subcommands of `ppsim`. Each returns the process exit code (docs/CLI.md, "Exit codes"):
// 0 ok, 1 a schedule is wrong, 2 bad input, usage or an output that could not be written. Failures
// of stdout itself are found by main (base::StandardOutput), which then exits 2.
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ppsim/config/resources.hpp"
#include "ppsim/config/sweep.hpp"

namespace ppsim::cli {

constexpr int kOk = 0, kWrong = 1, kBadInput = 2;
// `real` only: a rank failed (threw), and the run was interrupted (SIGINT/SIGTERM, 128 + 2).
constexpr int kRankFailed = 3, kInterrupted = 130;
// `real` only: the GPU backend asked for cannot run on this machine (no driver, device or GPUs).
constexpr int kNoDevice = 4;

// A bad command-line value found after parsing (exit 2); what() names the option.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws UsageError when `output` (option `option`, symlinks followed) is the file `input`: writing
// the output would replace the input it was made from.
void refuse_input_as_output(const std::string& option, const std::string& output,
                            const std::string& input);
// The files a config reads: itself, and a torch-csv schedule's `file`.
std::vector<std::string> read_files(const config::Config& cfg);

struct CommonOptions {
  std::vector<std::string> overrides;                       // --set key=value
  std::uint64_t max_memory = config::default_max_memory();  // --max-memory; 0 = no limit
  // --calibration FILE: measured costs, `{"costs": ..., "comm": ...}` as `real --calibrate --json`
  // and `import-profile -o` write them (or their whole --json output), after the --set ones.
  std::string calibration;
};

// load_config with the --set assignments and the calibration fragment's; a bad value of the
// fragment is blamed on its file.
config::Config load_with_calibration(const std::string& path, const CommonOptions& common);

// The sweep options of `compare` as typed (each may repeat and holds a comma-separated list);
// checked by cmd_compare so that an empty or bad element is an error naming the option.
struct SweepOptions {
  std::vector<std::string> schedules, microbatches, chunks;
  std::string shard;  // --shard I/N: only points i with i mod N == I, as JSON for `ppsim merge`
};

// What `ppsim run` writes besides its summary.
struct RunOutputs {
  bool json = false;       // --json: one JSON object instead of the summary
  std::string trace_file;  // --trace: Chrome trace
  std::string svg_file;    // --svg: SVG timeline
  bool timeline = false;   // --timeline: terminal timeline after the summary
  bool no_color = false;   // --no-color
};

int cmd_run(const std::string& config, const RunOutputs& outputs, const CommonOptions& common);
int cmd_compare(const std::vector<std::string>& configs, bool json, bool csv,
                const SweepOptions& sweep, const CommonOptions& common);
// `configs`: files, and directories standing for every *.json / *.csv under them
// (check_inputs.hpp); `junit_file`: where to write a JUnit XML report too ("" for none).
int cmd_check(const std::vector<std::string>& configs, bool json, const std::string& junit_file,
              const CommonOptions& common);
int cmd_list();
int cmd_export(const std::string& config, const CommonOptions& common);
// PyTorch pipelining's schedule CSV (cli/interop.cpp, docs/INTEROP.md).
struct ImportOptions {
  std::string output;   // -o: the config file to write (default stdout)
  bool custom = false;  // --custom: the lowered op lists as a `custom` schedule
};
struct ExportOptions {
  std::string format = "text";  // --format text|torch-csv
  bool compute_only = false;    // --compute-only
  std::string output;           // -o
  std::string line_end = "crlf";
};
int cmd_import(const std::string& csv, const ImportOptions& options, const CommonOptions& common);
int cmd_export_torch(const std::string& config, const ExportOptions& options,
                     const CommonOptions& common);
// `ppsim model`: the costs and memory derived from `model` + `hardware` (cli/model.cpp).
// `calibration`: a fragment of measured costs (`real --calibrate --json`), or "".
int cmd_model(const std::string& config, bool json, const std::string& calibration,
              const CommonOptions& common);
// `ppsim report`: one self-contained HTML file (cli/report.cpp).
int cmd_report(const std::vector<std::string>& configs, const std::string& output,
               const std::string& title, const SweepOptions& sweep, const CommonOptions& common);

// For subcommands in other files: every config read, each expanded into its sweep points when
// `sweep` asks for one (options checked as `compare` does: UsageError naming the option), in
// order; and the error handling of every subcommand (bad input and output errors: a message
// naming `source` on stderr, exit 2).
// `kept`: what each run's record holds until the end (compare: the program; report: its trace too),
// for the check that all of them fit in --max-memory.
std::vector<config::Config> sweep_points(const std::vector<std::string>& paths,
                                         const SweepOptions& sweep, const CommonOptions& common,
                                         config::Workload kept = config::Workload::program);
int run_guarded(const std::string& source, const std::function<int()>& body);
// `run(i)` for each of `points`, on all cores (PPSIM_JOBS) as far as --max-memory lets them run at
// once, with a progress line.
void for_each_point(const std::vector<config::Config>& points, const CommonOptions& common,
                    const std::function<void(std::size_t)>& run);

// `ppsim real` (docs/EXECUTOR.md). Values as typed, checked by cmd_real so that errors name the
// option; each given one overrides the config's `real` section.
struct RealOptions {
  std::optional<std::string> backend, compute, time_scale, memory_scale, iterations, warmup,
      hang_timeout;
  std::string trace_file;
  std::string report_file;  // --report: the HTML report of the simulated and the measured run
  bool json = false;
  bool calibrate = false;
  std::string profile_dir;  // --profile-trace: Kineto traces of the measured run, one per rank
};
int cmd_real(const std::string& config, const RealOptions& options, const CommonOptions& common);

// A comma-separated list option split into its elements; throws UsageError naming `option` for an
// empty element. parse_positive_list also requires integers in 1..2^31-1.
std::vector<std::string> split_list(const std::string& option, const std::vector<std::string>& raw);
std::vector<int> parse_positive_list(const std::string& option,
                                     const std::vector<std::string>& raw);

// `ppsim search` and `ppsim merge` (cli/search.cpp, docs/SEARCH.md). Values as typed, checked by
// cmd_search so that errors name the option.
struct SearchCliOptions {
  std::string memory_limit;  // --memory-limit: bytes, or with a unit (80GB, 74.5GiB)
  double time_limit = 0;     // --time-limit S
  std::uint64_t seed = 1;    // --seed
  std::string shard;         // --shard I/N
  bool mpi = false;          // --mpi: one shard per process under mpirun, gathered by process 0
  bool json = false;
  std::string output;             // -o: the winner as a runnable config (or CSV)
  std::string format = "config";  // --format config|torch-csv
  std::string report_file;        // --report: HTML with the Pareto chart and the winner
};
int cmd_search(const std::string& config, const SearchCliOptions& options,
               const CommonOptions& common);
int cmd_merge(const std::vector<std::string>& results, bool json, const std::string& output);
// Writes `text` to `output` (through base::OutputFile: whole or not at all), or to stdout when
// `output` is empty.
void write_out(const std::string& text, const std::string& output);

// "I/N" with 0 <= I < N -> (I, N); throws UsageError naming --shard.
std::pair<int, int> parse_shard(const std::string& text);
// "80GB", "74.5GiB", "1e9", "1000000" -> bytes; throws UsageError naming `option`.
std::int64_t parse_bytes(const std::string& option, const std::string& text);

// `ppsim import-profile` (cli/import_profile.cpp, docs/PROFILES.md).
struct ImportProfileOptions {
  bool json = false;
  std::string output;       // -o: the calibrated fragment
  std::optional<int> step;  // --step N: ProfilerStep#N
  std::string map_file;     // --map FILE: other frameworks' range names
  std::string report_file;  // --report: measured beside its replay
  std::string trace_file;   // --trace: Chrome/Perfetto trace of both
  std::string svg_file;     // --svg: the measured timeline
};
int cmd_import_profile(const std::vector<std::string>& traces, const ImportProfileOptions& options);

}  // namespace ppsim::cli
