#pragma once
// Lowering: insert SEND/RECV/WAIT ops between the compute ops of a generated Program. Each style
// is one file under schedules/src/lowerings, registered by name.
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ppsim/base/registry.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/params.hpp"
#include "ppsim/schedules/program.hpp"
#include "ppsim/schedules/semantics.hpp"

namespace ppsim::schedules {

// The async style's `prefetch: "all"`: every receive posted at the start of its rank's list.
inline constexpr std::int64_t kPrefetchAll = -1;

struct LoweringOptions {
  std::string style = "async";
  Params params;  // the style's own parameters (async: prefetch)
  // Per rank, the time step of each compute op (PyTorch's compute_only CSV, where a blank cell is
  // an idle step). Empty: op i of a rank is at step i. Read by styles that align ranks by step
  // (torch) and ignored by the others.
  std::vector<std::vector<std::int32_t>> steps = {};
  // Wrap each batch of posts in GROUP_START / GROUP_END (comm.semantics nccl, where a batch is a
  // batch_isend_irecv group); under mpi groups change nothing, so none are written.
  bool groups = false;
  // Threads that lower ranks at once (styles with lower_rank); 0: PPSIM_JOBS or the machine's
  // cores, and only for programs large enough for a thread to pay. The result is the same in any
  // count.
  unsigned threads = 0;
};

// The transfers of one compute op: at most one per part (a composite has two), so no heap.
class OpsOfOne {
 public:
  void push_back(const Op& op) { ops_[size_++] = op; }
  const Op* begin() const { return ops_.data(); }
  const Op* end() const { return ops_.data() + size_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Op& front() const { return ops_[0]; }
  const Op& operator[](std::size_t i) const { return ops_[i]; }

 private:
  std::array<Op, 2> ops_{};
  std::size_t size_ = 0;
};

// What a style sees while it lowers one rank: the compute ops in, the output to append to. The
// ops go to `ops` and the WAITs' ids to `wait_ids` (lower() copies both into the output program
// at the end, in lists of exactly their size); composite parts go straight to the output's pool.
class RankLowering {
 public:
  RankLowering(const Program& in, Program& out, std::vector<Op>& ops,
               std::vector<std::int32_t>& wait_ids, int rank, const Params& params, bool groups)
      : in_(in),
        out_(out),
        ops_(ops),
        wait_ids_(wait_ids),
        sem_(in),
        rank_(rank),
        params_(params),
        groups_(groups) {}

  int rank() const { return rank_; }
  const OpList& compute() const { return in_.ops(rank_); }
  const Semantics& semantics() const { return sem_; }
  const Params& params() const { return params_; }

  // The receives a compute op needs / the sends of its outputs (one per part of a composite).
  OpsOfOne recvs_needed(const Op& c) const;
  OpsOfOne sends_after(const Op& c) const;

  // Appends an op; a composite from compute() brings its parts along.
  void emit(Op op);
  std::int32_t post(Op op) {  // emit as async, return its request id
    op.async = true;
    op.request = next_request_++;
    emit(op);
    return op.request;
  }
  // One WAIT on `ids` (sorted), then clears them; nothing when empty.
  void wait(std::vector<std::int32_t>& ids);
  // Brackets a batch of posts (several ops that the framework issues as one group) with
  // GROUP_START / GROUP_END when the options ask for groups. A batch of one op needs no group.
  void begin_batch() { batch_begin_ = ops_.size(); }
  void end_batch();

 private:
  const Program& in_;
  Program& out_;
  std::vector<Op>& ops_;
  std::vector<std::int32_t>& wait_ids_;
  Semantics sem_;
  int rank_;
  const Params& params_;
  bool groups_;
  std::size_t batch_begin_ = 0;
  std::int32_t next_request_ = 0;
};

struct LoweringStyle {
  std::string name;
  std::vector<std::string> aliases;
  std::string summary;
  std::vector<ParamSpec> params;
  std::function<void(RankLowering&)> lower_rank;
  // Styles that model particular schedules only: the error naming the rule `program` (or a
  // parameter) breaks, none when the style can lower it. lower() throws it.
  std::function<std::optional<ParameterError>(const Program&, const Params&)> refuses = {};
  // A style that must see all ranks at once (torch) sets this instead of lower_rank: it gets the
  // compute program, the options and its resolved parameters, and returns the lowered program.
  std::function<Program(const Program&, const LoweringOptions&, const Params&)> lower_program =
      nullptr;
};

// The comm styles, one file each under schedules/src/lowerings/.
using LoweringRegistry = base::Registry<LoweringStyle>;
void register_builtins(LoweringRegistry& registry);

// A lowering in words, its parameters as the style declares them: "async, prefetch all",
// "torch, merge_bw 0, runtime 0". An unknown style is named as it is.
std::string describe_lowering(const std::string& style, const Params& params);

// `compute` holds compute ops only; the result has the same compute order plus comm ops. Throws
// ParameterError (key "style" or the parameter's name).
Program lower(const Program& compute, const LoweringOptions& options);

}  // namespace ppsim::schedules
