// libFuzzer target: shapes, strides, broadcasting and views, and the elementwise planner's
// dimension ordering and merging, against simple reference computations.
//
// Part 1: a chain of view operations (slice, transpose, permute, reshape, broadcast_to,
// expand_dims, squeeze, t) on a view of a buffer. The reference keeps the view as an explicit
// list of element offsets in row-major logical order and derives every operation from that list
// alone; after each step fusex's view must have the reference's shape and reach the same element
// at every logical index, and fusex must throw shape_error (message starting "fusex: ") exactly
// when the reference says the operation is invalid.
// Part 2: broadcast_shapes against a per-dimension reference.
// Part 3: detail::plan_elementwise on random layouts: when it accepts, the collapsed index space
// it returns must visit exactly the same (destination offset, input offsets) tuples as the
// original shapes (dimension dropping, ordering and merging lose and invent nothing).
#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_shape_view: %s: %s\n", what, detail.c_str());
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
  int range(int lo, int hi) { return lo + byte() % (hi - lo + 1); }
  bool done() const { return n == 0; }
};

using vec = std::vector<std::int64_t>;

std::int64_t prod(const vec& s) {
  std::int64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}
std::string str(const vec& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}
// Row-major linear index of `idx` in `s`.
std::int64_t linear(const vec& idx, const vec& s) {
  std::int64_t l = 0;
  for (std::size_t d = 0; d < s.size(); ++d) l = l * s[d] + idx[d];
  return l;
}
bool next(vec& idx, const vec& s) {
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    if (++idx[static_cast<std::size_t>(d)] < s[static_cast<std::size_t>(d)]) return true;
    idx[static_cast<std::size_t>(d)] = 0;
  }
  return false;
}

// The reference view: shape and the offset of every element, row-major.
struct ref_view {
  vec shape;
  vec elems;
  bool contiguous_run() const {  // offsets consecutive ascending
    for (std::size_t i = 1; i < elems.size(); ++i)
      if (elems[i] != elems[0] + static_cast<std::int64_t>(i)) return false;
    return true;
  }
};

// Builds a new reference view of `shape` whose element at idx is old.elems[linear(map(idx))].
template <class Map>
ref_view remap(const ref_view& old, const vec& shape, Map map) {
  ref_view r;
  r.shape = shape;
  if (prod(shape) == 0) return r;
  vec idx(shape.size(), 0);
  do {
    const vec o = map(idx);
    r.elems.push_back(old.elems[static_cast<std::size_t>(linear(o, old.shape))]);
  } while (next(idx, shape));
  return r;
}

void compare(const fusex::view<float>& v, const ref_view& r, const float* base, const char* step) {
  vec shape(v.shape().begin(), v.shape().end());
  if (shape != r.shape)
    fail("shape differs", std::string(step) + ": fusex " + v.shape().str() + " reference " + str(r.shape));
  if (prod(shape) == 0) return;
  vec idx(shape.size(), 0);
  std::size_t k = 0;
  do {
    std::int64_t off = v.data() - base;
    for (std::size_t d = 0; d < shape.size(); ++d) off += idx[d] * v.strides()[static_cast<int>(d)];
    if (off != r.elems[k])
      fail("element differs", std::string(step) + " at logical " + str(idx) + ": fusex offset " + std::to_string(off) +
                                  " reference " + std::to_string(r.elems[k]));
    ++k;
  } while (next(idx, shape));
}

int norm_axis(int a, int rank, bool& ok) {  // reference axis rule: -rank <= a < rank
  ok = a >= -rank && a < rank;
  return a < 0 ? a + rank : a;
}

template <class F>
void expect(bool valid, const char* step, F&& f) {
  bool threw = false;
  std::string msg;
  try {
    f();
  } catch (const fusex::shape_error& e) {
    threw = true;
    msg = e.what();
  }
  if (valid && threw) fail("unexpected shape_error", std::string(step) + ": " + msg);
  if (!valid && !threw) fail("missing shape_error", step);
  if (threw && msg.rfind("fusex: ", 0) != 0) fail("message without the fusex prefix", msg);
}

void views(reader& r) {
  // A base view: rank 0..4, extents 0..4, contiguous over a buffer of exactly its size.
  vec shape;
  const int rank = r.range(0, 4);
  for (int d = 0; d < rank; ++d) shape.push_back(r.range(0, 9) == 0 ? 0 : r.range(1, 4));
  std::vector<float> buf(static_cast<std::size_t>(std::max<std::int64_t>(prod(shape), 1)));
  fusex::shape_t fs;
  for (auto e : shape) fs.push_back(e);
  fusex::view<float> v(buf.data(), fs);
  ref_view ref{shape, {}};
  for (std::int64_t i = 0; i < prod(shape); ++i) ref.elems.push_back(i);
  compare(v, ref, buf.data(), "make_view");

  for (int step = 0; step < 8 && !r.done(); ++step) {
    const int R = static_cast<int>(ref.shape.size());
    switch (r.range(0, 7)) {
      case 0: {  // slice
        const int dim = r.range(-R - 1, R);
        std::int64_t b = r.range(-5, 5), e = r.range(-5, 5);
        const std::int64_t stp = r.range(0, 3);
        bool ok;
        const int d = norm_axis(dim, R, ok);
        std::int64_t bb = b, ee = e, len = 0;
        if (ok) {
          const std::int64_t ext = ref.shape[static_cast<std::size_t>(d)];
          if (bb < 0) bb += ext;
          if (ee < 0) ee += ext;
          ok = stp >= 1 && bb >= 0 && ee <= ext && bb <= ee;
          if (ok) len = (ee - bb + stp - 1) / stp;
        }
        fusex::view<float> nv;
        expect(ok, "slice", [&] { nv = v.slice(dim, b, e, stp); });
        if (ok) {
          vec ns = ref.shape;
          ns[static_cast<std::size_t>(d)] = len;
          ref = remap(ref, ns, [&](vec i) {
            i[static_cast<std::size_t>(d)] = bb + i[static_cast<std::size_t>(d)] * stp;
            return i;
          });
          v = nv;
        }
        break;
      }
      case 1: {  // transpose
        const int a = r.range(-R - 1, R), b = r.range(-R - 1, R);
        bool oa, ob;
        const int da = norm_axis(a, R, oa), db = norm_axis(b, R, ob);
        fusex::view<float> nv;
        expect(oa && ob, "transpose", [&] { nv = v.transpose(a, b); });
        if (oa && ob) {
          vec ns = ref.shape;
          std::swap(ns[static_cast<std::size_t>(da)], ns[static_cast<std::size_t>(db)]);
          ref = remap(ref, ns, [&](vec i) {
            std::swap(i[static_cast<std::size_t>(da)], i[static_cast<std::size_t>(db)]);
            return i;
          });
          v = nv;
        }
        break;
      }
      case 2: {  // permute
        fusex::dims order;
        const int n = r.range(0, 3) == 0 ? r.range(0, 4) : R;
        std::vector<int> o;
        o.reserve(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) o.push_back(i);
        for (int i = n - 1; i > 0; --i)
          std::swap(o[static_cast<std::size_t>(i)], o[static_cast<std::size_t>(r.range(0, i))]);
        if (n > 0 && r.range(0, 5) == 0) o[static_cast<std::size_t>(r.range(0, n - 1))] = r.range(-R - 1, R);
        for (int x : o) order.push_back(x);
        bool ok = n == R;
        std::vector<int> od;
        std::vector<bool> seen(static_cast<std::size_t>(R), false);
        for (int x : o) {
          bool okx;
          const int d = norm_axis(x, R, okx);
          if (!okx || seen[static_cast<std::size_t>(d)]) {
            ok = false;
            break;
          }
          seen[static_cast<std::size_t>(d)] = true;
          od.push_back(d);
        }
        fusex::view<float> nv;
        expect(ok, "permute", [&] { nv = v.permute(order); });
        if (ok) {
          vec ns;
          for (int d : od) ns.push_back(ref.shape[static_cast<std::size_t>(d)]);
          ref = remap(ref, ns, [&](const vec& i) {
            vec o2(i.size());
            for (std::size_t k = 0; k < i.size(); ++k) o2[static_cast<std::size_t>(od[k])] = i[k];
            return o2;
          });
          v = nv;
        }
        break;
      }
      case 3: {  // reshape (one extent may be -1)
        vec ns;
        const int nr = r.range(0, 4);
        for (int i = 0; i < nr; ++i) ns.push_back(r.range(0, 4));
        if (nr > 0 && r.range(0, 2) == 0) ns[static_cast<std::size_t>(r.range(0, nr - 1))] = -1;
        const std::int64_t total = prod(ref.shape);
        vec resolved = ns;
        std::int64_t known = 1;
        int infer = -1;
        for (std::size_t i = 0; i < ns.size(); ++i) {
          if (ns[i] == -1 && infer < 0) infer = static_cast<int>(i);
          else known *= ns[i];
        }
        if (infer >= 0) resolved[static_cast<std::size_t>(infer)] = known == 0 ? 0 : total / known;
        const bool size_ok = prod(resolved) == total;
        fusex::shape_t fs2;
        for (auto e : ns) fs2.push_back(e);
        fusex::view<float> nv;
        bool threw = false;
        try {
          nv = v.reshape(fs2);
        } catch (const fusex::shape_error&) {
          threw = true;
        }
        // Empty views: contiguity of strides of an empty view is a convention; accept either.
        if (total != 0) {
          const bool ok = size_ok && ref.contiguous_run();
          if (ok == threw) fail(ok ? "reshape rejected" : "reshape accepted", str(ref.shape) + " -> " + str(ns));
        } else if (!size_ok && !threw) {
          fail("reshape of an empty view to a non-empty shape accepted", str(ns));
        }
        if (!threw) {
          ref.shape = resolved;
          v = nv;
        }
        break;
      }
      case 4: {  // broadcast_to
        vec ns;
        const int extra = r.range(0, 2);
        for (int i = 0; i < extra && R + extra <= fusex::max_rank; ++i) ns.push_back(r.range(0, 3));
        for (int d = 0; d < R; ++d) {
          const std::int64_t e = ref.shape[static_cast<std::size_t>(d)];
          const int c = r.range(0, 7);
          ns.push_back(c == 0 ? r.range(0, 4) : (e == 1 && c < 4 ? r.range(1, 4) : e));
        }
        bool ok = ns.size() >= ref.shape.size();
        const std::size_t lead = ns.size() - ref.shape.size();
        for (std::size_t d = 0; ok && d < ref.shape.size(); ++d) ok = ref.shape[d] == ns[lead + d] || ref.shape[d] == 1;
        fusex::shape_t fs2;
        for (auto e : ns) fs2.push_back(e);
        fusex::view<float> nv;
        expect(ok, "broadcast_to", [&] { nv = v.broadcast_to(fs2); });
        if (ok) {
          const vec old = ref.shape;
          ref = remap(ref, ns, [&](const vec& i) {
            vec o(old.size());
            for (std::size_t d = 0; d < old.size(); ++d) o[d] = old[d] == 1 ? 0 : i[lead + d];
            return o;
          });
          v = nv;
        }
        break;
      }
      case 5: {  // expand_dims
        const int a = r.range(-R - 2, R + 1);
        bool ok;
        const int d = norm_axis(a, R + 1, ok);
        ok = ok && R + 1 <= fusex::max_rank;
        fusex::view<float> nv;
        expect(ok, "expand_dims", [&] { nv = v.expand_dims(a); });
        if (ok) {
          vec ns = ref.shape;
          ns.insert(ns.begin() + d, 1);
          ref = remap(ref, ns, [&](vec i) {
            i.erase(i.begin() + d);
            return i;
          });
          v = nv;
        }
        break;
      }
      case 6: {  // squeeze
        const int a = r.range(-R - 1, R);
        bool ok;
        const int d = norm_axis(a, R, ok);
        ok = ok && ref.shape[static_cast<std::size_t>(d)] == 1;
        fusex::view<float> nv;
        expect(ok, "squeeze", [&] { nv = v.squeeze(a); });
        if (ok) {
          vec ns = ref.shape;
          ns.erase(ns.begin() + d);
          ref = remap(ref, ns, [&](vec i) {
            i.insert(i.begin() + d, 0);
            return i;
          });
          v = nv;
        }
        break;
      }
      default: {  // t()
        fusex::view<float> nv;
        expect(R == 2, "t", [&] { nv = v.t(); });
        if (R == 2) {
          ref = remap(ref, {ref.shape[1], ref.shape[0]}, [&](const vec& i) { return vec{i[1], i[0]}; });
          v = nv;
        }
        break;
      }
    }
    compare(v, ref, buf.data(), "after a step");
    // size() and is_contiguous() agree with the reference.
    if (v.size() != prod(ref.shape)) fail("size differs", v.shape().str());
    if (v.size() > 0 && v.is_contiguous() != ref.contiguous_run())
      fail("is_contiguous differs", v.shape().str() + " " + v.strides().str());
  }
}

void broadcasting(reader& r) {
  fusex::shape_t a, b;
  const int ra = r.range(0, 4), rb = r.range(0, 4);
  for (int i = 0; i < ra; ++i) a.push_back(r.range(0, 3));
  for (int i = 0; i < rb; ++i) b.push_back(r.range(0, 3));
  const int R = std::max(ra, rb);
  bool ok = true;
  vec want;
  for (int i = 0; i < R; ++i) {
    const std::int64_t ea = i - (R - ra) >= 0 ? a[i - (R - ra)] : 1, eb = i - (R - rb) >= 0 ? b[i - (R - rb)] : 1;
    if (ea != eb && ea != 1 && eb != 1) ok = false;
    want.push_back(ea == 1 ? eb : ea);
  }
  fusex::shape_t got;
  std::string msg;
  bool threw = false;
  try {
    got = fusex::broadcast_shapes(a, b, "fuzz");
  } catch (const fusex::shape_error& e) {
    threw = true;
    msg = e.what();
  }
  if (ok == threw) fail("broadcast_shapes", a.str() + " " + b.str());
  if (threw && (msg.find(a.str()) == std::string::npos || msg.find(b.str()) == std::string::npos))
    fail("broadcast_shapes message does not name both shapes", msg);
  if (ok && vec(got.begin(), got.end()) != want)
    fail("broadcast_shapes result", a.str() + " " + b.str() + " -> " + got.str());
  if (ok && (!fusex::broadcasts_to(a, got) || !fusex::broadcasts_to(b, got))) fail("broadcasts_to", got.str());
}

void planner(reader& r) {
  using fusex::detail::operand_layout;
  const int n_ops = r.range(1, 4);
  fusex::shape_t full;
  const int rank = r.range(0, 5);
  for (int d = 0; d < rank; ++d) full.push_back(r.range(1, 4));
  static float arena[(1 << 18) + 16];
  operand_layout ops[4];
  std::int64_t base[4];
  for (int i = 0; i < n_ops; ++i) {
    operand_layout& o = ops[i];
    // Destination: full shape; inputs: trailing dimensions, some 1.
    fusex::shape_t s;
    const int drop = i == 0 ? 0 : r.range(0, rank);
    for (int d = drop; d < rank; ++d) s.push_back(i > 0 && r.range(0, 3) == 0 ? 1 : full[d]);
    o.shape = s;
    o.strides = fusex::dims::filled(s.rank(), 0);
    // Permuted, padded row-major strides; inputs sometimes stride 0.
    int perm[fusex::max_rank];
    for (int d = 0; d < s.rank(); ++d) perm[d] = d;
    for (int d = s.rank() - 1; d > 0; --d) std::swap(perm[d], perm[r.range(0, d)]);
    std::int64_t acc = 1;
    for (int k = s.rank() - 1; k >= 0; --k) {
      const int d = perm[k];
      const std::int64_t step = r.range(0, 3) == 0 ? 2 : 1;
      o.strides[d] = i > 0 && r.range(0, 7) == 0 ? 0 : acc * step;
      acc *= step * s[d];
    }
    base[i] = (std::int64_t{1} << 16) * i + r.range(0, 3);  // disjoint regions
    o.data = arena + base[i];
    o.elem_size = 4;
    o.dtype = fusex::dtype_id::float32;
  }
  // Reference tuples from the original shapes.
  std::vector<vec> want;
  {
    vec idx(static_cast<std::size_t>(rank), 0);
    const vec fs(full.begin(), full.end());
    do {
      vec t;
      for (int i = 0; i < n_ops; ++i) {
        std::int64_t off = 0;
        for (int k = 0; k < ops[i].shape.rank(); ++k) {
          const int j = rank - ops[i].shape.rank() + k;
          if (ops[i].shape[k] != 1) off += idx[static_cast<std::size_t>(j)] * ops[i].strides[k];
        }
        t.push_back(off);
      }
      want.push_back(t);
    } while (rank > 0 && next(idx, fs));
  }
  fusex::detail::elementwise_layout L;
  fusex::detail::plan_elementwise(ops, 1, n_ops, 4, L);
  if (L.numel != static_cast<std::int64_t>(want.size())) fail("planner numel", std::to_string(L.numel));
  std::int64_t space = 1;
  for (int d = 0; d < L.rank; ++d) space *= L.extent[d];
  if (space != L.numel) fail("planner index space size", std::to_string(space) + " vs " + std::to_string(L.numel));
  std::vector<vec> got;
  vec idx(static_cast<std::size_t>(L.rank), 0);
  const vec ext(L.extent, L.extent + L.rank);
  do {
    vec t;
    for (int i = 0; i < n_ops; ++i) {
      std::int64_t off = 0;
      for (int d = 0; d < L.rank; ++d) off += idx[static_cast<std::size_t>(d)] * ops[i].s[d];
      t.push_back(off);
    }
    got.push_back(t);
  } while (next(idx, ext));
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  if (want != got) fail("planner's collapsed index space visits other elements", full.str());
  // The destination is visited in storage order along the innermost kernel dimension when it has
  // unit stride somewhere (coalescing): the innermost stride is the smallest non-zero one.
  if (L.rank >= 2 && ops[0].s[L.rank - 1] > ops[0].s[L.rank - 2] && ops[0].s[L.rank - 2] != 0)
    fail("planner: destination's innermost dimension is not its fastest", full.str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader r{data, size};
  switch (r.range(0, 2)) {
    case 0: views(r); break;
    case 1: broadcasting(r); break;
    default: planner(r); break;
  }
  return 0;
}
