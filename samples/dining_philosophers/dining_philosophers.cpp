// dining_philosophers — Preshing's box-office solution (Preshing, "Semaphores are Surprisingly Versatile") on Tessera.
//
// The box office is a table of philosopher states (thinking / hungry / eating)
// guarded by a tessera::mutex; each philosopher has a binary semaphore as its
// bouncer. A hungry philosopher eats as soon as neither neighbour eats; when one
// puts the forks down, the box office lets a hungry neighbour in. Philosophers
// are fibers (or OS threads with --threads); every meal checks that neither
// neighbour is eating at the same moment, and the program fails if one ever was.
#include <tessera/tessera.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "../stats_table.h"

namespace {

class box_office {
 public:
  explicit box_office(int n) : n_(n), state_(static_cast<std::size_t>(n), thinking) {
    for (int i = 0; i < n; ++i) bouncer_.push_back(std::make_unique<tessera::binary_semaphore>(0));
  }
  void pick_up(int i) {
    {
      std::lock_guard lock(mu_);
      state_[static_cast<std::size_t>(i)] = hungry;
      admit_if_possible(i);
    }
    bouncer_[static_cast<std::size_t>(i)]->acquire();  // wait until the box office says "eat"
  }
  void put_down(int i) {
    std::lock_guard lock(mu_);
    state_[static_cast<std::size_t>(i)] = thinking;
    admit_if_possible(left(i));
    admit_if_possible(right(i));
  }

 private:
  enum st { thinking, hungry, eating };
  int left(int i) const { return (i + n_ - 1) % n_; }
  int right(int i) const { return (i + 1) % n_; }
  void admit_if_possible(int i) {  // caller holds mu_
    auto& s = state_;
    const auto u = static_cast<std::size_t>(i);
    if (s[u] == hungry && s[static_cast<std::size_t>(left(i))] != eating &&
        s[static_cast<std::size_t>(right(i))] != eating) {
      s[u] = eating;
      bouncer_[u]->release();
    }
  }

  int n_;
  tessera::mutex mu_;
  std::vector<st> state_;  // guarded by mu_
  std::vector<std::unique_ptr<tessera::binary_semaphore>> bouncer_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dining_philosophers: Preshing's box office on Tessera"};
  int philosophers = 5, meals = 20000;
  unsigned workers = 2;
  bool threads = false;
  app.add_option("-n,--philosophers", philosophers, "philosophers at the table")->check(CLI::Range(2, 100000));
  app.add_option("-m,--meals", meals, "meals each")->check(CLI::Range(1, 100000000));
  app.add_option("-w,--workers", workers, "runtime workers (fiber mode)")->check(CLI::Range(1u, 1024u));
  app.add_flag("--threads", threads, "philosophers are OS threads instead of fibers");
  bool stats = false;
  app.add_flag("--stats", stats, "print each worker's counters (runtime::stats) at the end");
  CLI11_PARSE(app, argc, argv);

  box_office office(philosophers);
  std::vector<std::atomic<int>> eating(static_cast<std::size_t>(philosophers));
  std::vector<long> eaten(static_cast<std::size_t>(philosophers), 0);
  std::atomic<long> conflicts{0};
  auto philosopher = [&](int i) {
    std::mt19937 rng(static_cast<unsigned>(i));
    const auto l = static_cast<std::size_t>((i + philosophers - 1) % philosophers);
    const auto r = static_cast<std::size_t>((i + 1) % philosophers);
    for (int k = 0; k < meals; ++k) {
      office.pick_up(i);
      eating[static_cast<std::size_t>(i)].store(1);
      if (eating[l].load() != 0 || eating[r].load() != 0) conflicts.fetch_add(1);
      for (unsigned spin = rng() % 64; spin > 0; --spin) rng();  // eat a little
      eating[static_cast<std::size_t>(i)].store(0);
      ++eaten[static_cast<std::size_t>(i)];
      office.put_down(i);
      if (rng() % 8 == 0) tessera::yield_now();  // think
    }
  };

  const auto start = std::chrono::steady_clock::now();
  if (threads) {
    std::vector<std::thread> ts;
    for (int i = 0; i < philosophers; ++i) ts.emplace_back(philosopher, i);
    for (auto& t : ts) t.join();
  } else {
    tessera::runtime rt({.workers = workers});
    rt.run([&] {
      std::vector<tessera::fiber> fs;
      for (int i = 0; i < philosophers; ++i) fs.emplace_back(philosopher, i);
      for (auto& f : fs) f.join();
    });
    if (stats) tessera::samples::print_stats(rt.stats());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  long total = 0;
  for (long e : eaten) total += e;
  std::printf("%d philosophers (%s), %ld meals in %.3f s (%.0f meals/s)\n", philosophers,
              threads ? "threads" : "fibers", total, secs, static_cast<double>(total) / secs);
  if (conflicts.load() != 0 || total != static_cast<long>(philosophers) * meals) {
    std::printf("FAIL: %ld meals eaten next to an eating neighbour\n", conflicts.load());
    return 1;
  }
  std::printf("OK: neighbours never ate at the same time\n");
  return 0;
}
