#pragma once
// Real memory of the executor: an accounting allocator per rank, and buffers whose storage can be
// released while their metadata stays (Megatron's deallocate_output_tensor, FSDP2's free_storage).
// A read of released storage is reported with the op that tried it, never a read of garbage.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "ppsim/schedules/semantics.hpp"

namespace ppsim::real {

// A hazard found while running: what the simulator or validation calls `kind`, at (rank, pos).
class HazardError : public std::runtime_error {
 public:
  HazardError(std::string kind, int rank, int pos, const std::string& message)
      : std::runtime_error(message), kind_(std::move(kind)), rank_(rank), pos_(pos) {}
  const std::string& kind() const { return kind_; }
  int rank() const { return rank_; }
  int pos() const { return pos_; }

 private:
  std::string kind_;
  int rank_, pos_;
};

// "activation of stage 2 microbatch 1", for messages.
std::string describe(const schedules::TensorId& tensor);

// Live and peak bytes of one rank. Modelled bytes are what the memory model says a buffer holds;
// each allocation really takes ceil(modelled * scale) bytes (at least kMinReal), so that a 1 GiB
// activation can be stood for by 1 MiB on a laptop while the accounting stays exact. Used only
// by the rank's own thread.
class Allocator {
 public:
  explicit Allocator(double scale = 1.0) : scale_(scale) {}
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Real storage for `bytes` modelled bytes; released through release().
  std::unique_ptr<std::byte[]> allocate(std::int64_t bytes);
  void release(std::unique_ptr<std::byte[]>& storage, std::int64_t bytes);

  std::int64_t live() const { return live_; }  // modelled bytes
  std::int64_t peak() const { return peak_; }
  std::int64_t real_live() const { return real_live_; }
  std::int64_t real_peak() const { return real_peak_; }
  std::size_t real_size(std::int64_t bytes) const;

  static constexpr std::size_t kMinReal = 32;  // room for a Payload

 private:
  double scale_;
  std::int64_t live_ = 0, peak_ = 0, real_live_ = 0, real_peak_ = 0;
};

// What a buffer holds, stamped into the first bytes of its storage by the producer and checked by
// the consumer: a message delivered to the wrong receive shows in the data, as on real hardware.
struct Payload {
  schedules::TensorId tensor;
  std::uint64_t iteration = 0;
  friend bool operator==(const Payload&, const Payload&) = default;
};

// One communication buffer or activation stash. The metadata (tensor, size, who released the
// storage) outlives the storage. Storage is owned by the buffer and released only through
// release_storage() by the owning rank's thread; the transport reads and writes it only while a
// request holds the buffer.
class Buffer {
 public:
  Buffer(Allocator& allocator, schedules::TensorId tensor, std::int64_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const schedules::TensorId& tensor() const { return tensor_; }
  std::int64_t bytes() const { return bytes_; }
  bool has_storage() const { return storage_ != nullptr; }
  // The op that released the storage (empty while it is there).
  const std::string& released_by() const { return released_by_; }

  // Stamps / reads the payload, touching the whole storage. On released storage both throw
  // HazardError "released_storage_access" naming the op (at rank, pos) and the one that released
  // it. The op's name is made only then: formatting it for every op cost microseconds between a
  // GPU's ops.
  using OpName = std::function<std::string()>;
  void write(const Payload& p, int rank, int pos, const OpName& op);
  Payload read(int rank, int pos, const OpName& op) const;
  void write(const Payload& p, int rank, int pos, const std::string& op) {
    write(p, rank, pos, OpName([&op] { return op; }));
  }
  Payload read(int rank, int pos, const std::string& op) const {
    return read(rank, pos, OpName([&op] { return op; }));
  }
  // The transfer itself: this buffer's storage takes the bytes (as many as fit). Call only while
  // both have storage.
  void copy_from(std::span<const std::byte> bytes);
  std::span<const std::byte> data() const { return {storage_.get(), storage_ ? real_size_ : 0}; }

  // Frees the storage and keeps the metadata; `by` names the op (or event) for later reports.
  void release_storage(const std::string& by);

 private:
  Allocator& allocator_;
  schedules::TensorId tensor_;
  std::int64_t bytes_;
  std::unique_ptr<std::byte[]> storage_;
  std::size_t real_size_;
  std::string released_by_;
};

}  // namespace ppsim::real
