#include "ppsim/real/buffer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ppsim::real {

std::size_t Allocator::real_size(std::int64_t bytes) const {
  const double scaled = std::ceil(static_cast<double>(bytes) * scale_);
  return std::max(kMinReal, static_cast<std::size_t>(scaled));
}

std::unique_ptr<std::byte[]> Allocator::allocate(std::int64_t bytes) {
  const std::size_t n = real_size(bytes);
  // Not zeroed: the producer writes it (Buffer::write), which makes its pages resident.
  auto storage = std::make_unique_for_overwrite<std::byte[]>(n);
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  real_live_ += static_cast<std::int64_t>(n);
  real_peak_ = std::max(real_peak_, real_live_);
  return storage;
}

void Allocator::release(std::unique_ptr<std::byte[]>& storage, std::int64_t bytes) {
  if (!storage) return;
  storage.reset();
  live_ -= bytes;
  real_live_ -= static_cast<std::int64_t>(real_size(bytes));
}

std::string describe(const schedules::TensorId& t) {
  return fmt::format("{} of stage {} microbatch {}", t.backward ? "gradient" : "activation",
                     t.producer, t.microbatch);
}

Buffer::Buffer(Allocator& allocator, schedules::TensorId tensor, std::int64_t bytes)
    : allocator_(allocator),
      tensor_(tensor),
      bytes_(bytes),
      storage_(allocator.allocate(bytes)),
      real_size_(allocator.real_size(bytes)) {}

Buffer::~Buffer() {
  allocator_.release(storage_, bytes_);
}

void Buffer::write(const Payload& p, int rank, int pos, const OpName& op) {
  if (!storage_)
    throw HazardError("released_storage_access", rank, pos,
                      fmt::format("rank {} op {} ({}) writes the {} whose storage {} released",
                                  rank, pos, op(), describe(tensor_), released_by_));
  std::memcpy(storage_.get(), &p, sizeof p);
  // The rest of the storage, as a kernel writing its output would.
  std::memset(storage_.get() + sizeof p, static_cast<int>(p.tensor.microbatch & 0xff),
              real_size_ - sizeof p);
}

Payload Buffer::read(int rank, int pos, const OpName& op) const {
  if (!storage_)
    throw HazardError("released_storage_access", rank, pos,
                      fmt::format("rank {} op {} ({}) reads the {} whose storage {} released", rank,
                                  pos, op(), describe(tensor_), released_by_));
  Payload p;
  std::memcpy(&p, storage_.get(), sizeof p);
  return p;
}

void Buffer::copy_from(std::span<const std::byte> bytes) {
  std::memcpy(storage_.get(), bytes.data(), std::min(real_size_, bytes.size()));
}

void Buffer::release_storage(const std::string& by) {
  if (!storage_) return;
  allocator_.release(storage_, bytes_);
  released_by_ = by;
}

}  // namespace ppsim::real
