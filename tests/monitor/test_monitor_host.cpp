// fusex::launch_monitor's region logic on the host: launches are simulated with the same hook
// detail::launch_kernel and graph_exec::launch call (detail::note_launch / note_graph_launch).
#include <fusex/monitor.hpp>

#include "fusex_catch.hpp"

#include <chrono>
#include <thread>

namespace {

// A GPU timer whose elapsed time the test chooses; counts its calls.
struct fake_timer {
  double gpu_us = 0.0;
  int* starts = nullptr;
  int* stops = nullptr;
  int* releases = nullptr;
  void start() {
    if (starts) ++*starts;
  }
  void stop() {
    if (stops) ++*stops;
  }
  double elapsed_us() const { return gpu_us; }
  void release() noexcept {
    if (releases) ++*releases;
  }
};
using fake_monitor = fusex::detail::basic_launch_monitor<fake_timer>;

void launches(int n) {
  for (int i = 0; i < n; ++i) fusex::detail::note_launch();
}

}  // namespace

TEST_CASE("launch_monitor: no region, no count, no state", "[monitor]") {
  REQUIRE(fusex::detail::active_tally == nullptr);
  launches(5);
  fusex::detail::note_graph_launch();
  REQUIRE(fusex::detail::active_tally == nullptr);
}

TEST_CASE("launch_monitor: counts kernel and graph launches in its region only", "[monitor]") {
  launches(3);  // before: not counted
  fusex::launch_monitor mon;
  launches(7);
  fusex::detail::note_graph_launch();
  fusex::detail::note_graph_launch();
  REQUIRE(mon.kernel_launches() == 7);
  REQUIRE(mon.graph_launches() == 2);
  mon.stop();
  REQUIRE_FALSE(mon.running());
  launches(4);  // after: not counted
  const fusex::launch_report r = mon.report();
  REQUIRE(r.kernel_launches == 7);
  REQUIRE(r.graph_launches == 2);
  REQUIRE(r.launches() == 9);
  REQUIRE_FALSE(r.gpu_timed());  // no stream: host only
  REQUIRE_FALSE(r.launch_bound());
  REQUIRE(r.host_us >= 0.0);
  REQUIRE(fusex::detail::active_tally == nullptr);
}

TEST_CASE("launch_monitor: host time covers the region", "[monitor]") {
  fusex::launch_monitor mon;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const fusex::launch_report r = mon.report();
  REQUIRE(r.host_us >= 19000.0);
  REQUIRE(r.host_us < 5e6);
  // A second report returns the same values (the region stopped at the first).
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(mon.report().host_us == r.host_us);
}

TEST_CASE("launch_monitor: nested regions add their counts to the enclosing one", "[monitor]") {
  fusex::launch_monitor outer;
  launches(2);
  {
    fusex::launch_monitor inner;
    launches(5);
    fusex::detail::note_graph_launch();
    REQUIRE(inner.kernel_launches() == 5);
    REQUIRE(outer.kernel_launches() == 2);  // inner's launches arrive when it stops
  }
  REQUIRE(outer.kernel_launches() == 7);
  REQUIRE(outer.graph_launches() == 1);
  launches(1);
  REQUIRE(outer.report().kernel_launches == 8);
  REQUIRE(fusex::detail::active_tally == nullptr);
}

TEST_CASE("launch_monitor: an outer region stopped before an inner one", "[monitor]") {
  auto* outermost = new fusex::launch_monitor;
  auto* outer = new fusex::launch_monitor;
  auto* inner = new fusex::launch_monitor;
  launches(1);    // inner: 1
  outer->stop();  // out of order: outer is unlinked; inner now reports to outermost
  REQUIRE(outermost->kernel_launches() == 0);
  launches(2);  // inner: 3
  REQUIRE(inner->kernel_launches() == 3);
  delete inner;  // adds 3 to outermost
  REQUIRE(outermost->kernel_launches() == 3);
  REQUIRE(outer->report().kernel_launches == 0);
  delete outer;
  launches(1);
  REQUIRE(outermost->report().kernel_launches == 4);
  delete outermost;
  REQUIRE(fusex::detail::active_tally == nullptr);
}

TEST_CASE("launch_monitor: the launch-bound verdict compares host and GPU time", "[monitor]") {
  int starts = 0, stops = 0, releases = 0;
  {
    // GPU time 0: any host time is at least it.
    fake_monitor m(fake_timer{0.0, &starts, &stops, &releases});
    launches(3);
    const fusex::launch_report r = m.report();
    REQUIRE(r.gpu_timed());
    REQUIRE(r.gpu_us == 0.0);
    REQUIRE(r.launch_bound());
    REQUIRE(r.str().find("launch-bound") != std::string::npos);
  }
  REQUIRE(starts == 1);
  REQUIRE(stops == 1);
  REQUIRE(releases == 1);
  {
    // GPU time of an hour: the GPU is the bottleneck.
    fake_monitor m(fake_timer{3.6e9, nullptr, nullptr, nullptr});
    const fusex::launch_report r = m.report();
    REQUIRE_FALSE(r.launch_bound());
    REQUIRE(r.str().find("GPU-bound") != std::string::npos);
  }
  // The margin: the GPU span includes the idle time the host caused.
  fusex::launch_report r;
  r.gpu_us = 100.0;
  r.host_us = 95.0;
  REQUIRE(r.launch_bound());
  r.host_us = 80.0;
  REQUIRE_FALSE(r.launch_bound());
  r.gpu_us = -1.0;
  r.host_us = 1e6;
  REQUIRE_FALSE(r.launch_bound());
}

TEST_CASE("launch_monitor: stop is idempotent and report stops", "[monitor]") {
  int stops = 0;
  fake_monitor m(fake_timer{1.0, nullptr, &stops, nullptr});
  REQUIRE(m.running());
  m.stop();
  m.stop();
  (void)m.report();
  (void)m.report();
  REQUIRE(stops == 1);
}

TEST_CASE("launch_monitor: regions are per thread", "[monitor]") {
  fusex::launch_monitor mon;
  bool other_thread_idle = false;
  std::thread t([&] {
    other_thread_idle = fusex::detail::active_tally == nullptr;
    launches(10);  // another thread: not this region's
  });
  t.join();
  REQUIRE(other_thread_idle);
  launches(1);
  REQUIRE(mon.report().kernel_launches == 1);
}
