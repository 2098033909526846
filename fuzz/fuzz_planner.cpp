// libFuzzer target: the planner and the host backend against a naive reference interpreter.
//
// The fuzzer's bytes choose a destination shape and layout, operand shapes (broadcast against the
// destination, or deliberately not), strided layouts, dtypes, aliasing between the destination and
// an input (in-place, shifted, interleaved), an expression skeleton with run-time chosen operators,
// and for reductions the axes and keepdim. fusex::host::eval runs it; this file re-computes every
// destination element in double precision with its own index arithmetic and checks:
//   - fusex throws shape_error exactly when some operand does not broadcast (message names it);
//   - fusex never accepts a destination that overlaps itself or an input other than element for
//     element (checked by brute force over the bytes);
//   - every destination element equals the reference (leaf values are small multiples of 1/4, so
//     the arithmetic is exact in float32 and the comparison is exact up to the destination's
//     rounding);
//   - no byte outside the destination's elements changes; AddressSanitizer sees every buffer at its
//     exact size, so reads or writes one element past an operand are caught.
// Any violation aborts (a crash for libFuzzer). Build: fuzz/CMakeLists.txt; run: tools/ci/fuzz_gate.sh.
#include <fusex/fusex.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_planner: %s: %s\n", what, detail.c_str());
  std::abort();
}

struct reader {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int range(int lo, int hi) { return lo + byte() % (hi - lo + 1); }  // inclusive
};

// ---- dtypes ------------------------------------------------------------------------------------
template <class T>
double to_d(T x) {
  if constexpr (std::is_same_v<T, fusex::half>) return static_cast<double>(__half2float(x));
  else return static_cast<double>(x);
}
template <class T>
T from_d(double x) {
  if constexpr (std::is_same_v<T, fusex::half>) return __double2half(x);
  else return static_cast<T>(x);
}

// ---- an operand: one buffer (exact size), a byte offset, shape and element strides ----------------
struct operand {
  int elem = 4;
  std::int64_t offset = 0;  // in elements, from the start of its buffer
  fusex::shape_t shape;
  fusex::strides_t strides;
  int buffer = 0;  // index into the buffers
};

std::int64_t numel_of(const fusex::shape_t& s) {
  std::int64_t n = 1;
  for (std::int64_t e : s) n *= e;
  return n;
}
std::int64_t span_of(const operand& o) {  // elements from offset to the last reachable one, + 1
  if (numel_of(o.shape) == 0) return 0;
  std::int64_t m = 0;
  for (int d = 0; d < o.shape.rank(); ++d) m += (o.shape[d] - 1) * o.strides[d];
  return m + 1;
}

// Strides for `shape`: a permuted, possibly padded, row-major layout; or (random) arbitrary small
// strides, which may overlap themselves.
fusex::strides_t make_strides(reader& r, const fusex::shape_t& s, bool allow_random) {
  const int rank = s.rank();
  fusex::strides_t st = fusex::dims::filled(rank, 0);
  const int mode = r.range(0, 7);
  if (allow_random && mode == 7) {
    for (int d = 0; d < rank; ++d) st[d] = r.range(0, 6);
    return st;
  }
  int perm[fusex::max_rank];
  for (int d = 0; d < rank; ++d) perm[d] = d;
  if (mode >= 4)
    for (int d = rank - 1; d > 0; --d) std::swap(perm[d], perm[r.range(0, d)]);
  std::int64_t acc = 1;
  for (int k = rank - 1; k >= 0; --k) {
    const int d = perm[k];
    const std::int64_t step = mode == 3 || mode == 6 ? r.range(1, 3) : 1;
    st[d] = (allow_random && r.range(0, 15) == 0) ? 0 : acc * step;  // a stride 0: broadcast in memory
    acc = acc * step * std::max<std::int64_t>(s[d], 1);
  }
  return st;
}

// The shape of a leaf: `full`'s trailing dimensions, some of them 1; rarely a mismatching one.
fusex::shape_t leaf_shape(reader& r, const fusex::shape_t& full, bool may_drop) {
  fusex::shape_t s;
  const int drop = may_drop && r.range(0, 3) == 0 ? r.range(0, full.rank()) : 0;
  for (int d = drop; d < full.rank(); ++d) {
    const int c = r.range(0, 31);
    if (c < 5) s.push_back(1);
    else if (c == 5) s.push_back(full[d] + 1 + r.range(0, 1));  // does not broadcast (unless full[d] is 1)
    else s.push_back(full[d]);
  }
  return s;
}

bool broadcasts(const fusex::shape_t& from, const fusex::shape_t& to) {
  if (from.rank() > to.rank()) return false;
  for (int i = 0; i < from.rank(); ++i) {
    const std::int64_t f = from[i], t = to[to.rank() - from.rank() + i];
    if (f != t && f != 1) return false;
  }
  return true;
}

// Element offset (from the operand's own offset) of logical index `idx` of shape `full`.
std::int64_t offset_at(const operand& o, const std::int64_t* idx, int full_rank) {
  std::int64_t off = o.offset;
  for (int i = 0; i < o.shape.rank(); ++i) {
    const int j = full_rank - o.shape.rank() + i;
    if (o.shape[i] != 1) off += idx[j] * o.strides[i];
  }
  return off;
}

bool next_index(std::int64_t* idx, const fusex::shape_t& s) {
  for (int d = s.rank() - 1; d >= 0; --d) {
    if (++idx[d] < s[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// ---- the run-time operator used inside fusex::map ---------------------------------------------
struct dyn_op {
  int code;
  template <class A, class B>
  auto operator()(A a, B b) const {
    using C = std::common_type_t<A, B>;
    const C x = static_cast<C>(a), y = static_cast<C>(b);
    switch (code) {
      case 0: return static_cast<C>(x + y);
      case 1: return static_cast<C>(x - y);
      case 2: return static_cast<C>(x * y);
      case 3: return x > y ? x : y;
      case 4: return x < y ? x : y;
      case 5: return static_cast<C>(-x);
      case 6: return x < C(0) ? static_cast<C>(-x) : x;
      default: return x > C(0) ? x : C(0);
    }
  }
};
double dyn_ref(int code, double x, double y) {
  switch (code) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 3: return std::max(x, y);
    case 4: return std::min(x, y);
    case 5: return -x;
    case 6: return std::fabs(x);
    default: return x > 0 ? x : 0;
  }
}

struct world {
  std::vector<std::unique_ptr<unsigned char[]>> bufs;
  std::vector<std::size_t> sizes;  // bytes
  std::vector<std::vector<unsigned char>> before;
  int add(std::size_t bytes) {
    bufs.emplace_back(bytes ? new unsigned char[bytes] : nullptr);
    sizes.push_back(bytes);
    return static_cast<int>(bufs.size()) - 1;
  }
  template <class T>
  T* ptr(const operand& o) {
    if (numel_of(o.shape) == 0) return nullptr;  // empty operands may be null
    return reinterpret_cast<T*>(bufs[static_cast<std::size_t>(o.buffer)].get()) + o.offset;
  }
  template <class T>
  double value(const operand& o, std::int64_t elem_offset) {  // from the saved copy
    T x;
    std::memcpy(&x,
                before[static_cast<std::size_t>(o.buffer)].data() + elem_offset * static_cast<std::int64_t>(sizeof(T)),
                sizeof(T));
    return to_d(x);
  }
  void snapshot() {
    before.clear();
    for (std::size_t i = 0; i < bufs.size(); ++i) before.emplace_back(bufs[i].get(), bufs[i].get() + sizes[i]);
  }
};

template <class T>
void fill(world& w, int buf, reader& r) {
  const std::size_t n = w.sizes[static_cast<std::size_t>(buf)] / sizeof(T);
  T* p = reinterpret_cast<T*>(w.bufs[static_cast<std::size_t>(buf)].get());
  for (std::size_t i = 0; i < n; ++i) {
    const int k = r.range(-16, 16);
    const int whole = k / 4;  // integer dtypes get -4..4; floating ones quarters in [-4, 4]
    p[i] = std::is_integral_v<T> ? from_d<T>(static_cast<double>(whole)) : from_d<T>(k / 4.0);
  }
}

// Overlap by brute force: does the destination (buffer-sharing `in` possibly) have two logical
// indices on one element, or does `in` read, at some logical index, an element the destination
// writes at another index?
bool true_conflict(const operand& dst, const operand* in, const fusex::shape_t& full) {
  if (numel_of(full) == 0) return false;
  std::vector<std::int64_t> owner(static_cast<std::size_t>(dst.offset + span_of(dst) + 1), -1);
  std::int64_t idx[fusex::max_rank] = {};
  std::int64_t lin = 0;
  do {
    const std::int64_t off = offset_at(dst, idx, full.rank());
    if (owner[static_cast<std::size_t>(off)] >= 0) return true;
    owner[static_cast<std::size_t>(off)] = lin++;
  } while (next_index(idx, full));
  if (in == nullptr) return false;
  std::fill(idx, idx + fusex::max_rank, 0);
  lin = 0;
  do {
    const std::int64_t off = offset_at(*in, idx, full.rank());
    if (off < static_cast<std::int64_t>(owner.size()) && owner[static_cast<std::size_t>(off)] >= 0 &&
        owner[static_cast<std::size_t>(off)] != lin)
      return true;
    ++lin;
  } while (next_index(idx, full));
  return false;
}

template <class T>
fusex::view<T> view_of(world& w, const operand& o) {
  return fusex::view<T>(w.ptr<std::remove_const_t<T>>(o), o.shape, o.strides);
}

// ---- one case ------------------------------------------------------------------------------------
template <class D, class L1, class L2>
void run_case(reader& r, int skeleton) {
  world w;
  // Destination shape: rank 0..4, extents 0..4 (mostly 1..4).
  fusex::shape_t full;
  const int rank = r.range(0, 4);
  for (int d = 0; d < rank; ++d) full.push_back(r.range(0, 15) == 0 ? 0 : r.range(1, 4));
  const bool reduce = skeleton == 2;
  operand dst, l0, l1, l2;
  l0.elem = sizeof(D);
  l0.shape = leaf_shape(r, full, !reduce);
  l0.strides = make_strides(r, l0.shape, true);
  l1.elem = sizeof(L1);
  l1.shape = leaf_shape(r, full, true);
  l1.strides = make_strides(r, l1.shape, true);
  // A reduction reduces the shape of its operand, l0 and l1 broadcast together (NumPy rules: an
  // extent 1 in both stays 1 even where `full` has 0); l0 keeps full's rank so that the axes are
  // in range.
  std::uint32_t mask = 0;
  bool keep = false;
  std::vector<int> axes_list;
  fusex::shape_t inner = full;
  fusex::shape_t out_shape = full;
  if (reduce) {
    if (rank == 0 || !broadcasts(l0.shape, full) || !broadcasts(l1.shape, full)) return;
    for (int d = 0; d < rank; ++d) {
      const int i1 = d - (rank - l1.shape.rank());
      inner[d] = l0.shape[d] != 1 ? l0.shape[d] : (i1 >= 0 ? l1.shape[i1] : 1);
    }
    for (int d = 0; d < rank; ++d)
      if (r.range(0, 1)) {
        mask |= 1u << d;
        axes_list.push_back(r.range(0, 1) ? d : d - rank);
      }
    if (mask == 0) {
      mask = 1;
      axes_list.push_back(0);
    }
    keep = r.range(0, 1) != 0;
    out_shape = fusex::shape_t{};
    for (int d = 0; d < rank; ++d) {
      if (mask & (1u << d)) {
        if (keep) out_shape.push_back(1);
      } else {
        out_shape.push_back(inner[d]);
      }
    }
  }
  dst.elem = sizeof(D);
  dst.shape = out_shape;
  dst.strides = make_strides(r, dst.shape, true);
  l2.elem = sizeof(L2);
  l2.shape = leaf_shape(r, out_shape, true);
  l2.strides = make_strides(r, l2.shape, true);

  // Aliasing: the destination and leaf 0 share a buffer (reductions: never, they go through a
  // temporary) at a relative element shift.
  const bool alias = !reduce && r.range(0, 2) == 0;
  if (alias) {
    const std::int64_t shift = r.range(0, 3) == 0 ? 0 : r.range(-6, 6);
    dst.offset = shift < 0 ? -shift : 0;
    l0.offset = shift < 0 ? 0 : shift;
    if (r.range(0, 1) && l0.shape.rank() == dst.shape.rank()) l0.strides = dst.strides;  // same layout, often
    const std::int64_t end = std::max(dst.offset + span_of(dst), l0.offset + span_of(l0));
    dst.buffer = l0.buffer = w.add(static_cast<std::size_t>(end) * sizeof(D));
  } else {
    dst.offset = r.range(0, 2);
    l0.offset = r.range(0, 2);
    dst.buffer = w.add(static_cast<std::size_t>(dst.offset + span_of(dst)) * sizeof(D));
    l0.buffer = w.add(static_cast<std::size_t>(l0.offset + span_of(l0)) * sizeof(D));
  }
  l1.buffer = w.add(static_cast<std::size_t>(span_of(l1)) * sizeof(L1));
  l2.buffer = w.add(static_cast<std::size_t>(span_of(l2)) * sizeof(L2));
  fill<D>(w, dst.buffer, r);
  if (l0.buffer != dst.buffer) fill<D>(w, l0.buffer, r);
  fill<L1>(w, l1.buffer, r);
  fill<L2>(w, l2.buffer, r);
  w.snapshot();

  const int c0 = r.range(0, 7), c1 = r.range(0, 7), c2 = r.range(0, 7);
  const int red = r.range(0, 2);  // sum, amax, mean

  const auto vd = view_of<D>(w, dst);
  const auto v0 = view_of<const D>(w, l0);
  const auto v1 = view_of<const L1>(w, l1);
  const auto v2 = view_of<const L2>(w, l2);

  // What the reference expects.
  const bool leaves_ok = broadcasts(l0.shape, full) && broadcasts(l1.shape, full) && broadcasts(l2.shape, out_shape);
  std::string err;
  bool threw_shape = false, threw_arg = false;
  try {
    if (skeleton == 0) {
      // g(f(l0, l1), h(l2, l0)) through fusex::map with run-time operators.
      auto e = fusex::map(dyn_op{c2}, fusex::map(dyn_op{c0}, v0, v1), fusex::map(dyn_op{c1}, v2, v0));
      fusex::host::eval(vd, e);
    } else if (skeleton == 1) {
      // Built-in operators: where(l1 > l2, relu(l0) + l1, -l0 * l2).
      fusex::host::eval(vd, fusex::where(v1 > v2, fusex::relu(v0) + v1, -v0 * v2));
    } else {
      auto inner = fusex::map(dyn_op{c0}, v0, v1);
      const fusex::axes ax(axes_list);
      auto finish = [&](const auto& rd) { fusex::host::eval(vd, rd + v2); };
      if (red == 0) keep ? finish(fusex::sum(inner, ax, fusex::keepdim)) : finish(fusex::sum(inner, ax));
      else if (red == 1) keep ? finish(fusex::amax(inner, ax, fusex::keepdim)) : finish(fusex::amax(inner, ax));
      else keep ? finish(fusex::mean(inner, ax, fusex::keepdim)) : finish(fusex::mean(inner, ax));
    }
  } catch (const fusex::shape_error& e) {
    threw_shape = true;
    err = e.what();
  } catch (const fusex::invalid_argument& e) {
    threw_arg = true;
    err = e.what();
  }
  // amax over an empty axis has no identity: a shape_error that names the axis (sum and mean do not
  // need elements: 0 and NaN).
  bool empty_reduced = false;
  if (reduce)
    for (int d = 0; d < rank; ++d)
      if ((mask & (1u << d)) && inner[d] == 0) empty_reduced = true;
  const bool inner_ok = broadcasts(l0.shape, full) && broadcasts(l1.shape, full);
  const bool expect_shape_error = !leaves_ok || (reduce && red == 1 && empty_reduced && inner_ok);
  auto unchanged = [&](const std::vector<char>* written, const std::string& why) {
    for (std::size_t b = 0; b < w.bufs.size(); ++b) {
      const unsigned char* now = w.bufs[b].get();
      for (std::size_t i = 0; i < w.sizes[b]; ++i) {
        if (written && static_cast<int>(b) == dst.buffer && (*written)[i / sizeof(D)]) continue;
        if (now[i] != w.before[b][i])
          fail(why.c_str(), "buffer " + std::to_string(b) + " byte " + std::to_string(i) + ": " + err);
      }
    }
  };
  if (expect_shape_error != threw_shape)
    fail(threw_shape ? "unexpected shape_error" : "missing shape_error",
         err + " | operands " + l0.shape.str() + " " + l1.shape.str() + " " + l2.shape.str() + " full " + full.str() +
             " out " + out_shape.str());
  if (threw_shape) {
    if (err.rfind("fusex: ", 0) != 0) fail("shape_error without the fusex prefix", err);
    unchanged(nullptr, "a rejected evaluation wrote memory");
    return;
  }

  const bool conflict = true_conflict(dst, alias ? &l0 : nullptr, out_shape);
  if (threw_arg) {
    if (err.find("overlap") == std::string::npos && err.find("share memory") == std::string::npos)
      fail("invalid_argument that names no overlap", err);
    unchanged(nullptr, "a rejected evaluation wrote memory");
    return;
  }
  if (conflict)
    fail("accepted a racing destination", "dst " + dst.shape.str() + " strides " + dst.strides.str() + " off " +
                                              std::to_string(dst.offset) + "; l0 " + l0.shape.str() + " strides " +
                                              l0.strides.str() + " off " + std::to_string(l0.offset));

  // Reference, element by element of the destination.
  std::vector<char> written(w.sizes[static_cast<std::size_t>(dst.buffer)] / sizeof(D), 0);
  const D* out = reinterpret_cast<const D*>(w.bufs[static_cast<std::size_t>(dst.buffer)].get());
  if (numel_of(out_shape) > 0) {
    std::int64_t idx[fusex::max_rank] = {};
    do {
      double ref = 0;
      if (!reduce) {
        const double a = w.value<D>(l0, offset_at(l0, idx, rank));
        const double b = w.value<L1>(l1, offset_at(l1, idx, rank));
        const double c = w.value<L2>(l2, offset_at(l2, idx, rank));
        if (skeleton == 0) ref = dyn_ref(c2, dyn_ref(c0, a, b), dyn_ref(c1, c, a));
        else ref = b > c ? std::max(a, 0.0) + b : -a * c;
      } else {
        // Walk the reduced positions of the full index.
        std::int64_t fidx[fusex::max_rank] = {};
        int k = 0;
        for (int d = 0; d < rank; ++d) {
          if (mask & (1u << d)) fidx[d] = 0, k += keep;
          else fidx[d] = idx[k++];
        }
        double acc = red == 1 ? -INFINITY : 0.0;
        std::int64_t count = 0;
        bool more = !empty_reduced;
        while (more) {
          const double a = w.value<D>(l0, offset_at(l0, fidx, rank));
          const double b = w.value<L1>(l1, offset_at(l1, fidx, rank));
          const double v = dyn_ref(c0, a, b);
          acc = red == 1 ? std::max(acc, v) : acc + v;
          ++count;
          more = false;
          for (int d = rank - 1; d >= 0; --d) {
            if (!(mask & (1u << d))) continue;
            if (++fidx[d] < inner[d]) {
              more = true;
              break;
            }
            fidx[d] = 0;
          }
        }
        if (red == 2) acc = count ? acc / static_cast<double>(count) : NAN;
        ref = acc + w.value<L2>(l2, offset_at(l2, idx, static_cast<int>(out_shape.rank())));
      }
      const std::int64_t off = offset_at(dst, idx, out_shape.rank());
      written[static_cast<std::size_t>(off)] = 1;
      const double got = to_d(out[off]);
      const double want = to_d(from_d<D>(ref));
      const double tol = red == 2 && reduce ? 1e-6 * (1 + std::fabs(want)) : 0.0;
      if (!(std::fabs(got - want) <= tol) && !(std::isnan(got) && std::isnan(want)))
        fail("wrong value", "skeleton " + std::to_string(skeleton) + " got " + std::to_string(got) + " want " +
                                std::to_string(want) + " at element offset " + std::to_string(off) + " of dst " +
                                dst.shape.str() + " strides " + dst.strides.str());
    } while (next_index(idx, out_shape));
  }
  unchanged(&written, "wrote outside the destination");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader r{data, size};
  const int skeleton = r.range(0, 2);
  const int types = r.range(0, 5);
  switch (types) {
    case 0: run_case<float, float, float>(r, skeleton); break;
    case 1: run_case<float, std::int32_t, double>(r, skeleton); break;
    case 2: run_case<double, fusex::half, std::int32_t>(r, skeleton); break;
    case 3: run_case<double, double, float>(r, skeleton); break;
    case 4: run_case<float, fusex::half, fusex::half>(r, skeleton); break;
    default: run_case<double, std::int32_t, std::int32_t>(r, skeleton); break;
  }
  return 0;
}
