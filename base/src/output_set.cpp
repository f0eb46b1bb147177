// base::OutputSet: the outputs of one command, published all or none (output_file.hpp).
#include <fmt/format.h>

#include "ppsim/base/output_file.hpp"

namespace ppsim::base {

OutputFile& OutputSet::add(const std::string& option, const std::string& path) {
  try {
    files_.push_back({option, std::make_unique<OutputFile>(path)});
  } catch (const OutputError& e) {
    abandon();
    throw OutputError(fmt::format("{} {}", option, e.what()));
  }
  return *files_.back().file;
}

void OutputSet::fail(const Entry& e, const OutputError& error) {
  const std::string message = fmt::format("{} {}", e.option, error.what());
  abandon();
  throw OutputError(message);
}

void OutputSet::commit() {
  // Files first (the fsyncs are where a full disk shows), then the devices and FIFOs, written in
  // place: a device that fails still leaves every file as it was. Renames come last, when nothing
  // but a rename in an already checked directory is left to fail.
  for (const bool direct : {false, true})
    for (auto& e : files_)
      if ((e.file->mode() == OutputMode::direct) == direct && !e.file->finished() &&
          !e.file->abandoned())
        try {
          e.file->finish();
        } catch (const OutputError& error) {
          fail(e, error);
        }
  for (auto& e : files_) try {
      if (!e.file->abandoned()) e.file->publish();
    } catch (const OutputError& error) {
      fail(e, error);
    }
  files_.clear();
}

void OutputSet::abandon() {
  for (auto& e : files_) e.file->abandon();
  files_.clear();
}

}  // namespace ppsim::base
