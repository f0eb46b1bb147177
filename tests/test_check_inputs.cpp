// The files `ppsim check` reads from its arguments (cli/check_inputs.hpp): directories walked in
// name order, *.json and *.csv only, hidden names skipped, loops and unreadable entries reported in
// place.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "check_inputs.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using ppsim::cli::CheckInput;
using ppsim::cli::expand_check_paths;

namespace {

class TempTree {
 public:
  TempTree() {
    std::string pattern = (fs::temp_directory_path() / "ppsim-walk-XXXXXX").string();
    root_ = mkdtemp(pattern.data());
  }
  ~TempTree() {
    std::error_code ec;
    for (const auto& p : locked_) fs::permissions(p, fs::perms::owner_all, ec);
    fs::remove_all(root_, ec);
  }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }
  void file(const std::string& rel) {
    fs::create_directories(fs::path(path(rel)).parent_path());
    std::ofstream(path(rel)) << "{}";
  }
  void dir(const std::string& rel) { fs::create_directories(path(rel)); }
  void link(const std::string& target, const std::string& rel) {
    fs::create_symlink(target, path(rel));
  }
  void lock(const std::string& rel) {
    fs::permissions(path(rel), fs::perms::none);
    locked_.push_back(path(rel));
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  std::vector<std::string> locked_;
};

std::vector<std::string> paths_of(const std::vector<CheckInput>& in) {
  std::vector<std::string> out;
  for (const auto& i : in) out.push_back(i.error.empty() ? i.path : "ERROR " + i.path);
  return out;
}

}  // namespace

TEST_CASE("check_inputs.directory_json_csv_under_sorted", "[check_inputs]") {
  // check_inputs: a directory is every *.json and *.csv under it, sorted, depth first
  TempTree t;
  for (const char* f : {"b.json", "a.csv", "notes.txt", "json", "z/.x.json", "z/y.json",
                        "m/n/deep.json", "m/a.json", ".git/config.json", "c.JSON", "m/README"})
    t.file(f);
  t.dir("empty-sub");
  const std::string r = t.root();
  CHECK(paths_of(expand_check_paths({r})) ==
        std::vector<std::string>{r + "/a.csv", r + "/b.json", r + "/m/a.json", r + "/m/n/deep.json",
                                 r + "/z/y.json"});
  SECTION("a trailing slash is not doubled; arguments keep their order; files pass as given") {
    CHECK(paths_of(expand_check_paths({r + "/m/", r + "/notes.txt", r + "/absent.json"})) ==
          std::vector<std::string>{r + "/m/a.json", r + "/m/n/deep.json", r + "/notes.txt",
                                   r + "/absent.json"});
  }
  SECTION("the same input gives the same list") {
    CHECK(paths_of(expand_check_paths({r})) == paths_of(expand_check_paths({r})));
  }
}

TEST_CASE("check_inputs.directory_nothing_check_error_silent", "[check_inputs]") {
  // check_inputs: a directory with nothing to check is an error, not a silent pass
  TempTree t;
  t.file("only.txt");
  t.file(".hidden/x.json");
  const auto in = expand_check_paths({t.root()});
  REQUIRE(in.size() == 1);
  CHECK(in[0].path == t.root());
  CHECK(in[0].error == t.root() + ": no *.json or *.csv file in this directory or below it");
}

TEST_CASE("check_inputs.symbolic_links_followed_loop_reported", "[check_inputs]") {
  // check_inputs: symbolic links are followed, a loop is reported once and skipped
  TempTree t;
  t.file("real/a.json");
  t.file("other/b.json");
  t.link("../other", "real/to-other");  // followed: a directory elsewhere
  t.file("real/sub/s.json");
  t.link("..", "real/sub/up");          // back to a directory being walked: a loop
  t.link("a.json", "real/alias.json");  // a link to a file is that file
  t.link("missing.json", "real/gone.json");
  t.link("missing-dir", "real/gone-dir");  // dangling, but not a name that would be checked
  const std::string r = t.path("real");
  const auto in = expand_check_paths({r});
  CHECK(paths_of(in) == std::vector<std::string>{r + "/a.json", r + "/alias.json",
                                                 "ERROR " + r + "/gone.json", r + "/sub/s.json",
                                                 "ERROR " + r + "/sub/up", r + "/to-other/b.json"});
  REQUIRE(in.size() == 6);
  CHECK(in[2].error == r + "/gone.json: a symbolic link to nothing (its target is missing)");
  CHECK(in[4].error == r + "/sub/up: symbolic link loop: this is the directory " + r +
                           " again, which is being walked (skipped)");
}

TEST_CASE("check_inputs.unreadable_directories_special_files_errors", "[check_inputs]") {
  // check_inputs: unreadable directories and special files are errors in place
  TempTree t;
  t.file("d/a.json");
  t.file("d/locked/x.json");
  t.file("d/z.json");
  REQUIRE(mkfifo(t.path("d/pipe.json").c_str(), 0600) == 0);
  t.lock("d/locked");
  const std::string d = t.path("d");
  const auto in = expand_check_paths({d});
  if (geteuid() == 0) {  // root reads any directory: only the FIFO is refused
    CHECK(paths_of(in) == std::vector<std::string>{d + "/a.json", d + "/locked/x.json",
                                                   "ERROR " + d + "/pipe.json", d + "/z.json"});
  } else {
    CHECK(paths_of(in) == std::vector<std::string>{d + "/a.json", "ERROR " + d + "/locked",
                                                   "ERROR " + d + "/pipe.json", d + "/z.json"});
    CHECK(in[1].error == d + "/locked: cannot read the directory: Permission denied");
  }
  for (const auto& i : in)
    if (i.path == d + "/pipe.json")
      CHECK(i.error == d + "/pipe.json: not a regular file (a device, FIFO or socket is not read)");
}
