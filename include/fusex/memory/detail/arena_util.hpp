#pragma once
/// \file
/// Small building blocks of the arena: bit arithmetic, a spin lock for short uncontended critical
/// sections, and the formatting used in error messages. Plain C++ (no CUDA calls).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

namespace fusex::detail {

/// Every arena block starts and ends on this boundary (the alignment CUDA's allocators give).
inline constexpr std::size_t arena_granule = 256;
/// log2(arena_granule).
inline constexpr int arena_granule_log2 = 8;
/// The largest alignment the arena honours.
inline constexpr std::size_t arena_max_alignment = 4096;
/// Requests above this size are refused outright (they cannot be rounded without overflow).
inline constexpr std::size_t arena_max_request = std::size_t{1} << 62;

constexpr bool is_pow2(std::size_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

constexpr std::size_t round_up(std::size_t x, std::size_t a) noexcept { return (x + a - 1) / a * a; }

inline int floor_log2(std::uint64_t x) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  return 63 - __builtin_clzll(x);
#else
  int r = 0;
  while (x >>= 1) ++r;
  return r;
#endif
}

inline int count_trailing_zeros(std::uint64_t x) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_ctzll(x);
#else
  int r = 0;
  while ((x & 1) == 0) {
    x >>= 1;
    ++r;
  }
  return r;
#endif
}

/// Size class of a block size (a multiple of arena_granule): eight classes per power of two, so a
/// block in class c is at most 12.5% larger than the smallest size of c. Class 0 is 256 bytes.
inline std::size_t size_class_of(std::size_t bytes) noexcept {
  const int f = floor_log2(bytes);
  const std::size_t s = (bytes >> (f - 3)) & 7u;
  return static_cast<std::size_t>(f - arena_granule_log2) * 8u + s;
}

/// A test-and-test-and-set spin lock for critical sections of a few dozen instructions that are
/// almost never contended (a thread's own allocation cache, a shard of the block map). Its
/// atomics make it visible to ThreadSanitizer.
class spinlock {
 public:
  void lock() noexcept {
    if (!flag_.exchange(true, std::memory_order_acquire)) return;  // uncontended: inline
    lock_contended();
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  void lock_contended() noexcept {
    for (int spins = 0;;) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
          spins = 0;
        } else {
          pause();
        }
      }
      if (!flag_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  static void pause() noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_ia32_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    asm volatile("yield");
#endif
  }
  std::atomic<bool> flag_{false};
};

/// RAII holder for spinlock (std::lock_guard works too; this one is trivially inlined).
class spin_guard {
 public:
  explicit spin_guard(spinlock& l) noexcept : l_(l) { l_.lock(); }
  spin_guard(const spin_guard&) = delete;
  spin_guard& operator=(const spin_guard&) = delete;
  ~spin_guard() { l_.unlock(); }

 private:
  spinlock& l_;
};

/// "0x7f00..." for messages.
inline std::string format_pointer(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

/// "123456789 bytes (117.7 MiB)" for messages.
inline std::string format_bytes(std::size_t b) {
  char buf[64];
  const double d = static_cast<double>(b);
  if (b >= (std::size_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%zu bytes (%.2f GiB)", b, d / double(1u << 30));
  } else if (b >= (std::size_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%zu bytes (%.1f MiB)", b, d / double(1u << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%zu bytes (%.1f KiB)", b, d / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%zu bytes", b);
  }
  return buf;
}

/// A process-wide serial number of the calling thread: unlike std::thread::id it is never reused
/// by a later thread, so state keyed by it cannot be mistaken for a new thread's.
inline std::uint64_t thread_serial() noexcept {
  static std::atomic<std::uint64_t> next{1};
  static thread_local const std::uint64_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

}  // namespace fusex::detail
