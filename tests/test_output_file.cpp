// The CLI's output files (cli/output_file.hpp): written through symlinks, never replacing what is
// not a regular file, devices and FIFOs written in place, no temporary left on any path; and the
// shortening of echoed tokens (cli/messages.hpp).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "messages.hpp"
#include "ppsim/base/excerpt.hpp"
#include "ppsim/base/output_file.hpp"

using ppsim::base::OutputError;
using ppsim::base::OutputFile;
using ppsim::base::OutputMode;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "ppsim-of-XXXXXX").string();
    path = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(path), {}));
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("output_file.outputfile_creates_new_file_only") {
  // OutputFile creates a new file only at commit, with no temporary left
  TempDir dir;
  const auto target = dir.path / "t.json";
  {
    OutputFile out(target.string());
    CHECK(out.mode() == OutputMode::replace);
    CHECK(fs::path(out.temporary()).parent_path() == dir.path);
    CHECK(fs::path(out.temporary()).filename().string().starts_with(".ppsim-"));
    out.stream() << "hello";
    CHECK_FALSE(fs::exists(target));
    out.commit();
  }
  CHECK(slurp(target) == "hello");
  CHECK(dir.entries() == 1);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((fs::status(target).permissions() & fs::perms::all) ==
        static_cast<fs::perms>(0666 & ~mask));
}

TEST_CASE("output_file.outputfile_without_commit_leaves_old") {
  // OutputFile without commit leaves the old file and no temporary
  TempDir dir;
  const auto target = dir.path / "t.json";
  std::ofstream(target) << "old";
  fs::permissions(target, static_cast<fs::perms>(0640));
  {
    OutputFile out(target.string());
    out.stream() << std::string(1 << 20, 'x');
  }
  CHECK(slurp(target) == "old");
  CHECK(dir.entries() == 1);
  {
    OutputFile out(target.string());
    out.stream() << "new";
    out.commit();
  }
  CHECK(slurp(target) == "new");
  CHECK((fs::status(target).permissions() & fs::perms::all) == static_cast<fs::perms>(0640));
}

TEST_CASE("output_file.outputfile_writes_through_chain_symlinks") {
  // OutputFile writes through a chain of symlinks and keeps them links
  TempDir dir;
  fs::create_directory(dir.path / "real");
  const auto target = dir.path / "real" / "t.json";
  fs::create_symlink("real/t.json", dir.path / "link1");  // relative, dangling at first
  fs::create_symlink(dir.path / "link1", dir.path / "link2");
  for (const char* text : {"first", "second"}) {
    OutputFile out((dir.path / "link2").string());
    CHECK(out.target() == (dir.path / "real/t.json").string());
    out.stream() << text;
    out.commit();
    CHECK(fs::is_symlink(dir.path / "link1"));
    CHECK(fs::is_symlink(dir.path / "link2"));
    CHECK(slurp(target) == text);
  }
  CHECK(dir.entries() == 3);
  CHECK(std::distance(fs::directory_iterator(dir.path / "real"), {}) == 1);
}

TEST_CASE("output_file.outputfile_refuses_symlink_loop_directory") {
  // OutputFile refuses a symlink loop, a directory and a socket, touching nothing
  TempDir dir;
  fs::create_symlink("b", dir.path / "a");
  fs::create_symlink("a", dir.path / "b");
  CHECK_THROWS_WITH(OutputFile((dir.path / "a").string()),
                    Catch::Contains("Too many levels of symbolic links"));
  fs::create_directory(dir.path / "d");
  CHECK_THROWS_WITH(OutputFile((dir.path / "d").string()),
                    Catch::Contains("refusing to replace a directory"));
  const auto sock_path = dir.path / "s";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock_path.c_str());
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    CHECK_THROWS_WITH(OutputFile(sock_path.string()),
                      Catch::Contains("refusing to replace a socket"));
    CHECK(fs::is_socket(sock_path));
  }
  if (fd >= 0) ::close(fd);
  CHECK(fs::is_directory(dir.path / "d"));
  CHECK(dir.entries() == 4);
}

TEST_CASE("output_file.outputfile_names_reason_when_directory") {
  // OutputFile names the reason when the directory is missing
  TempDir dir;
  CHECK_THROWS_WITH(OutputFile((dir.path / "no" / "t.json").string()),
                    Catch::Contains("No such file or directory"));
  CHECK_THROWS_AS(OutputFile(""), OutputError);
}

TEST_CASE("output_file.outputfile_writes_character_device_place") {
  // OutputFile writes a character device in place
  if (::access("/dev/null", W_OK) != 0) return;
  OutputFile out("/dev/null");
  CHECK(out.mode() == OutputMode::direct);
  CHECK(out.temporary().empty());
  out.stream() << "discarded";
  out.commit();
  CHECK(fs::is_character_file("/dev/null"));
}

TEST_CASE("output_file.outputfile_reports_full_device_reason") {
  // OutputFile reports a full device with its reason and keeps no partial file
  if (::access("/dev/full", W_OK) != 0) return;
  OutputFile out("/dev/full");
  out.stream() << std::string(1 << 17, 'x');
  CHECK_THROWS_WITH(out.commit(), Catch::Contains("No space left on device"));
}

TEST_CASE("output_file.outputfile_accepts_file_name_length") {
  // OutputFile accepts a file name at the length limit
  TempDir dir;
  const auto target = dir.path / std::string(255, 'n');
  OutputFile out(target.string());
  out.stream() << "long";
  out.commit();
  CHECK(slurp(target) == "long");
  CHECK(dir.entries() == 1);
}

TEST_CASE("output_file.excerpt_cuts_long_tokens_escapes") {
  // excerpt cuts long tokens and escapes binary bytes
  auto printable = [](std::string_view s, std::size_t max = 80) {
    return ppsim::base::excerpt(s, max);
  };
  CHECK(printable("abc") == "abc");
  CHECK(printable(std::string(100, 'a')) == std::string(80, 'a') + "…");
  CHECK(printable(std::string("a\x01\xff", 3)) == "a\\x01\\xff");
  CHECK(printable("ü€") == "ü€");
  CHECK(printable(std::string(5, '\0'), 3) == "\\x00\\x00\\x00…");
  CHECK(ppsim::cli::shorten_long_words("bad: " + std::string(200, 'z') + " end") ==
        "bad: " + std::string(80, 'z') + "… end");
}

TEST_CASE("output_file.outputfile_writes_file_many_writeback") {
  // OutputFile writes a file of many writeback intervals whole
  // Past every 32 MiB the disk writes of what came before are started (a hint to the kernel):
  // the bytes must still all arrive, in order.
  TempDir dir;
  const auto target = dir.path / "big.bin";
  std::string chunk(std::size_t{3} << 20, '\0');
  std::uint64_t x = 88172645463325252ull;
  std::uint64_t sum = 0;
  {
    OutputFile out(target.string());
    for (int i = 0; i < 30; ++i) {  // 90 MiB in writes of 3 MiB, then one small tail
      for (auto& c : chunk) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        c = static_cast<char>(x);
        sum = sum * 31 + static_cast<unsigned char>(c);
      }
      out.stream().write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    }
    out.stream() << "end";
    out.commit();
  }
  for (char c : std::string("end")) sum = sum * 31 + static_cast<unsigned char>(c);
  const std::string got = slurp(target);
  REQUIRE(got.size() == 30 * chunk.size() + 3);
  std::uint64_t check = 0;
  for (char c : got) check = check * 31 + static_cast<unsigned char>(c);
  CHECK(check == sum);
}

namespace {

// Whether files in `dir` can be opened with O_DIRECT (not on tmpfs, for one).
bool direct_io_works(const fs::path& dir) {
#ifdef O_DIRECT
  const auto probe = dir / "probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0600);
  if (fd < 0) return false;
  ::close(fd);
  fs::remove(probe);
  return true;
#else
  (void)dir;
  return false;
#endif
}

bool has_direct_flag(int fd) {
#ifdef O_DIRECT
  return (::fcntl(fd, F_GETFL) & O_DIRECT) != 0;
#else
  (void)fd;
  return false;
#endif
}

}  // namespace

TEST_CASE("output_file.fdstreambuf_writes_past_page_cache") {
  // FdStreamBuf writes past the page cache after its threshold and keeps every byte in order
  // Past direct_after bytes the rest goes out with O_DIRECT, a full 4 MiB staging buffer at a
  // time; the last partial buffer, or one flushed early, as usual. Writes of every size, 1 byte
  // to 3 MiB, cross the threshold (unaligned: 1 MiB + 123) at whatever offset they come.
  TempDir dir;
  const bool direct = direct_io_works(dir.path);
  if (!direct) WARN("no O_DIRECT in " << dir.path << ": only the way without it is tested");
  for (const bool flush_early : {false, true}) {
    CAPTURE(flush_early, direct);
    const auto target = dir.path / (flush_early ? "flushed.bin" : "whole.bin");
    const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    std::string all;
    {
      ppsim::base::FdStreamBuf buf(fd, 1 << 16, true, (std::size_t{1} << 20) + 123);
      std::ostream out(&buf);
      std::uint64_t x = flush_early ? 7 : 3;
      bool saw_direct = false, flushed = false;
      while (all.size() < (std::size_t{22} << 20)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::size_t n = x % 4 == 0 ? x % (3 << 20) : x % 5000;  // large and small writes
        std::string chunk(n, '\0');
        for (auto& c : chunk) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          c = static_cast<char>(x);
        }
        out.write(chunk.data(), static_cast<std::streamsize>(n));
        if (x % 7 == 0) out.put('#'), chunk += '#';  // and single characters
        all += chunk;
        saw_direct = saw_direct || has_direct_flag(fd);
        if (flush_early && !flushed && all.size() > (std::size_t{12} << 20)) {
          out.flush();  // a partial staging buffer: as usual from here on
          flushed = true;
          CHECK_FALSE(has_direct_flag(fd));
        }
      }
      CHECK(saw_direct == direct);
      out.put('!');  // a partial staging buffer at the end, whatever came before
      all += '!';
      REQUIRE(buf.flush_all());
      CHECK_FALSE(has_direct_flag(fd));  // the end is written as usual
      CHECK(buf.error() == 0);
    }
    ::close(fd);
    const std::string got = slurp(target);
    REQUIRE(got.size() == all.size());
    CHECK(got == all);
  }
}

TEST_CASE("output_file.outputset_publishes_all_together") {
  // OutputSet: nothing appears before commit, every file appears at commit, no temporary left
  TempDir dir;
  std::ofstream(dir.path / "b.txt") << "old b";
  {
    ppsim::base::OutputSet set;
    set.add("--one", (dir.path / "a.txt").string()).stream() << "new a";
    set.add("--two", (dir.path / "b.txt").string()).stream() << "new b";
    CHECK(!fs::exists(dir.path / "a.txt"));
    CHECK(slurp(dir.path / "b.txt") == "old b");
    set.commit();
    CHECK(set.empty());
  }
  CHECK(slurp(dir.path / "a.txt") == "new a");
  CHECK(slurp(dir.path / "b.txt") == "new b");
  CHECK(dir.entries() == 2);
}

TEST_CASE("output_file.outputset_bad_path_abandons_the_others") {
  // A path that cannot be opened fails at add(), naming its option, and drops what was opened
  TempDir dir;
  std::ofstream(dir.path / "a.txt") << "old a";
  ppsim::base::OutputSet set;
  set.add("-o", (dir.path / "a.txt").string()).stream() << "new a";
  CHECK_THROWS_WITH(set.add("--report", (dir.path / "no" / "r.html").string()),
                    Catch::StartsWith("--report " + (dir.path / "no" / "r.html").string() + ": ") &&
                        Catch::Contains("No such file or directory"));
  CHECK(set.empty());
  CHECK(slurp(dir.path / "a.txt") == "old a");
  CHECK(dir.entries() == 1);  // no .ppsim-XXXXXX
}

TEST_CASE("output_file.outputset_full_device_publishes_none") {
  // A device that fails at commit (here /dev/full) leaves every file as it was, whatever the order
  if (!fs::exists("/dev/full")) return;
  TempDir dir;
  std::ofstream(dir.path / "a.txt") << "old a";
  for (const bool device_first : {true, false}) {
    ppsim::base::OutputSet set;
    if (device_first) set.add("--report", "/dev/full").stream() << "report";
    set.add("-o", (dir.path / "a.txt").string()).stream() << "new a";
    set.add("--svg", (dir.path / "n.svg").string()).stream() << "svg";
    if (!device_first) set.add("--report", "/dev/full").stream() << "report";
    CHECK_THROWS_WITH(set.commit(), Catch::StartsWith("--report /dev/full: ") &&
                                        Catch::Contains("No space left on device"));
    CHECK(slurp(dir.path / "a.txt") == "old a");
    CHECK(!fs::exists(dir.path / "n.svg"));
    CHECK(dir.entries() == 1);
  }
}

TEST_CASE("output_file.outputset_holds_many_finished_files") {
  // Finished outputs keep a name, not a descriptor: 1100 files (more than a default descriptor
  // limit of 1024) are published together, and abandoning them instead removes every temporary
  TempDir dir;
  for (const bool publish : {false, true}) {
    ppsim::base::OutputSet set;
    for (int i = 0; i < 1100; ++i) {
      OutputFile& f =
          set.add("--profile-trace", (dir.path / ("rank" + std::to_string(i))).string());
      f.stream() << i;
      f.finish();
      CHECK(f.finished());
    }
    CHECK(dir.entries() == 1100u);  // the temporaries
    if (publish)
      set.commit();
    else
      set.abandon();
    CHECK(dir.entries() == (publish ? 1100u : 0u));
  }
  CHECK(slurp(dir.path / "rank1099") == "1099");
}

TEST_CASE("output_file.outputset_skips_abandoned_file") {
  // A file given up on inside a set (an invalid run's trace) is neither written nor an error
  TempDir dir;
  ppsim::base::OutputSet set;
  OutputFile& a = set.add("--trace", (dir.path / "t.json").string());
  set.add("--svg", (dir.path / "t.svg").string()).stream() << "svg";
  a.abandon();
  CHECK(a.abandoned());
  set.commit();
  CHECK(!fs::exists(dir.path / "t.json"));
  CHECK(slurp(dir.path / "t.svg") == "svg");
  CHECK(dir.entries() == 1);
}
