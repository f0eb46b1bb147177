#pragma once
// Output files of the CLI (`run --trace PATH`, and any later output path), written so that a
// failure or a signal never leaves a partial file or a stray temporary behind, and stdout whose
// write failures are errors. Policy in docs/CLI.md ("Output files").
#include <cstddef>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <vector>

namespace ppsim::base {

// An output that could not be written: what() is "PATH: what happened: strerror". Exit code 2.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stream buffer over a file descriptor that remembers the errno of the first failed write (an
// ofstream loses it). It does not own the descriptor.
class FdStreamBuf : public std::streambuf {
 public:
  // early_writeback: the descriptor is a regular file that will be fsync'ed; the disk writes of
  // what is written start every few MiB, so that the fsync finds little left to wait for.
  // direct_after (with early_writeback): past that many bytes, the rest goes to the disk with
  // O_DIRECT, past the page cache, through an aligned staging buffer of 4 MiB (faulted in only
  // then); the output's last partial buffer is written as usual. A flush of a partly filled
  // staging buffer (std::flush, std::endl) ends O_DIRECT for the rest of the output, and only
  // writes of blocks (ostream::write) start it. kNever: never.
  static constexpr std::size_t kNever = static_cast<std::size_t>(-1);
  static constexpr std::size_t kDirectAfter = std::size_t{256} << 20;  // OutputFile's
  explicit FdStreamBuf(int fd, std::size_t buffer_size = 1 << 16, bool early_writeback = false,
                       std::size_t direct_after = kNever);
  ~FdStreamBuf() override;
  FdStreamBuf(const FdStreamBuf&) = delete;
  FdStreamBuf& operator=(const FdStreamBuf&) = delete;

  int error() const { return error_; }  // 0, or the errno of the first failure
  // Writes everything buffered; false (and error() set) when the descriptor refused it.
  bool flush_all();
  // Takes `err` as the first failure, e.g. EBADF for a descriptor known to be closed.
  void set_error(int err) {
    if (error_ == 0) error_ = err;
  }

 protected:
  int_type overflow(int_type ch) override;
  int sync() override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;

 private:
  bool write_all(const char* data, std::size_t size);
  void start_staging();
  void end_direct();
  void fault_in(const char* upto);

  void start_writeback();

  struct AlignedDelete {
    void operator()(char* p) const;
  };

  int fd_;
  int error_ = 0;
  std::size_t buffer_size_;
  std::size_t direct_after_;
  std::size_t staging_size_;  // 0: never O_DIRECT (or no longer)
  // Not zeroed: a small output touches only the pages it writes (a fault costs ~12 us in a VM).
  // The larger of the two sizes, aligned for O_DIRECT.
  std::unique_ptr<char[], AlignedDelete> buffer_;
  bool early_writeback_;
  bool staging_ = false;       // past kDirectAfter: fd_ has O_DIRECT, full staging buffers only
  const char* faulted_end_;    // staging: the buffer is faulted in up to here
  std::size_t written_ = 0;    // bytes written to fd_
  std::size_t writeback_ = 0;  // bytes whose writeback has been started
};

// How the target of an OutputFile is written.
enum class OutputMode {
  replace,  // a regular file or none yet: a temporary in the same directory, renamed at commit
  direct,   // a character device or a FIFO: written in place (a rename would replace the device)
};

// One output file. The constructor resolves symlinks (the link stays a link; its target is
// written), refuses to replace anything that is neither a regular file nor a character device nor
// a FIFO, and opens the temporary (`.ppsim-XXXXXX` next to the target, removed on every error
// path, on destruction without commit and on SIGINT/SIGTERM/SIGHUP/SIGPIPE) or the device.
// Throws OutputError.
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  ~OutputFile();  // without commit(): the temporary is removed, the target untouched
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return *stream_; }
  // Flushes, syncs and renames the temporary over the target (or closes the device). Throws
  // OutputError; the temporary is gone either way. commit() is finish() then publish().
  void commit();
  // Flushes, syncs and closes the temporary (a device: writes the rest and closes it), so that
  // publish() has only the rename left. Throws OutputError (the temporary is then gone).
  void finish();
  // Renames the finished temporary over the target; nothing for a device. Throws OutputError.
  void publish();
  bool finished() const { return finished_; }
  bool abandoned() const { return done_ && !finished_; }
  // Gives up: removes the temporary, leaves the target as it was.
  void abandon();

  const std::string& path() const { return path_; }       // as given
  const std::string& target() const { return target_; }   // after following symlinks
  const std::string& temporary() const { return temp_; }  // empty in direct mode
  OutputMode mode() const { return mode_; }

 private:
  void close_fd();

  std::string path_, target_, temp_;
  OutputMode mode_ = OutputMode::replace;
  int fd_ = -1;
  bool done_ = false;
  bool finished_ = false;
  std::unique_ptr<FdStreamBuf> buf_;
  std::unique_ptr<std::ostream> stream_;
};

// The outputs of one command, published all or none: each is opened when added (a bad path fails
// before anything runs), and commit() renames them only once every one is written and synced; a
// failure before that leaves every target as it was (devices and FIFOs, written in place, are
// finished after the files and before any rename). Destroyed without commit(): all abandoned.
class OutputSet {
 public:
  OutputSet() = default;
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // Opens `path` (OutputFile) for the option `option`; an OutputError names both: "OPTION PATH:
  // what happened". The file stays valid until the set is destroyed.
  OutputFile& add(const std::string& option, const std::string& path);
  // Finishes every file not finished yet (OutputFile::finish), then publishes them all. Throws
  // OutputError naming the option; then every temporary is gone and no target was replaced.
  void commit();
  void abandon();  // every temporary removed, every target untouched
  bool empty() const { return files_.empty(); }

 private:
  struct Entry {
    std::string option;
    std::unique_ptr<OutputFile> file;
  };
  [[noreturn]] void fail(const Entry& e, const OutputError& error);
  std::vector<Entry> files_;
};

// Follows symlinks in the last component of `path` (relative links against the link's directory)
// until it names something that is not a link, or nothing. Throws OutputError on a loop.
std::string resolve_output_path(const std::string& path);

// Whether two paths name one file: by device and inode when both exist, else by the absolute,
// normalized form of where each leads (resolve_output_path, and the directory's identity), so that
// `o.svg`, `./o.svg` and a link to it are one file before it is written.
bool same_file(const std::string& a, const std::string& b);

// Makes sure descriptors 0, 1 and 2 are open, so that files opened later cannot take their place
// (a trace file must never receive what was meant for a closed stdout). A closed one becomes
// /dev/null opened for the other direction, so writing to a closed stdout still fails (EBADF).
// Returns whether stdout was closed.
bool reserve_standard_descriptors();

// stdout through an FdStreamBuf for the life of this object: std::cout's failures keep their
// errno. check() flushes and returns the error message ("writing to standard output: REASON"),
// or "" when all went out.
class StandardOutput {
 public:
  StandardOutput();
  ~StandardOutput();
  StandardOutput(const StandardOutput&) = delete;
  StandardOutput& operator=(const StandardOutput&) = delete;
  std::string check();

 private:
  FdStreamBuf buf_;
  std::streambuf* old_;
};

}  // namespace ppsim::base
