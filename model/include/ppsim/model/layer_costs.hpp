#pragma once
// What one microbatch's F, I and W of a layer, of the embedding and of the LM head cost on one
// GPU, kernel by kernel (docs/MODEL.md, "Per-op costs"): Megatron's GEMMs by shape, the attention
// core (flash or not), the memory-bound operators around them, and the tensor-, context- and
// expert-parallel communication each op issues.
#include "ppsim/model/cluster.hpp"
#include "ppsim/model/collectives.hpp"
#include "ppsim/model/kernels.hpp"
#include "ppsim/model/pass_times.hpp"
#include "ppsim/model/transformer.hpp"

namespace ppsim::model {

// Everything a cost needs: the network, its layout and the machine.
struct CostContext {
  const Transformer& m;
  const Layout& layout;
  const Gpu& gpu;
  const KernelModel& kernels;
  const CollectiveModel& collectives;
  Parallel parallel;
};

PassTimes layer_times(const CostContext& c);      // one transformer layer, recompute included
PassTimes embedding_times(const CostContext& c);  // the word (and position) embedding
PassTimes head_times(const CostContext& c);       // final norm, LM head, cross-entropy loss

}  // namespace ppsim::model
