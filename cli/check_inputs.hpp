#pragma once
// The files `ppsim check` reads. A file argument is taken as given; a directory stands for every
// `*.json` and `*.csv` file under it, found recursively (docs/CLI.md, "Checking directories").
#include <string>
#include <vector>

namespace ppsim::cli {

// One file to check, or something found on the way that cannot be (error non-empty: the whole
// message, naming the path; it counts as bad input).
struct CheckInput {
  std::string path;
  std::string error;
};

// The arguments in their order, each directory replaced by its files: entries sorted by name
// (byte order) at every level, depth first. Names starting with '.' are skipped (.git and the
// like). Symbolic links are followed; a link back to a directory being walked, an unreadable
// directory, a dangling link or a special file named *.json / *.csv, and a directory with no such
// file at all each give an error entry in place, and the walk goes on.
std::vector<CheckInput> expand_check_paths(const std::vector<std::string>& arguments);

}  // namespace ppsim::cli
