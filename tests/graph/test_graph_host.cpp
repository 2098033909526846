// Host suite for the graph area (g++, no GPU; runs in CI): the graph cache's least-recently-used
// bookkeeping and statistics over a fake executable type and capture policy, graph keys and their
// hashing, batch buckets, and the capture rules fusex checks before any CUDA call.
#include <fusex/graph/graph.hpp>

#include "fusex_catch.hpp"

#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

// A stand-in for graph_exec: counts launches and, through a shared counter, live instances.
struct fake_exec {
  int id = -1;
  std::size_t bytes = 0;
  int launches = 0;
  std::shared_ptr<int> alive;

  fake_exec() = default;
  fake_exec(int i, std::size_t b, std::shared_ptr<int> a) : id(i), bytes(b), alive(std::move(a)) { ++*alive; }
  fake_exec(fake_exec&& o) noexcept : id(o.id), bytes(o.bytes), launches(o.launches), alive(std::move(o.alive)) {}
  fake_exec& operator=(fake_exec&& o) noexcept {
    if (this != &o) {
      if (alive) --*alive;
      id = o.id;
      bytes = o.bytes;
      launches = o.launches;
      alive = std::move(o.alive);
    }
    return *this;
  }
  fake_exec(const fake_exec&) = delete;
  fake_exec& operator=(const fake_exec&) = delete;
  ~fake_exec() {
    if (alive) --*alive;
  }
};

// A capture policy that runs the work once as its "capture" and records what happened.
struct fake_policy {
  std::shared_ptr<int> alive = std::make_shared<int>(0);
  int next_id = 0;
  int captures = 0;
  std::size_t bytes_per_graph = 1000;
  bool fail_next = false;
  std::vector<cudaStream_t> capture_streams;

  template <class Work>
  fake_exec capture(cudaStream_t s, Work& work) {
    capture_streams.push_back(s);
    work(s);
    if (fail_next) {
      fail_next = false;
      throw std::runtime_error("capture failed");
    }
    ++captures;
    return fake_exec(next_id++, bytes_per_graph, alive);
  }
  void launch(fake_exec& e, cudaStream_t) { ++e.launches; }
  std::size_t memory_bytes(const fake_exec& e) const { return e.bytes; }
};

using fake_cache = fusex::basic_graph_cache<fusex::graph_key, fake_exec, fake_policy>;

cudaStream_t fake_stream(std::uintptr_t v) { return reinterpret_cast<cudaStream_t>(v); }

bool has(const std::string& m, const std::string& part) { return m.find(part) != std::string::npos; }

std::vector<int> keys_in_order(const fusex::detail::lru_map<int, int>& m) {
  std::vector<int> k;
  m.for_each([&](const int& key, const int&) { k.push_back(key); });
  return k;
}

}  // namespace

TEST_CASE("lru_map: insert, find as a use, eviction of the least recently used", "[graph][host][lru]") {
  fusex::detail::lru_map<int, int> m(3);
  std::vector<int> evicted;
  auto on_evict = [&](const int& k, int&) { evicted.push_back(k); };
  CHECK(m.insert(1, 10, on_evict) == 0);
  CHECK(m.insert(2, 20, on_evict) == 0);
  CHECK(m.insert(3, 30, on_evict) == 0);
  CHECK(keys_in_order(m) == std::vector<int>{3, 2, 1});
  REQUIRE(m.find(1) != nullptr);
  CHECK(*m.find(1) == 10);
  CHECK(keys_in_order(m) == std::vector<int>{1, 3, 2});
  CHECK(m.peek(2) != nullptr);  // peek does not count as a use
  CHECK(keys_in_order(m) == std::vector<int>{1, 3, 2});
  CHECK(m.insert(4, 40, on_evict) == 1);
  CHECK(evicted == std::vector<int>{2});
  CHECK_FALSE(m.contains(2));
  CHECK(m.find(2) == nullptr);
  CHECK(m.size() == 3);
  // Replacing an existing key evicts nothing and makes it the most recent.
  CHECK(m.insert(3, 33, on_evict) == 0);
  CHECK(*m.find(3) == 33);
  CHECK(keys_in_order(m) == std::vector<int>{3, 4, 1});
  // Shrinking evicts from the least recent end.
  CHECK(m.set_capacity(1, on_evict) == 2);
  CHECK(evicted == std::vector<int>{2, 1, 4});
  CHECK(keys_in_order(m) == std::vector<int>{3});
  CHECK(m.erase(3));
  CHECK_FALSE(m.erase(3));
  CHECK(m.empty());
  using small_map = fusex::detail::lru_map<int, int>;
  CHECK_THROWS_AS(small_map(0), fusex::invalid_argument);
  CHECK_THROWS_AS(m.set_capacity(0, on_evict), fusex::invalid_argument);
}

TEST_CASE("lru_map: values keep their address while cached", "[graph][host][lru]") {
  fusex::detail::lru_map<int, std::string> m(4);
  m.insert(1, "one");
  const std::string* p = m.find(1);
  for (int i = 2; i <= 4; ++i) m.insert(i, std::to_string(i));
  m.find(3);
  m.find(1);
  CHECK(m.find(1) == p);
  CHECK(*p == "one");
}

TEST_CASE("graph cache: hits, misses, captures and eviction across three shapes", "[graph][host][cache]") {
  fake_cache cache(2);
  const auto alive = cache.policy().alive;
  int work_calls = 0;
  auto work = [&](cudaStream_t) { ++work_calls; };
  const auto s = fake_stream(0x10);
  const fusex::graph_key a = fusex::graph_key::of(fusex::shape_t{16, 784});
  const fusex::graph_key b = fusex::graph_key::of(fusex::shape_t{32, 784});
  const fusex::graph_key c = fusex::graph_key::of(fusex::shape_t{64, 784});

  fake_exec& ea = cache.run(a, s, work);  // miss: capture + launch
  CHECK(ea.id == 0);
  CHECK(ea.launches == 1);
  CHECK(work_calls == 1);
  CHECK(cache.run(a, s, work).launches == 2);  // hit: launch only
  CHECK(work_calls == 1);
  CHECK(cache.run(b, s, work).id == 1);  // miss
  CHECK(cache.run(a, s, work).id == 0);  // hit; a is now the most recent
  CHECK(cache.run(c, s, work).id == 2);  // miss; evicts b (least recently used)
  CHECK(*alive == 2);
  CHECK_FALSE(cache.contains(b));
  CHECK(cache.contains(a));
  CHECK(cache.contains(c));
  CHECK(cache.run(b, s, work).id == 3);  // miss again; evicts a
  CHECK_FALSE(cache.contains(a));
  CHECK(cache.run(c, s, work).launches == 2);  // hit

  const fusex::graph_cache_stats st = cache.stats();
  CHECK(st.hits == 3);
  CHECK(st.misses == 4);
  CHECK(st.captures == 4);
  CHECK(st.failed_captures == 0);
  CHECK(st.evictions == 2);
  CHECK(st.launches == 7);
  CHECK(st.entries == 2);
  CHECK(st.capacity == 2);
  CHECK(st.memory_bytes == 2000);
  CHECK(work_calls == 4);
  CHECK(cache.policy().captures == 4);
  CHECK(*alive == 2);  // evicted graphs were destroyed (their memory returned)

  cache.set_capacity(1);
  CHECK(cache.size() == 1);
  CHECK(cache.contains(c));  // the most recently used stays
  CHECK(cache.stats().evictions == 3);
  CHECK(*alive == 1);
  cache.clear();
  CHECK(*alive == 0);
  CHECK(cache.stats().memory_bytes == 0);
  cache.reset_stats();
  CHECK(cache.stats().hits == 0);
  CHECK(cache.stats().launches == 0);
}

TEST_CASE("graph cache: a failed capture leaves the cache as it was", "[graph][host][cache]") {
  fake_cache cache(2);
  auto work = [](cudaStream_t) {};
  const auto s = fake_stream(0x20);
  cache.run(fusex::graph_key{1}, s, work);
  cache.run(fusex::graph_key{2}, s, work);
  cache.policy().fail_next = true;
  CHECK_THROWS_AS(cache.run(fusex::graph_key{3}, s, work), std::runtime_error);
  CHECK(cache.size() == 2);
  CHECK(cache.contains(fusex::graph_key{1}));  // nothing was evicted for the failed capture
  CHECK(cache.contains(fusex::graph_key{2}));
  const auto st = cache.stats();
  CHECK(st.failed_captures == 1);
  CHECK(st.misses == 3);
  CHECK(st.captures == 2);
  CHECK(st.evictions == 0);
  // The next call captures successfully.
  CHECK(cache.run(fusex::graph_key{3}, s, work).launches == 1);
  CHECK(cache.stats().evictions == 1);
}

TEST_CASE("graph cache: get, find, recapture and erase", "[graph][host][cache]") {
  fake_cache cache(4);
  auto work = [](cudaStream_t) {};
  const auto s1 = fake_stream(0x30), s2 = fake_stream(0x40);
  fake_exec& e = cache.get(fusex::graph_key{7}, s1, work);  // captured, not launched
  CHECK(e.launches == 0);
  CHECK(cache.stats().launches == 0);
  CHECK(cache.find(fusex::graph_key{7}) == &e);
  CHECK(cache.find(fusex::graph_key{8}) == nullptr);
  fake_exec& r = cache.recapture(fusex::graph_key{7}, s2, work);
  CHECK(r.id == 1);
  CHECK(cache.size() == 1);
  CHECK(cache.policy().capture_streams == std::vector<cudaStream_t>{s1, s2});
  CHECK(cache.erase(fusex::graph_key{7}));
  CHECK_FALSE(cache.erase(fusex::graph_key{7}));
  CHECK(*cache.policy().alive == 0);
}

TEST_CASE("graph_key: shapes and values compare and hash as intended", "[graph][host][key]") {
  using fusex::graph_key;
  using fusex::shape_t;
  CHECK(graph_key{1, 2, 3} == graph_key{1, 2, 3});
  CHECK(graph_key{1, 2, 3} != graph_key{1, 2});
  CHECK(graph_key{1, 2, 3} != graph_key{3, 2, 1});
  CHECK(graph_key{} == graph_key{});
  CHECK(graph_key{0} != graph_key{});
  // A shape is its rank then its extents: [2, 3] != [6], ([2], [3]) != ([2, 3]).
  CHECK(graph_key::of(shape_t{2, 3}) != graph_key::of(shape_t{6}));
  CHECK(graph_key::of(shape_t{2}, shape_t{3}) != graph_key::of(shape_t{2, 3}));
  CHECK(graph_key::of(shape_t{2, 3}) == graph_key{2, 2, 3});
  CHECK(graph_key::of(16, shape_t{16, 784}, true).str() == "(16, 2, 16, 784, 1)");
  CHECK(graph_key::of(std::size_t{5}, std::int8_t{-1}) == graph_key{5, -1});
  CHECK(graph_key::of(shape_t{16, 784}).hash() == graph_key::of(shape_t{16, 784}).hash());
  CHECK(std::hash<graph_key>()(graph_key{4, 5}) == graph_key{4, 5}.hash());
  graph_key full;
  for (int i = 0; i < graph_key::capacity; ++i) full.add(i);
  CHECK_THROWS_AS(full.add(1), fusex::invalid_argument);

  // Hash spread: many similar keys (batch x sequence-length grids, permutations) rarely collide.
  std::unordered_set<std::size_t> hashes;
  std::set<std::vector<std::int64_t>> distinct;
  int n = 0;
  for (std::int64_t b = 1; b <= 64; ++b)
    for (std::int64_t l = 1; l <= 160; ++l) {
      const graph_key k = graph_key::of(shape_t{b, l, 784});
      hashes.insert(k.hash());
      distinct.insert(std::vector<std::int64_t>(k.begin(), k.end()));
      ++n;
    }
  CHECK(distinct.size() == static_cast<std::size_t>(n));
  CHECK(hashes.size() >= static_cast<std::size_t>(n) - 2);
  CHECK(graph_key{1, 2}.hash() != graph_key{2, 1}.hash());
  CHECK(graph_key{0}.hash() != graph_key{0, 0}.hash());
  CHECK(graph_key{-1}.hash() != graph_key{1}.hash());
}

TEST_CASE("batch_buckets: round batch sizes up to a captured size", "[graph][host][buckets]") {
  fusex::batch_buckets b({8, 1, 4, 2, 4, 16});
  CHECK(b.sizes() == std::vector<std::int64_t>{1, 2, 4, 8, 16});
  CHECK(b.bucket_for(1) == 1);
  CHECK(b.bucket_for(3) == 4);
  CHECK(b.bucket_for(8) == 8);
  CHECK(b.bucket_for(9) == 16);
  CHECK(b.largest() == 16);
  CHECK_THROWS_AS(b.bucket_for(17), fusex::invalid_argument);
  CHECK_THROWS_AS(b.bucket_for(0), fusex::invalid_argument);
  const auto p = fusex::batch_buckets::powers_of_two(3, 20);
  CHECK(p.sizes() == std::vector<std::int64_t>{4, 8, 16, 32});
  CHECK(fusex::batch_buckets::powers_of_two(1, 1).sizes() == std::vector<std::int64_t>{1});
  CHECK_THROWS_AS(fusex::batch_buckets::powers_of_two(0, 4), fusex::invalid_argument);
  CHECK_THROWS_AS(fusex::batch_buckets(std::vector<std::int64_t>{}), fusex::invalid_argument);
  CHECK_THROWS_AS(fusex::batch_buckets(std::vector<std::int64_t>{0, 4}), fusex::invalid_argument);
}

TEST_CASE("capture rules checked before any CUDA call", "[graph][host][rules]") {
  // The default streams cannot be captured.
  for (cudaStream_t s : {static_cast<cudaStream_t>(nullptr), cudaStreamLegacy, cudaStreamPerThread}) {
    try {
      fusex::graph_capture cap(s);
      FAIL("capturing a default stream must throw");
    } catch (const fusex::capture_error& e) {
      CHECK(e.rule() == fusex::capture_rule::default_stream);
      const std::string m = e.what();
      CHECK(m.find("default_stream") != std::string::npos);
      CHECK(m.find("default stream") != std::string::npos);
    }
  }
  // An empty graph_exec cannot be launched.
  fusex::graph_exec empty;
  CHECK_FALSE(empty);
  try {
    empty.launch(fake_stream(0x50));
    FAIL("launching an empty graph_exec must throw");
  } catch (const fusex::capture_error& e) {
    CHECK(e.rule() == fusex::capture_rule::empty_exec);
  }
  CHECK(empty.memory_bytes() == 0);
  CHECK(empty.kernel_node_count() == 0);
  // capture_error is a fusex::error.
  CHECK_THROWS_AS(fusex::graph_capture(nullptr), fusex::error);
  // Every rule has a name.
  for (auto r :
       {fusex::capture_rule::default_stream, fusex::capture_rule::nested_capture, fusex::capture_rule::wrong_thread,
        fusex::capture_rule::sync_during_capture, fusex::capture_rule::unjoined_fork, fusex::capture_rule::invalidated,
        fusex::capture_rule::released_memory, fusex::capture_rule::empty_exec, fusex::capture_rule::not_capturing})
    CHECK(std::string(fusex::to_string(r)) != "unknown");
  CHECK_THROWS_AS(fusex::graph_cache<>(fusex::graph_cache_options{0, 1, {}}), fusex::invalid_argument);
  CHECK_THROWS_AS(fusex::graph_cache<>(fusex::graph_cache_options{4, -1, {}}), fusex::invalid_argument);
}

TEST_CASE("copy_input checks sizes before copying", "[graph][host][input]") {
  // Views over fake device addresses: the checks throw before any copy is made.
  auto* fake = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  const auto dst = fusex::make_view(fake, {16, 784});
  const auto other = fusex::make_view(static_cast<const float*>(fake), {8, 784});
  const auto s = fake_stream(0x60);
  CHECK_THROWS_AS(fusex::copy_input(dst, other, s), fusex::shape_error);
  try {
    fusex::copy_input(dst, other, s);
  } catch (const fusex::shape_error& e) {
    const std::string m = e.what();
    CHECK(m.find("[16, 784]") != std::string::npos);
    CHECK(m.find("[8, 784]") != std::string::npos);
  }
  std::vector<float> host(100);
  CHECK_THROWS_AS(fusex::copy_input(dst, host, s), fusex::invalid_argument);
  CHECK_THROWS_AS(
      fusex::copy_input(dst.transpose(0, 1), fusex::make_view(static_cast<const float*>(fake), {784, 16}), s),
      fusex::invalid_argument);
  // Padding: the first extent may grow, the others must match.
  CHECK_THROWS_AS(fusex::copy_input_padded(fusex::make_view(fake, {8, 784}), dst, s), fusex::shape_error);
  CHECK_THROWS_AS(fusex::copy_input_padded(dst, fusex::make_view(static_cast<const float*>(fake), {8, 785}), s),
                  fusex::shape_error);
  CHECK_THROWS_AS(fusex::copy_input_padded(dst, fusex::make_view(static_cast<const float*>(fake), {8 * 784}), s),
                  fusex::shape_error);
}

TEST_CASE("graph inputs, keys, buckets, caches and empty execs: errors name the culprit", "[graph][host][errors]") {
  // Error catalogue (docs/reliability.md): the exception type, and the shapes, sizes or call.
  auto* fake = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  const auto dst = fusex::make_view(fake, {16, 784});
  const auto src = [&](fusex::shape_t shape) { return fusex::make_view(static_cast<const float*>(fake), shape); };
  const auto s = fake_stream(0x70);
  std::string m = thrown_message<fusex::shape_error>([&] { fusex::copy_input(dst, src({8, 784}), s); });
  INFO(m);
  CHECK(has(m, "copy_input: the captured buffer has shape [16, 784] but the new input has shape [8, 784]"));
  m = thrown_message<fusex::invalid_argument>([&] { fusex::copy_input(dst, std::vector<float>(100), s); });
  CHECK(has(m, "copy_input: the captured buffer (shape [16, 784]) holds 12544 elements but 100 were given"));
  m = thrown_message<fusex::invalid_argument>(
      [&] { fusex::copy_input(dst, static_cast<const float*>(nullptr), 12544, s); });
  CHECK(has(m, "copy_input: null source for 12544 elements into the captured buffer (shape [16, 784])"));
  m = thrown_message<fusex::invalid_argument>([&] { fusex::copy_input(dst.transpose(0, 1), src({784, 16}), s); });
  CHECK(has(m, "copy_input: the captured buffer (shape [784, 16]) is not contiguous"));
  m = thrown_message<fusex::invalid_argument>([&] {
    fusex::copy_input(fusex::make_view(fake, {784, 16}), src({16, 784}).transpose(0, 1), s);
  });
  CHECK(has(m, "copy_input: the new input (shape [784, 16]) is not contiguous"));
  m = thrown_message<fusex::shape_error>([&] { fusex::copy_input_padded(fusex::make_view(fake, {8, 784}), dst, s); });
  CHECK(has(m,
            "copy_input_padded: an input of shape [16, 784] does not pad up to the captured buffer of shape [8, 784]"));
  m = thrown_message<fusex::shape_error>([&] { fusex::copy_input_padded(dst, src({8, 785}), s); });
  CHECK(has(m, "an input of shape [8, 785] does not pad up to the captured buffer of shape [16, 784]"));

  fusex::graph_key full;
  for (int i = 0; i < fusex::graph_key::capacity; ++i) full.add(i);
  m = thrown_message<fusex::invalid_argument>([&] { full.add(1); });
  CHECK(has(m, "graph_key holds at most " + std::to_string(fusex::graph_key::capacity) + " values"));

  const fusex::batch_buckets b({1, 4, 16});
  CHECK(has(thrown_message<fusex::invalid_argument>([&] { (void)b.bucket_for(17); }),
            "batch size 17 exceeds the largest bucket (16)"));
  CHECK(has(thrown_message<fusex::invalid_argument>([&] { (void)b.bucket_for(0); }), "batch size 0 is not positive"));
  CHECK(has(thrown_message<fusex::invalid_argument>([] { (void)fusex::batch_buckets::powers_of_two(0, 4); }),
            "powers_of_two(0, 4): need 0 < smallest <= largest"));
  CHECK(has(thrown_message<fusex::invalid_argument>([] { (void)fusex::batch_buckets(std::vector<std::int64_t>{}); }),
            "batch_buckets needs at least one size"));
  CHECK(has(thrown_message<fusex::invalid_argument>([] {
              (void)fusex::batch_buckets(std::vector<std::int64_t>{4, -2});
            }),
            "batch_buckets sizes must be positive (got -2)"));

  CHECK(has(thrown_message<fusex::invalid_argument>([] {
              (void)fusex::graph_cache<>(fusex::graph_cache_options{0, 1, {}});
            }),
            "graph cache needs a capacity of at least 1"));
  CHECK(has(thrown_message<fusex::invalid_argument>([] {
              (void)fusex::graph_cache<>(fusex::graph_cache_options{4, -1, {}});
            }),
            "graph_cache_options::warmup_runs must be >= 0"));
  fake_cache cache(2);
  CHECK(has(thrown_message<fusex::invalid_argument>([&] { cache.set_capacity(0); }), "capacity of at least 1"));

  fusex::graph_exec empty;
  m = thrown_message<fusex::capture_error>([&] { empty.launch(s); });
  CHECK(has(m, "graph capture rule empty_exec broken: launch of an empty graph_exec"));
  m = thrown_message<fusex::capture_error>([&] { empty.upload(s); });
  CHECK(has(m, "graph capture rule empty_exec broken: upload of an empty graph_exec"));
}
