#include "ppsim/base/output_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <vector>

#include "ppsim/base/huge_pages.hpp"

namespace ppsim::base {

namespace {

std::string reason(int err) {
  return std::strerror(err);
}

// Temporaries that a signal handler must remove. The handler may only read memory and call
// async-signal-safe functions (unlink, signal, raise), and may run on any thread: slots live in
// chunks that are allocated once (zeroed) and never freed or moved, published by an atomic
// pointer, so the handler sees a chunk whole or not at all. 32 x 64 slots: a `real
// --profile-trace` of 1024 ranks holds a temporary per rank until all are published.
constexpr int kChunkSlots = 64, kChunks = 32;
struct TempChunk {
  char path[kChunkSlots][PATH_MAX];
  volatile std::sig_atomic_t used[kChunkSlots];
};
std::atomic<TempChunk*> g_chunks[kChunks] = {};
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
bool g_handlers_installed = false;

extern "C" void remove_temporaries_and_die(int sig) {
  for (auto& slot : g_chunks) {
    TempChunk* c = slot.load(std::memory_order_acquire);
    if (c == nullptr) break;
    for (int i = 0; i < kChunkSlots; ++i)
      if (c->used[i]) ::unlink(c->path[i]);
  }
  // SA_RESETHAND restored the default action; the signal stays blocked until we return, then
  // kills us, so the parent sees "killed by SIGINT" (a shell reports 128 + N: 130, 143, 129).
  ::raise(sig);
}

void install_handlers() {
  if (g_handlers_installed) return;
  g_handlers_installed = true;
  for (int sig : kSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;  // ignored
    struct sigaction sa {};
    sa.sa_handler = remove_temporaries_and_die;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

// Blocks the cleanup signals while a temporary is created or renamed, so that the handler never
// sees a file that exists but is not registered, or a registered name that another file took.
class SignalBlock {
 public:
  SignalBlock() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kSignals) sigaddset(&set, sig);
    ::sigprocmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalBlock() { ::sigprocmask(SIG_SETMASK, &old_, nullptr); }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

 private:
  sigset_t old_;
};

int register_temp(const std::string& path) {  // call with signals blocked
  if (path.size() >= PATH_MAX) return -1;
  for (auto& slot : g_chunks) {
    TempChunk* c = slot.load(std::memory_order_acquire);
    if (c == nullptr) {  // zeroed pages: only the slots written are ever touched
      c = static_cast<TempChunk*>(std::calloc(1, sizeof(TempChunk)));
      if (c == nullptr) return -1;
      slot.store(c, std::memory_order_release);
    }
    for (int i = 0; i < kChunkSlots; ++i) {
      if (c->used[i]) continue;
      std::memcpy(c->path[i], path.c_str(), path.size() + 1);
      c->used[i] = 1;
      return i;
    }
  }
  return -1;
}

void unregister_temp(const std::string& path) {  // call with signals blocked
  for (auto& slot : g_chunks) {
    TempChunk* c = slot.load(std::memory_order_acquire);
    if (c == nullptr) break;
    for (int i = 0; i < kChunkSlots; ++i)
      if (c->used[i] && path == c->path[i]) c->used[i] = 0;
  }
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

mode_t current_umask() {  // the CLI is single-threaded; there is no way to read it otherwise
  const mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

}  // namespace

// ---- FdStreamBuf ----

namespace {
// O_DIRECT wants the buffer, the file offset and the size aligned to the logical block size:
// 512 bytes or 4 KiB.
constexpr std::size_t kDirectAlign = 4096;
constexpr std::size_t kStagingSize = std::size_t{4} << 20;  // O_DIRECT writes of 4 MiB
}  // namespace

void FdStreamBuf::AlignedDelete::operator()(char* p) const {
  ::operator delete[](p, std::align_val_t{kDirectAlign});
}

FdStreamBuf::FdStreamBuf(int fd, std::size_t buffer_size, bool early_writeback,
                         std::size_t direct_after)
    : fd_(fd),
      buffer_size_(std::max<std::size_t>(buffer_size, 1)),
      direct_after_(direct_after),
      staging_size_(early_writeback && direct_after != kNever ? kStagingSize : 0),
      buffer_(static_cast<char*>(
          ::operator new[](std::max(buffer_size_, staging_size_), std::align_val_t{kDirectAlign}))),
      early_writeback_(early_writeback),
      faulted_end_(buffer_.get()) {
  setp(buffer_.get(), buffer_.get() + buffer_size_);
}

// A 2.6 GB trace took about 1 s in fsync after it was written; started as it goes, the disk
// writes overlap the run. Only a hint: a failure here shows in write() or fsync() anyway.
void FdStreamBuf::start_writeback() {
  constexpr std::size_t kEvery = std::size_t{32} << 20;
  if (!early_writeback_ || written_ - writeback_ < kEvery) return;
#ifdef __linux__
  if (!staging_)  // what went out with O_DIRECT left no dirty pages
    ::sync_file_range(fd_, static_cast<off_t>(writeback_),
                      static_cast<off_t>(written_ - writeback_), SYNC_FILE_RANGE_WRITE);
#endif
  writeback_ = written_;
}

FdStreamBuf::~FdStreamBuf() {
  flush_all();
}

bool FdStreamBuf::write_all(const char* data, std::size_t size) {
  while (size > 0 && error_ == 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && staging_) {  // the file system refused O_DIRECT after all
        end_direct();
        continue;
      }
      error_ = errno;
    } else if (n == 0) {
      error_ = EIO;
    } else {
      data += n;
      size -= static_cast<std::size_t>(n);
      written_ += static_cast<std::size_t>(n);
    }
  }
  start_writeback();
  return error_ == 0;
}

// Past direct_after_ bytes, writes go past the page cache: from there on a full staging buffer
// at a time, at offsets and from an address that O_DIRECT accepts. Where the file system has no
// O_DIRECT (tmpfs, for one), nothing changes.
void FdStreamBuf::start_staging() {
#ifdef O_DIRECT
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0 && ::fcntl(fd_, F_SETFL, flags | O_DIRECT) == 0) {
    staging_ = true;
    setp(buffer_.get(), buffer_.get() + staging_size_);
    return;
  }
#endif
  staging_size_ = 0;
}

// Back to writes through the page cache, for good: after an unaligned write the file's offset
// is no longer aligned.
void FdStreamBuf::end_direct() {
  staging_size_ = 0;
  if (!staging_) return;
  staging_ = false;
#ifdef O_DIRECT
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0)
    set_error(errno);  // an unaligned write would fail anyway: say why now
#endif
}

// The staging buffer is faulted in a MiB ahead of the writes, by one call each (a fault per page
// costs ~12 us in this VM).
void FdStreamBuf::fault_in(const char* upto) {
  const auto done = static_cast<std::size_t>(faulted_end_ - buffer_.get());
  const auto want = static_cast<std::size_t>(upto - buffer_.get());
  if (want <= done) return;
  const std::size_t end = std::min(staging_size_, std::max(want, done + (std::size_t{1} << 20)));
  prefault(buffer_.get() + done, end - done);
  faulted_end_ = buffer_.get() + end;
}

bool FdStreamBuf::flush_all() {
  const auto size = static_cast<std::size_t>(pptr() - pbase());
  // A part of the staging buffer (the end of the output, or an explicit flush): as usual from
  // here on, since the file's offset will not stay aligned.
  if (staging_ && size < staging_size_ && size > 0) end_direct();
  const bool ok = write_all(pbase(), size);
  // After a failure: drop the rest.
  setp(buffer_.get(), buffer_.get() + (staging_ ? staging_size_ : buffer_size_));
  return ok;
}

FdStreamBuf::int_type FdStreamBuf::overflow(int_type ch) {
  if (!flush_all()) return traits_type::eof();
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  if (staging_) fault_in(pptr() + 1);
  *pptr() = traits_type::to_char_type(ch);
  pbump(1);
  return ch;
}

int FdStreamBuf::sync() {
  return flush_all() ? 0 : -1;
}

std::streamsize FdStreamBuf::xsputn(const char* s, std::streamsize n) {
  if (error_ != 0) return 0;
  auto size = static_cast<std::size_t>(n);
  const auto buffered = static_cast<std::size_t>(pptr() - pbase());
  if (!staging_ && staging_size_ > 0 && written_ + buffered + size >= direct_after_) {
    // Into staging: what is buffered, then as much of `s` as brings the offset to a multiple of
    // kDirectAlign, go out as usual.
    if (!flush_all()) return 0;
    const std::size_t head =
        std::min(size, (kDirectAlign - written_ % kDirectAlign) % kDirectAlign);
    if (!write_all(s, head)) return 0;
    if (written_ % kDirectAlign != 0) return n;  // all of `s` went; the next write tries again
    s += head;
    size -= head;
    start_staging();
  }
  if (staging_) {  // all through the aligned buffer, a full one at a time
    while (size > 0) {
      const std::size_t k = std::min(size, static_cast<std::size_t>(epptr() - pptr()));
      fault_in(pptr() + k);
      std::memcpy(pptr(), s, k);
      pbump(static_cast<int>(k));
      s += k;
      size -= k;
      if (pptr() == epptr() && !flush_all()) return 0;
      if (!staging_ && size > 0)  // O_DIRECT refused: the rest as usual
        return xsputn(s, static_cast<std::streamsize>(size)) > 0 ? n : 0;
    }
    return n;
  }
  if (size <= static_cast<std::size_t>(epptr() - pptr())) {
    std::memcpy(pptr(), s, size);
    pbump(static_cast<int>(size));
    return n;
  }
  if (!flush_all()) return 0;
  if (size >= buffer_size_) return write_all(s, size) ? n : 0;
  std::memcpy(pptr(), s, size);
  pbump(static_cast<int>(size));
  return n;
}

// ---- OutputFile ----

std::string resolve_output_path(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::vector<char> buf(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : PATH_MAX) + 1);
    const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size());
    if (n < 0)
      throw OutputError(fmt::format("{}: cannot read the symbolic link: {}", path, reason(errno)));
    std::string link(buf.data(), static_cast<std::size_t>(n));
    p = link.starts_with('/') ? link : parent_dir(p) + "/" + link;
  }
  throw OutputError(fmt::format("{}: cannot write: {}", path, reason(ELOOP)));
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ea != eb) return false;
  // Neither exists yet: the same name in the same directory (a link's target, resolved).
  std::string ta, tb;
  try {
    ta = resolve_output_path(a);
    tb = resolve_output_path(b);
  } catch (const OutputError&) {
    return false;
  }
  const std::filesystem::path pa(ta), pb(tb);
  if (pa.filename() != pb.filename()) return false;
  struct stat da {
  }, db{};
  const std::string dir_a = parent_dir(ta), dir_b = parent_dir(tb);
  if (::stat(dir_a.c_str(), &da) == 0 && ::stat(dir_b.c_str(), &db) == 0)
    return da.st_dev == db.st_dev && da.st_ino == db.st_ino;
  return std::filesystem::absolute(pa).lexically_normal() ==
         std::filesystem::absolute(pb).lexically_normal();
}

namespace {

// The descriptor a path names: /dev/stdin, /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N (or
// this process's pid); -1 for any other path. Such a path is written through the descriptor itself,
// so that `--trace /dev/stdout | cat` reaches the pipe and `>> file` appends (a rename would
// replace the file; /proc's links do not even name a path for a pipe).
int descriptor_of(const std::string& path) {
  if (path == "/dev/stdin") return 0;
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const std::string& prefix : {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
                                    fmt::format("/proc/{}/fd/", ::getpid())}) {
    if (!path.starts_with(prefix) || path.size() == prefix.size() ||
        path.size() > prefix.size() + 9)
      continue;
    int fd = 0;
    for (std::size_t i = prefix.size(); i < path.size(); ++i) {
      if (path[i] < '0' || path[i] > '9') return -1;
      fd = fd * 10 + (path[i] - '0');
    }
    return fd;
  }
  return -1;
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw OutputError("output file: the path is empty");
  if (const int fd = descriptor_of(path_); fd >= 0) {
    // The same open file (its offset, O_APPEND, a pipe): written in place, as a shell would.
    fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (fd_ < 0)
      throw OutputError(
          fmt::format("{}: cannot write: descriptor {}: {}", path_, fd, reason(errno)));
    if ((::fcntl(fd_, F_GETFL) & O_ACCMODE) == O_RDONLY) {
      close_fd();
      throw OutputError(
          fmt::format("{}: cannot write: descriptor {} is open for reading only", path_, fd));
    }
    target_ = path_;
    mode_ = OutputMode::direct;
    buf_ = std::make_unique<FdStreamBuf>(fd_, std::size_t{1} << 16, false, FdStreamBuf::kNever);
    stream_ = std::make_unique<std::ostream>(buf_.get());
    return;
  }
  target_ = resolve_output_path(path_);
  const std::string shown = target_ == path_ ? path_ : fmt::format("{} (-> {})", path_, target_);
  mode_t mode = 0666 & ~current_umask();
  struct stat st {};
  if (::lstat(target_.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      mode_ = OutputMode::direct;
    } else if (!S_ISREG(st.st_mode)) {
      throw OutputError(fmt::format(
          "{}: refusing to replace {} (only regular files are replaced; character devices and "
          "FIFOs are written to)",
          shown, kind_of(st.st_mode)));
    } else {
      // The rename would replace a file that a plain write could not: refuse the same way.
      if (::access(target_.c_str(), W_OK) != 0)
        throw OutputError(fmt::format("{}: cannot write: {}", shown, reason(errno)));
      mode = st.st_mode & 07777;
    }
  } else if (errno != ENOENT) {
    throw OutputError(fmt::format("{}: cannot write: {}", shown, reason(errno)));
  }

  if (mode_ == OutputMode::direct) {
    do {  // a FIFO blocks here until someone reads it, as a shell redirection does
      fd_ = ::open(target_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw OutputError(fmt::format("{}: cannot open: {}", shown, reason(errno)));
  } else {
    install_handlers();
    const std::string dir = parent_dir(target_);
    std::string templ = (dir == "/" ? "" : dir) + "/.ppsim-XXXXXX";
    int err = 0;
    {
      SignalBlock block;
      fd_ = ::mkostemp(templ.data(), O_CLOEXEC);
      err = errno;
      if (fd_ >= 0 && register_temp(templ) < 0) {
        ::close(fd_);
        ::unlink(templ.c_str());
        fd_ = -1;
        err = ENAMETOOLONG;
      }
    }
    if (fd_ < 0)
      throw OutputError(
          fmt::format("{}: cannot create a temporary file in {}: {}", shown, dir, reason(err)));
    temp_ = templ;
    if (::fchmod(fd_, mode) != 0) {
      err = errno;
      abandon();
      throw OutputError(
          fmt::format("{}: cannot set the mode of {}: {}", shown, temp_, reason(err)));
    }
  }
  // Large outputs: in this VM the kernel copied into fresh page-cache pages at 0.7 GB/s, and once
  // gigabytes were dirty it held the writer to the disk's 0.5 GB/s; with O_DIRECT the disk took
  // 0.9-1.7 GB/s and the copy was gone. Smaller ones are taken faster by the page cache, which
  // writes them back while the run goes on.
  const bool file = mode_ == OutputMode::replace;
  buf_ = std::make_unique<FdStreamBuf>(fd_, std::size_t{1} << 16, file,
                                       file ? FdStreamBuf::kDirectAfter : FdStreamBuf::kNever);
  stream_ = std::make_unique<std::ostream>(buf_.get());
}

OutputFile::~OutputFile() {
  if (!done_) abandon();
}

void OutputFile::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void OutputFile::abandon() {
  if (done_) return;
  done_ = true;
  finished_ = false;
  if (buf_) buf_->set_error(ECANCELED);  // nothing buffered goes out, not even into a FIFO
  stream_.reset();
  buf_.reset();
  close_fd();
  if (!temp_.empty()) {
    SignalBlock block;
    ::unlink(temp_.c_str());
    unregister_temp(temp_);
  }
}

void OutputFile::commit() {
  finish();
  publish();
}

void OutputFile::finish() {
  if (done_ || finished_) throw OutputError(fmt::format("{}: already written", path_));
  auto fail = [&](const std::string& what, int err) {
    abandon();
    throw OutputError(fmt::format("{}: {}: {}", path_, what, reason(err)));
  };
  stream_->flush();
  if (!buf_->flush_all() || buf_->error() != 0) fail("writing failed", buf_->error());
  if (mode_ == OutputMode::direct) {
    finished_ = done_ = true;
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0 && errno != EINTR)
      throw OutputError(fmt::format("{}: writing failed: {}", path_, reason(errno)));
    return;
  }
  // The data is on disk before the name points at it: a crash leaves the old file or the new one.
  if (::fsync(fd_) != 0 && errno != EINVAL) fail("writing failed", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 && errno != EINTR) fail("writing failed", errno);
  // The descriptor is closed: a set of many outputs holds names, not descriptors, until publish.
  stream_.reset();
  buf_.reset();
  finished_ = true;
}

void OutputFile::publish() {
  if (!finished_) finish();
  if (done_) return;  // a device: written by finish()
  SignalBlock block;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    abandon();
    throw OutputError(
        fmt::format("{}: cannot rename {} to {}: {}", path_, temp_, target_, reason(err)));
  }
  unregister_temp(temp_);
  done_ = true;
}

// ---- standard descriptors and stdout ----

bool reserve_standard_descriptors() {
  bool stdout_closed = false;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == 1) stdout_closed = true;
    // Lowest free descriptor: this is `fd`, because those below it are open by now.
    const int got = ::open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
    if (got >= 0 && got != fd) ::close(got);
  }
  return stdout_closed;
}

StandardOutput::StandardOutput() : buf_(1), old_(std::cout.rdbuf(&buf_)) {}

StandardOutput::~StandardOutput() {
  std::cout.flush();
  std::cout.rdbuf(old_);
}

std::string StandardOutput::check() {
  std::cout.flush();
  buf_.flush_all();
  if (buf_.error() != 0) return fmt::format("writing to standard output: {}", reason(buf_.error()));
  if (!std::cout) return "writing to standard output failed";
  return "";
}

}  // namespace ppsim::base
