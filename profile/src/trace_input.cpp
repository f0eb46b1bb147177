#include "trace_input.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace ppsim::profile::detail {

TraceInput::TraceInput(const std::string& path, const ReadLimits& limits)
    : source_(path), limits_(limits) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw ProfileError(fmt::format("{}: cannot open the trace: {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw ProfileError(fmt::format("{}: is a directory, not a trace", path));
  // A regular file over the bound even compressed is refused before reading (a pipe is read).
  if (S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) > limits_.max_bytes)
    throw ProfileError(fmt::format("{}: over {} bytes", path, limits_.max_bytes));
  // zlib reads a file that is not gzip as it is ("transparent"), so one path reads both.
  gz_ = gzopen(path.c_str(), "rb");
  if (!gz_)
    throw ProfileError(fmt::format("{}: cannot open the trace: {}", path, std::strerror(errno)));
  gzbuffer(gz_, 1 << 17);
  setg(buffer_.data(), buffer_.data(), buffer_.data());
}

TraceInput::TraceInput(std::string_view text, const std::string& source, const ReadLimits& limits)
    : source_(source), limits_(limits) {
  if (text.size() > limits_.max_bytes)
    throw ProfileError(fmt::format("{}: over {} bytes", source, limits_.max_bytes));
  // (The parser only reads: the cast gives streambuf the pointers it wants.)
  char* begin = const_cast<char*>(text.data());
  setg(begin, begin, begin + text.size());
}

TraceInput::~TraceInput() {
  if (gz_) gzclose(gz_);
}

void TraceInput::gap_error() const {
  throw ProfileError(
      fmt::format("{}: over {} bytes of whitespace or in one JSON token (at byte {}): not a trace",
                  source_, limits_.max_gap, last_mark_));
}

void TraceInput::mark() {
  const std::size_t at = position();
  if (at - last_mark_ > limits_.max_gap) gap_error();
  last_mark_ = at;
}

TraceInput::int_type TraceInput::underflow() {
  if (!gz_) return traits_type::eof();
  consumed_ += static_cast<std::size_t>(egptr() - eback());
  setg(buffer_.data(), buffer_.data(), buffer_.data());
  // Checked before each refill: a run that long is refused having read at most 64 KiB more.
  if (consumed_ - last_mark_ > limits_.max_gap) gap_error();
  const int n = gzread(gz_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
  if (n < 0) throw ProfileError(fmt::format("{}: not a readable gzip file (corrupt?)", source_));
  if (n == 0) {
    // zlib ends a gzip cut short (its end or its CRC trailer missing) as if it were whole.
    int err = Z_OK;
    gzerror(gz_, &err);
    if (err == Z_BUF_ERROR)
      throw ProfileError(fmt::format("{}: a truncated gzip file (its end is missing)", source_));
    return traits_type::eof();
  }
  const std::size_t after = consumed_ + static_cast<std::size_t>(n);
  if (after > limits_.max_bytes)
    throw ProfileError(fmt::format("{}: over {} bytes uncompressed", source_, limits_.max_bytes));
  if (!gzdirect(gz_) && after > limits_.ratio_grace) {
    const auto compressed = static_cast<double>(std::max<z_off_t>(gzoffset(gz_), 1));
    if (static_cast<double>(after) > limits_.max_ratio * compressed)
      throw ProfileError(fmt::format(
          "{}: expands over {:g} times its compressed size ({} bytes from {}): not a trace",
          source_, limits_.max_ratio, after, static_cast<std::size_t>(compressed)));
  }
  setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
  return traits_type::to_int_type(buffer_[0]);
}

}  // namespace ppsim::profile::detail
