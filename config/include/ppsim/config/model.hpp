#pragma once
// The model a config describes is model/'s (ppsim/model/model.hpp); config reads it into these
// types, and its code names them as its own.
#include "ppsim/model/model.hpp"

namespace ppsim::config {

using model::CostModel;
using model::Matching;
using model::MemoryOptions;
using model::Model;
using model::NcclStreams;
using model::NetworkOptions;
using model::P2pSemantics;
using model::StageCost;
using model::stream_options;
using model::to_string;
using model::validate_options;

}  // namespace ppsim::config
