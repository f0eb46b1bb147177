#include "ppsim/model/model.hpp"

namespace ppsim::model {

std::string_view to_string(P2pSemantics s) {
  return s == P2pSemantics::mpi ? "mpi" : "nccl";
}
std::string_view to_string(NcclStreams s) {
  return s == NcclStreams::communicator ? "communicator" : "peer";
}

std::string_view to_string(Matching m) {
  return m == Matching::tag ? "tag" : "fifo";
}

}  // namespace ppsim::model
