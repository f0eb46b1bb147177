#pragma once
// What a command writes, checked against what it reads and against itself before anything runs,
// and `real --profile-trace DIR`, whose rank files are the run's alone (docs/CLI.md, "Output
// files"; docs/EXECUTOR.md).
#include <string>
#include <utility>
#include <vector>

#include "ppsim/base/output_file.hpp"
#include "ppsim/record/run_record.hpp"

namespace ppsim::cli {

// (option, path) of each file a command writes; an empty path is not written.
using NamedOutputs = std::vector<std::pair<std::string, std::string>>;

// Throws UsageError for the first output that names another output or one of `inputs` (by
// identity: `./c.json`, a symbolic or hard link; a file not written yet by directory and name),
// and, when `json_on_stdout` (the command prints its --json document there), for an output that
// is standard output itself (/dev/stdout, /dev/fd/1, the file or pipe stdout goes to).
void refuse_clashes(const NamedOutputs& outputs, const std::vector<std::string>& inputs,
                    bool json_on_stdout = false);

// Whether `path` names this process's standard output, where writing it would mix two documents;
// /dev/null does not count.
bool names_stdout(const std::string& path);

// `real --profile-trace DIR`. The constructor checks, before the run, that DIR is a directory (or
// can be made one) holding no file but the rank<r>.json traces ppsim wrote (an earlier run's,
// replaced or removed) and none of the command's inputs and other outputs; else OutputError naming
// the option. write() adds this run's traces to `set`; after set.commit(), clear_stale() removes
// an earlier run's traces of ranks this one does not have. Without commit, a directory made here
// is removed again (when it is still empty).
class ProfileDirectory {
 public:
  ProfileDirectory(std::string dir, const NamedOutputs& outputs,
                   const std::vector<std::string>& inputs);
  ~ProfileDirectory();
  ProfileDirectory(const ProfileDirectory&) = delete;
  ProfileDirectory& operator=(const ProfileDirectory&) = delete;

  void write(const record::RunRecord& run, base::OutputSet& set);
  void clear_stale();

 private:
  std::string dir_;
  bool existed_ = false, created_ = false, published_ = false;
  std::vector<std::pair<int, std::string>> earlier_;  // (rank, path) of ppsim's own traces there
  int written_ = 0;                                   // ranks written by this run
};

}  // namespace ppsim::cli
