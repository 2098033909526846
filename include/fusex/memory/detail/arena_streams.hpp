#pragma once
/// \file
/// The arena's cross-stream ordering: per-stream states, lazily recorded events, the dependencies
/// a free block carries and the waits that satisfy them, record_stream, forget_stream, and the
/// retirement of streams the arena no longer needs.
///
/// One of the headers that define basic_arena's member functions, one concern each (arena_impl.hpp
/// lists them; the class definition is arena_core.hpp). Host code: nvcc's device pass sees the
/// declarations only (memory/arena.hpp includes the definitions where FUSEX_DETAIL_HOST_BODIES is set, config.hpp).

#include <fusex/error.hpp>
#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/arena_util.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace fusex::detail {

template <class Backend>
inline void basic_arena<Backend>::record_stream(void* p, cudaStream_t stream) {
  if (p == nullptr) return;
  if (backend_.is_thread_bound(stream)) {
    throw invalid_argument(
        "fusex::arena: record_stream with the per-thread default stream: its work cannot be "
        "ordered from another thread; use an explicit stream");
  }
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  block* b = map_.with(a, [](block* x) -> block* {
    return x != nullptr && x->state.load(std::memory_order_acquire) == st_live ? x : nullptr;
  });
  if (b == nullptr) {
    throw invalid_argument("fusex::arena: record_stream(" + format_pointer(p) +
                           "): not the start of a live allocation of this arena");
  }
  std::lock_guard<std::mutex> lock(mu_);
  stream_state* st = state_for(stream);
  if (std::find(b->uses.begin(), b->uses.end(), st) == b->uses.end()) {
    b->uses.push_back(st);
    ++st->refs;
  }
  b->has_uses.store(true, std::memory_order_release);
}

template <class Backend>
inline void basic_arena<Backend>::forget_stream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  flush_all_caches_locked();
  auto it = streams_.find(key_of(stream));
  if (it == streams_.end()) return;
  stream_state* st = it->second.get();
  if (st->counter > st->recorded) {
    if (backend_.capture_status(stream).active) {
      throw error("fusex::arena: forget_stream(" + format_pointer(stream) +
                  ") while the stream is being captured; end the capture first");
    }
    record_now(st);
  }
  retire(it);
  sweep_retired();
}

template <class Backend>
inline auto basic_arena<Backend>::key_of(cudaStream_t s) const noexcept -> stream_key {
  return stream_key{s, backend_.is_thread_bound(s) ? thread_serial() : 0};
}

template <class Backend>
inline auto basic_arena<Backend>::state_for(cudaStream_t s) -> stream_state* {
  const stream_key k = key_of(s);
  auto it = streams_.find(k);
  if (it != streams_.end()) return it->second.get();
  auto st = std::make_unique<stream_state>();
  st->id = next_state_id_++;
  st->handle = s;
  st->thread = k.thread;
  st->thread_bound = k.thread != 0;
  stream_state* raw = st.get();
  streams_.emplace(k, std::move(st));
  return raw;
}

template <class Backend>
inline auto basic_arena<Backend>::service_state() -> stream_state* {
  if (service_ == nullptr) {
    const cudaStream_t s = backend_.create_service_stream();
    service_ = state_for(s);
  }
  return service_;
}

template <class Backend>
inline void basic_arena<Backend>::record_now(stream_state* st) {
  if (!st->has_event) {
    st->event = backend_.create_event();
    st->has_event = true;
  }
  backend_.record_event(st->event, st->handle);
  st->recorded = st->counter;
  ++counters_.records;
}

template <class Backend>
inline bool basic_arena<Backend>::ensure_recorded(const dep& d) {
  stream_state* st = d.s;
  if (d.seq <= st->recorded || st->retired) return true;
  if (st->thread_bound) {
    if (st->thread != thread_serial()) return false;
    record_now(st);
    return true;
  }
  if (backend_.capture_status(st->handle).active) return false;
  record_now(st);
  return true;
}

template <class Backend>
inline void basic_arena<Backend>::wait_for(stream_state* st, const dep& d) {
  if (d.s == st) return;
  for (auto& w : st->waited) {
    if (w.first == d.s->id) {
      if (w.second >= d.seq) return;
      backend_.wait_event(st->handle, d.s->event);
      w.second = d.s->recorded;
      ++counters_.waits;
      return;
    }
  }
  backend_.wait_event(st->handle, d.s->event);
  st->waited.emplace_back(d.s->id, d.s->recorded);
  ++counters_.waits;
}

template <class Backend>
inline bool basic_arena<Backend>::satisfy(block* b, stream_state* st) {
  for (const dep& d : b->deps)
    if (d.s != st && !ensure_recorded(d)) return false;
  for (const dep& d : b->deps) wait_for(st, d);
  return true;
}

template <class Backend>
inline bool basic_arena<Backend>::only_own_deps(const block* b, const stream_state* st) noexcept {
  for (const dep& d : b->deps)
    if (d.s != st) return false;
  return true;
}

template <class Backend>
inline void basic_arena<Backend>::clear_deps(block* b) noexcept {
  for (const dep& d : b->deps) --d.s->refs;
  b->deps.clear();
}

template <class Backend>
inline void basic_arena<Backend>::clear_uses(block* b) noexcept {
  for (stream_state* u : b->uses) --u->refs;
  b->uses.clear();
  b->has_uses.store(false, std::memory_order_release);
}

template <class Backend>
inline void basic_arena<Backend>::add_dep(block* b, const dep& d) {
  for (dep& x : b->deps) {
    if (x.s == d.s) {
      x.seq = std::max(x.seq, d.seq);
      --d.s->refs;
      return;
    }
  }
  b->deps.push_back(d);
}

template <class Backend>
inline void basic_arena<Backend>::copy_deps(block* to, const block* from) {
  for (const dep& d : from->deps) {
    ++d.s->refs;
    add_dep(to, d);
  }
}

template <class Backend>
inline void basic_arena<Backend>::retire(
    typename std::unordered_map<stream_key, std::unique_ptr<stream_state>, stream_key_hash>::iterator it) {
  it->second->retired = true;
  retired_.push_back(std::move(it->second));
  streams_.erase(it);
}

template <class Backend>
inline void basic_arena<Backend>::destroy_state_event(stream_state& st) noexcept {
  if (st.has_event) {
    backend_.destroy_event(st.event);
    st.has_event = false;
  }
}

template <class Backend>
inline void basic_arena<Backend>::sweep_retired() {
  for (std::size_t i = 0; i < retired_.size();) {
    stream_state* st = retired_[i].get();
    bool used = st->refs != 0;
    auto check_pool = [&](pool& p) {
      auto it = p.lists.find(st);
      if (it == p.lists.end()) return;
      if (it->second->empty()) p.lists.erase(it);
      else used = true;
    };
    check_pool(*eager_);
    for (auto& p : private_) check_pool(*p);
    if (used) {
      ++i;
      continue;
    }
    destroy_state_event(*st);
    retired_[i] = std::move(retired_.back());
    retired_.pop_back();
  }
}

template <class Backend>
inline void basic_arena<Backend>::record_best_effort(stream_state* x, const stream_state* known) noexcept {
  if (x->recorded >= x->counter || x->retired) return;
  if (x->thread_bound && x->thread != thread_serial()) return;
  try {
    if (x != known && !x->thread_bound && backend_.capture_status(x->handle).active) return;
    record_now(x);
  } catch (...) {
    (void)0;  // see above: the hand-off records it if it still can
  }
}

}  // namespace fusex::detail
