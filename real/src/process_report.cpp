#include "process_report.hpp"

#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace ppsim::real::detail {

namespace {

// Both ends are the same build on the same kind of machine (one binary under one launcher), so
// numbers and enums travel as their bytes; records field by field (their padding would carry
// whatever the stack held, and two packs of one report would differ); strings and vectors as a
// count, then their elements.
class Writer {
 public:
  template <typename T>
  void operator()(const T& value) {
    if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
      out_.append(reinterpret_cast<const char*>(&value), sizeof value);
    } else {
      fields(*this, value);
    }
  }
  void operator()(const std::string& s) {
    (*this)(static_cast<std::uint64_t>(s.size()));
    out_ += s;
  }
  template <typename T>
  void operator()(const std::vector<T>& values) {
    (*this)(static_cast<std::uint64_t>(values.size()));
    for (const auto& v : values) (*this)(v);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  void operator()(T& value) {
    if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
      need(sizeof value);
      std::memcpy(&value, in_.data() + at_, sizeof value);
      at_ += sizeof value;
    } else {
      fields(*this, value);
    }
  }
  void operator()(std::string& s) {
    const std::uint64_t n = count();
    s.assign(in_.data() + at_, n);
    at_ += n;
  }
  template <typename T>
  void operator()(std::vector<T>& values) {
    values.resize(count());
    for (auto& v : values) (*this)(v);
  }
  void done() const {
    if (at_ != in_.size()) throw std::runtime_error("a process report has trailing bytes");
  }

 private:
  // Each element takes at least a byte: a bad count cannot allocate without bound.
  std::uint64_t count() {
    std::uint64_t n = 0;
    (*this)(n);
    need(n);
    return n;
  }
  void need(std::uint64_t n) const {
    if (n > in_.size() - at_) throw std::runtime_error("a process report is truncated");
  }
  std::string_view in_;
  std::size_t at_ = 0;
};

// The fields of each record that is not plain bytes, in one list for both directions.
template <typename Io, typename D>
requires std::is_same_v<std::remove_const_t<D>, schedules::Diagnostic>
void fields(Io& io, D& d) {
  io(d.kind), io(d.rank), io(d.position), io(d.op), io(d.message), io(d.fatal);
}
template <typename Io, typename E>
requires std::is_same_v<std::remove_const_t<E>, record::WaitEdge>
void fields(Io& io, E& e) {
  io(e.rank), io(e.position), io(e.op), io(e.peer), io(e.waiting_for);
}
template <typename Io, typename T>
requires std::is_same_v<std::remove_const_t<T>, record::RankTimeline>
void fields(Io& io, T& t) {
  io(t.start), io(t.end), io(t.finished), io(t.stuck_pos), io(t.static_bytes);
}
template <typename Io, typename S>
requires std::is_same_v<std::remove_const_t<S>, record::Span>
void fields(Io& io, S& s) {
  io(s.rank), io(s.pos), io(s.kind), io(s.start), io(s.end);
}
template <typename Io, typename X>
requires std::is_same_v<std::remove_const_t<X>, record::TransferEvent>
void fields(Io& io, X& x) {
  io(x.src_rank), io(x.src_pos), io(x.dst_rank), io(x.dst_pos), io(x.start), io(x.end), io(x.bytes);
}
template <typename Io, typename C>
requires std::is_same_v<std::remove_const_t<C>, record::CounterSample>
void fields(Io& io, C& c) {
  io(c.rank), io(c.time), io(c.memory_bytes), io(c.inflight);
}
template <typename Io, typename R>
requires std::is_same_v<std::remove_const_t<R>, ProcessReport>
void fields(Io& io, R& r) {
  io(r.rank), io(r.timeline), io(r.spans), io(r.transfers), io(r.counters), io(r.diagnostics),
      io(r.edges), io(r.real_peak), io(r.failure);
}

}  // namespace

std::string pack(const ProcessReport& report) {
  Writer w;
  w(report);
  return w.take();
}

ProcessReport unpack(std::string_view bytes) {
  Reader in(bytes);
  ProcessReport r;
  in(r);
  in.done();
  return r;
}

}  // namespace ppsim::real::detail
