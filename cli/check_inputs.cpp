#include "check_inputs.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

namespace ppsim::cli {

namespace {

bool checked_name(const std::string& name) {
  for (const std::string_view ext : {".json", ".csv"})
    if (name.size() > ext.size() && name.ends_with(ext)) return true;
  return false;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.ends_with('/') ? dir + name : dir + "/" + name;
}

class Walker {
 public:
  explicit Walker(std::vector<CheckInput>& out) : out_(out) {}

  // Walks the directory `path` (already stat'ed as `st`); returns how many entries it added.
  std::size_t walk(const std::string& path, const struct stat& st) {
    for (const auto& [dev, ino, where] : stack_)
      if (dev == st.st_dev && ino == st.st_ino) {
        add_error(path, fmt::format("symbolic link loop: this is the directory {} again, which "
                                    "is being walked (skipped)",
                                    where));
        return 1;
      }
    // A directory reached again by another path (symbolic links in a diamond) is not walked
    // again: its files are listed once, and the walk stays linear in the directories.
    if (!walked_.insert({st.st_dev, st.st_ino}).second) return 0;
    std::vector<std::string> names;
    {
      errno = 0;
      std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
      if (!dir) {
        add_error(path, fmt::format("cannot read the directory: {}", std::strerror(errno)));
        return 1;
      }
      while (true) {
        errno = 0;
        const dirent* e = readdir(dir.get());
        if (e == nullptr) {
          if (errno != 0) {
            add_error(path, fmt::format("cannot read the directory: {}", std::strerror(errno)));
            return 1;
          }
          break;
        }
        std::string name = e->d_name;
        if (!name.empty() && name[0] != '.') names.push_back(std::move(name));
      }
    }
    std::sort(names.begin(), names.end());
    stack_.push_back({st.st_dev, st.st_ino, path});
    std::size_t added = 0;
    for (const auto& name : names) {
      const std::string child = join(path, name);
      struct stat cs {};
      if (stat(child.c_str(), &cs) != 0) {
        const int err = errno;
        struct stat ls {};
        const bool link = lstat(child.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode);
        // A dangling link matters only where it would have been checked.
        if (link && err == ENOENT && !checked_name(name)) continue;
        add_error(child, link && err == ENOENT
                             ? std::string("a symbolic link to nothing (its target is missing)")
                             : fmt::format("cannot read: {}", std::strerror(err)));
        ++added;
      } else if (S_ISDIR(cs.st_mode)) {
        added += walk(child, cs);
      } else if (checked_name(name)) {
        if (S_ISREG(cs.st_mode))
          out_.push_back({child, ""});
        else
          add_error(child, "not a regular file (a device, FIFO or socket is not read)");
        ++added;
      }
    }
    stack_.pop_back();
    return added;
  }

 private:
  void add_error(const std::string& path, const std::string& what) {
    out_.push_back({path, fmt::format("{}: {}", path, what)});
  }

  struct Visiting {
    dev_t dev;
    ino_t ino;
    std::string path;
  };
  std::vector<CheckInput>& out_;
  std::vector<Visiting> stack_;
  std::set<std::pair<dev_t, ino_t>> walked_;
};

}  // namespace

std::vector<CheckInput> expand_check_paths(const std::vector<std::string>& arguments) {
  std::vector<CheckInput> out;
  for (const auto& arg : arguments) {
    struct stat st {};
    if (arg.empty() || stat(arg.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      out.push_back({arg, ""});  // a file, or nothing: the config loader says what is wrong
      continue;
    }
    if (Walker(out).walk(arg, st) == 0)
      out.push_back(
          {arg, fmt::format("{}: no *.json or *.csv file in this directory or below it", arg)});
  }
  return out;
}

}  // namespace ppsim::cli
