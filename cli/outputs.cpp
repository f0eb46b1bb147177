#include "outputs.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "commands.hpp"
#include "ppsim/profile/kineto.hpp"

namespace ppsim::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kProfileOption = "--profile-trace";

bool is_descriptor_one(const std::string& path) {
  return path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1" ||
         path == fmt::format("/proc/{}/fd/1", ::getpid());
}

// The directory `path` (symbolic links of its last component followed) is in.
std::string directory_of(const std::string& path) {
  std::string target = path;
  try {
    target = base::resolve_output_path(path);
  } catch (const base::OutputError&) {  // a loop: the output's own open says so
  }
  const fs::path parent = fs::path(target).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// `rank<r>.json` -> r (no sign, no leading zero), else -1.
int rank_of_name(const std::string& name) {
  if (!name.starts_with("rank") || !name.ends_with(".json")) return -1;
  const std::string digits = name.substr(4, name.size() - 9);
  if (digits.empty() || digits.size() > 6 || (digits.size() > 1 && digits[0] == '0') ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(digits);
}

// Whether `path` is a regular file that profile::write_traces wrote for rank `rank`: its first
// bytes say so (a profiler's own trace begins otherwise).
bool ppsim_trace(const std::string& path, int rank) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const std::string want =
      fmt::format(R"({{"distributedInfo":{{"backend":"nccl","rank":{},"world_size":)", rank);
  std::ifstream in(path, std::ios::binary);
  std::string head(want.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  return in && head == want;
}

}  // namespace

bool names_stdout(const std::string& path) {
  if (is_descriptor_one(path)) return true;
  struct stat out {
  }, st{}, null{};
  if (::fstat(1, &out) != 0 || ::stat(path.c_str(), &st) != 0) return false;
  if (::stat("/dev/null", &null) == 0 && S_ISCHR(out.st_mode) && out.st_rdev == null.st_rdev)
    return false;  // both discarded: nothing mixes
  return out.st_dev == st.st_dev && out.st_ino == st.st_ino;
}

void refuse_clashes(const NamedOutputs& outputs, const std::vector<std::string>& inputs,
                    bool json_on_stdout) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, path] = outputs[i];
    if (path.empty()) continue;
    if (json_on_stdout && names_stdout(path))
      throw UsageError(fmt::format(
          "{} {}: is standard output, where --json prints its document: two documents would mix "
          "there; name a file, or leave out --json",
          option, path));
    for (std::size_t j = i + 1; j < outputs.size(); ++j)
      if (!outputs[j].second.empty() && base::same_file(path, outputs[j].second))
        throw UsageError(
            fmt::format("{} and {} name the same file '{}'", option, outputs[j].first, path));
    for (const auto& input : inputs) refuse_input_as_output(option, path, input);
  }
}

ProfileDirectory::ProfileDirectory(std::string dir, const NamedOutputs& outputs,
                                   const std::vector<std::string>& inputs)
    : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  auto refuse = [&](const std::string& what) {
    throw base::OutputError(fmt::format("{} {}: {}", kProfileOption, dir_, what));
  };
  struct stat st {};
  if (::stat(dir_.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) refuse("not a directory");
    existed_ = true;
  } else if (errno != ENOENT) {
    refuse(fmt::format("cannot read: {}", std::strerror(errno)));
  } else {  // made after the run: the nearest existing directory above must take it
    fs::path up = fs::absolute(fs::path(dir_)).lexically_normal().parent_path();
    while (::stat(up.c_str(), &st) != 0 && up.has_parent_path() && up != up.parent_path())
      up = up.parent_path();
    if (!S_ISDIR(st.st_mode)) refuse(fmt::format("{} is not a directory", up.string()));
    if (::access(up.c_str(), W_OK | X_OK) != 0)
      refuse(
          fmt::format("cannot create the directory in {}: {}", up.string(), std::strerror(errno)));
  }
  // Nothing else of this command may live there: the run replaces the directory's traces.
  for (const auto& [option, path] : outputs)
    if (!path.empty() && base::same_file(directory_of(path), dir_))
      throw base::OutputError(
          fmt::format("{} {}: is in {} {}, whose files this run replaces; name a file elsewhere",
                      option, path, kProfileOption, dir_));
  for (const auto& input : inputs)
    if (!input.empty() && base::same_file(directory_of(input), dir_))
      refuse(fmt::format(
          "holds the input file {}: this run replaces the directory's files; name another "
          "directory",
          input));
  if (!existed_) return;
  // Only an earlier run's traces may be there (replaced, or removed when it had more ranks);
  // anything else is the user's, and is not ours to remove.
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir_.c_str()), ::closedir);
  if (!d) refuse(fmt::format("cannot read the directory: {}", std::strerror(errno)));
  std::vector<std::string> foreign;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name.starts_with(".ppsim-")) continue;  // (temporaries)
    const std::string path = (fs::path(dir_) / name).string();
    const int rank = rank_of_name(name);
    if (rank < 0 || !ppsim_trace(path, rank)) {
      foreign.push_back(name);
      continue;
    }
    for (const auto& input : inputs)  // a hard link to an input is the input
      if (!input.empty() && base::same_file(path, input))
        refuse(
            fmt::format("holds the input file {} (as {}): this run replaces the directory's "
                        "files; name another directory",
                        input, name));
    earlier_.emplace_back(rank, path);
  }
  if (!foreign.empty()) {
    std::sort(foreign.begin(), foreign.end());
    refuse(fmt::format(
        "holds {} that ppsim did not write as a rank trace ({}{}): name an empty or new "
        "directory (ppsim replaces only its own rank<r>.json)",
        foreign.size() == 1 ? "a file" : fmt::format("{} files", foreign.size()), foreign[0],
        foreign.size() > 1 ? ", ..." : ""));
  }
}

ProfileDirectory::~ProfileDirectory() {
  if (created_ && !published_) ::rmdir(dir_.c_str());  // only when still empty
}

void ProfileDirectory::write(const record::RunRecord& run, base::OutputSet& set) {
  if (dir_.empty()) return;
  if (!existed_ && !created_) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec)
      throw base::OutputError(fmt::format("{} {}: cannot create the directory: {}", kProfileOption,
                                          dir_, ec.message()));
    created_ = true;
  }
  profile::write_traces(run, [&](int rank, const std::string& text) {
    base::OutputFile& out =
        set.add(kProfileOption, (fs::path(dir_) / fmt::format("rank{}.json", rank)).string());
    out.stream() << text;
    try {
      out.finish();  // synced and closed: a thousand ranks hold names, not descriptors
    } catch (const base::OutputError& e) {
      throw base::OutputError(fmt::format("{} {}", kProfileOption, e.what()));
    }
  });
  written_ = run.program->ranks();
}

void ProfileDirectory::clear_stale() {
  published_ = true;
  for (const auto& [rank, path] : earlier_)
    if (rank >= written_ && ::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw base::OutputError(fmt::format("{} {}: cannot remove {}, an earlier run's trace: {}",
                                          kProfileOption, dir_, path, std::strerror(errno)));
}

}  // namespace ppsim::cli
