#pragma once
// A transformer-like allocation trace: the tensors of training steps of a GPT-style model
// (parameters; per layer the activations kept for backward, attention scores and probabilities,
// MLP intermediates, workspaces and small reduction temporaries; backward gradients; weight
// gradients freed at the optimizer step), with the sequence length changing from step to step as
// with dynamic batching. Deterministic for a seed. Used by bench/memory (replayed on the arena and
// on the CUDA allocators) and by tests/memory (replayed on the arena over a fake device, to check
// peak reserved / peak live).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace fusex_trace {

struct op {
  bool allocate;      ///< allocate (true) or free (false) tensor `id`
  std::uint32_t id;   ///< tensor id, unique in the trace
  std::size_t bytes;  ///< its size
};

struct trace {
  std::vector<op> ops;
  std::size_t allocations = 0;
  std::size_t peak_live_bytes = 0;  ///< highest sum of live tensors' sizes
  std::size_t max_id = 0;
};

struct model {
  std::size_t layers = 12, hidden = 2048, heads = 16, batch = 2, vocab = 32000, elem = 2;  // bf16
  std::size_t seq_lengths[5] = {512, 768, 1024, 1536, 2048};
};

/// Builds at least `min_allocations` allocations (whole steps), every tensor freed at the end.
inline trace transformer_trace(std::size_t min_allocations = 100000, unsigned seed = 1, model m = model()) {
  trace t;
  std::mt19937_64 rng(seed);
  std::uint32_t next = 0;
  std::size_t live = 0;
  std::vector<std::size_t> size_of;
  auto alloc = [&](std::size_t bytes) {
    const std::uint32_t id = next++;
    size_of.push_back(bytes);
    t.ops.push_back(op{true, id, bytes});
    ++t.allocations;
    live += bytes;
    t.peak_live_bytes = std::max(t.peak_live_bytes, live);
    return id;
  };
  auto release = [&](std::uint32_t id) {
    t.ops.push_back(op{false, id, size_of[id]});
    live -= size_of[id];
  };
  std::uniform_int_distribution<std::size_t> small(1, 64);  // small temporaries: 4 KiB .. 256 KiB
  auto temporaries = [&](int n) {
    for (int i = 0; i < n; ++i) release(alloc(small(rng) * 4096));
  };

  const std::size_t H = m.hidden, E = m.elem;
  // Parameters, alive for the whole trace: qkv, proj, mlp up and down per layer; embeddings.
  std::vector<std::uint32_t> params;
  params.push_back(alloc(m.vocab * H * E));
  for (std::size_t l = 0; l < m.layers; ++l) {
    params.push_back(alloc(3 * H * H * E));
    params.push_back(alloc(H * H * E));
    params.push_back(alloc(4 * H * H * E));
    params.push_back(alloc(4 * H * H * E));
    params.push_back(alloc(4 * H * 4));  // layer norm weights, fp32
  }
  std::uniform_int_distribution<int> pick_seq(0, 4);
  while (t.allocations < min_allocations) {
    const std::size_t S = m.seq_lengths[pick_seq(rng)];
    const std::size_t BSH = m.batch * S * H * E;
    const std::size_t scores = m.batch * m.heads * S * S * E;
    struct saved_layer {
      std::vector<std::uint32_t> ids;
    };
    std::vector<saved_layer> saved(m.layers);
    std::uint32_t x = alloc(BSH);  // embedding output
    for (std::size_t l = 0; l < m.layers; ++l) {
      auto& s = saved[l].ids;
      s.push_back(x);                             // layer input (residual)
      s.push_back(alloc(BSH));                    // ln1
      s.push_back(alloc(m.batch * S * 8));        // ln1 mean / rstd
      s.push_back(alloc(3 * BSH));                // qkv
      const std::uint32_t ws = alloc(32u << 20);  // GEMM workspace
      release(ws);
      const std::uint32_t sc = alloc(scores);  // attention scores
      s.push_back(alloc(scores));              // probabilities (kept)
      release(sc);
      temporaries(2);           // softmax partials
      s.push_back(alloc(BSH));  // attention output
      const std::uint32_t proj = alloc(BSH);
      const std::uint32_t res1 = alloc(BSH);
      release(proj);
      s.push_back(res1);
      s.push_back(alloc(BSH));  // ln2
      s.push_back(alloc(m.batch * S * 8));
      s.push_back(alloc(4 * BSH));  // mlp up
      s.push_back(alloc(4 * BSH));  // gelu
      const std::uint32_t down = alloc(BSH);
      x = alloc(BSH);  // res2: next layer's input
      release(down);
      temporaries(2);
    }
    // Loss: logits, their gradient.
    const std::uint32_t logits = alloc(m.batch * S * m.vocab * E);
    temporaries(3);
    const std::uint32_t dlogits = alloc(m.batch * S * m.vocab * E);
    release(logits);
    std::uint32_t grad = alloc(BSH);
    release(dlogits);
    release(x);
    std::vector<std::uint32_t> wgrads;
    wgrads.push_back(alloc(m.vocab * H * E));
    for (std::size_t l = m.layers; l-- > 0;) {
      auto& s = saved[l].ids;
      const std::uint32_t ws = alloc(32u << 20);
      const std::uint32_t dgelu = alloc(4 * BSH);
      wgrads.push_back(alloc(4 * H * H * E));  // d W_down
      const std::uint32_t dup = alloc(4 * BSH);
      release(dgelu);
      wgrads.push_back(alloc(4 * H * H * E));  // d W_up
      const std::uint32_t dln2 = alloc(BSH);
      release(dup);
      temporaries(2);  // layer-norm backward partials
      wgrads.push_back(alloc(4 * H * 4));
      const std::uint32_t dattn = alloc(BSH);
      release(dln2);
      wgrads.push_back(alloc(H * H * E));  // d W_proj
      const std::uint32_t dprobs = alloc(scores);
      const std::uint32_t dscores = alloc(scores);
      release(dprobs);
      const std::uint32_t dqkv = alloc(3 * BSH);
      release(dscores);
      release(dattn);
      wgrads.push_back(alloc(3 * H * H * E));  // d W_qkv
      const std::uint32_t dx = alloc(BSH);
      release(dqkv);
      release(ws);
      temporaries(2);
      release(grad);
      grad = dx;
      for (std::size_t i = 1; i < s.size(); ++i) release(s[i]);
      release(s[0]);
    }
    release(grad);
    // Optimizer step: per-parameter temporaries, then the gradients go.
    for (std::size_t i = 0; i < wgrads.size(); ++i) temporaries(1);
    for (std::uint32_t g : wgrads) release(g);
  }
  for (std::uint32_t p : params) release(p);
  t.max_id = next;
  return t;
}

}  // namespace fusex_trace
