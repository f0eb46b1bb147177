#include "ppsim/real/compute.hpp"
#include "ppsim/real/transport.hpp"

namespace ppsim::real {

// Defined in the files CMake generates from src/transports/*.cpp and src/computes/*.cpp.
void register_builtin_transports(TransportRegistry& registry);
void register_builtin_computes(ComputeRegistry& registry);

TransportRegistry& TransportRegistry::instance() {
  static TransportRegistry registry = [] {
    TransportRegistry r;
    register_builtin_transports(r);
    return r;
  }();
  return registry;
}
void TransportRegistry::add(TransportInfo info) {
  all_.push_back(std::move(info));
}
const TransportInfo* TransportRegistry::find(std::string_view name) const {
  for (const auto& t : all_)
    if (t.name == name) return &t;
  return nullptr;
}

ComputeRegistry& ComputeRegistry::instance() {
  static ComputeRegistry registry = [] {
    ComputeRegistry r;
    register_builtin_computes(r);
    return r;
  }();
  return registry;
}
void ComputeRegistry::add(ComputeInfo info) {
  all_.push_back(std::move(info));
}
const ComputeInfo* ComputeRegistry::find(std::string_view name) const {
  for (const auto& c : all_)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace ppsim::real
