#pragma once
// The seconds of one microbatch's F, I and W on one GPU, by what they are spent on.

namespace ppsim::model {

// `tp`, `cp`, `ep`: what the op's length holds of each kind of communication once the overlap
// flags have hidden what they can.
struct OpTime {
  double compute = 0, tp = 0, cp = 0, ep = 0;
  double total() const { return compute + tp + cp + ep; }
  OpTime& operator+=(const OpTime& o) {
    compute += o.compute, tp += o.tp, cp += o.cp, ep += o.ep;
    return *this;
  }
  OpTime scaled(double k) const { return {compute * k, tp * k, cp * k, ep * k}; }
};

struct PassTimes {
  OpTime forward, backward_input, backward_weight;
  PassTimes& operator+=(const PassTimes& o) {
    forward += o.forward, backward_input += o.backward_input, backward_weight += o.backward_weight;
    return *this;
  }
  PassTimes scaled(double k) const {
    return {forward.scaled(k), backward_input.scaled(k), backward_weight.scaled(k)};
  }
};

}  // namespace ppsim::model
