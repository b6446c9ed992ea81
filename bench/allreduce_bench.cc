// The ring all-reduce (transport/ring.h) across processes on loopback, as
// NCCL's tests and gloo's benchmark measure one: every process sums an
// array of --bytes of floats with the others, back to back, for --seconds,
// --repeat times; printed per round and as medians: the time per
// all-reduce, the algorithm bandwidth (bytes / time) and the bus bandwidth
// (algorithm bandwidth x 2(n-1)/n, what each link carries).
//
//   bazel-bin/bench/allreduce_bench --processes=2 --bytes=4194304 --seconds=3 --repeat=5
//
// The first process starts the others (this binary again, --rank=R) and
// reports; each process is one member of the ring (one connection to each
// neighbour, a sender thread beside the caller's). Links between processes
// share memory (transport/ring.h) unless --noshared_memory. Each round also
// prints the CPU time (user + system) each process spent per all-reduce,
// their sum, and how many of the machine's cores that sum kept busy: a
// ring with more processes than cores is bound by CPU, not by its links.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/cli_args.h"
#include "base/median.h"
#include "base/process_stats.h"
#include "base/subprocess.h"
#include "transport/ring.h"

namespace pstrain {
namespace {

struct Options {
  int processes = 2;
  int64_t bytes = 4 << 20;
  double seconds = 3;
  int repeat = 5;
  int64_t piece_bytes = 512 << 10;
  bool shared_memory = true;
  bool bfloat16_wire = false;
  int rank = -1;  // -1: the first process, which starts the others
  std::vector<int> ports;
};

struct MemberResult {
  std::vector<double> per_round;  // seconds per all-reduce
  // Per round, each member's CPU seconds per all-reduce (rank order).
  std::vector<std::vector<double>> cpu_per_round;
  std::vector<int> threads;  // each member's threads, rank order
  std::string links;         // Ring::DescribeLinks
};

// Every member's number, parsed, from an AllGather of `mine`.
absl::StatusOr<std::vector<double>> GatherNumbers(Ring& ring, double mine) {
  auto all = ring.AllGather(absl::StrCat(mine));
  if (!all.ok()) return all.status();
  std::vector<double> out;
  for (const std::string& text : *all) {
    double v = 0;
    if (!absl::SimpleAtod(text, &v)) return absl::InternalError("bad number: " + text);
    out.push_back(v);
  }
  return out;
}

// One member's part.
absl::StatusOr<MemberResult> RunMember(const Options& o) {
  RingOptions ring_options;
  for (int r = 0; r < o.processes; ++r) {
    ring_options.members.push_back({absl::StrCat("process:", r), "127.0.0.1", o.ports[r]});
  }
  ring_options.rank = o.rank < 0 ? 0 : o.rank;
  ring_options.job_key = absl::StrCat("allreduce_bench ", o.bytes);
  ring_options.piece_bytes = o.piece_bytes;
  ring_options.shared_memory = o.shared_memory;
  auto ring = Ring::Form(ring_options);
  if (!ring.ok()) return ring.status();
  std::vector<float> data(o.bytes / sizeof(float), 1.0f);
  // The sums grow to inf after a few hundred rounds; float adds of inf
  // take as long as any others on x86.
  auto all_reduce = [&]() -> absl::Status {
    return (*ring)->AllReduceSum(absl::MakeSpan(data), o.bfloat16_wire);
  };
  for (int i = 0; i < 3; ++i) {
    if (absl::Status s = all_reduce(); !s.ok()) return s;
  }
  std::vector<double> per_round;
  std::vector<std::vector<double>> cpu_per_round;
  for (int round = 0; round < o.repeat; ++round) {
    // The first member times one all-reduce and decides how many fill
    // --seconds; everyone runs that many.
    absl::Time t0 = absl::Now();
    if (absl::Status s = all_reduce(); !s.ok()) return s;
    const double one = std::max(1e-6, absl::ToDoubleSeconds(absl::Now() - t0));
    auto agreed = (*ring)->AllGather(absl::StrCat(std::max<int64_t>(1, o.seconds / one)));
    if (!agreed.ok()) return agreed.status();
    int64_t iterations = 1;
    if (!absl::SimpleAtoi((*agreed)[0], &iterations)) return absl::InternalError("bad count");
    const double cpu0 = CpuSeconds().value_or(0);
    t0 = absl::Now();
    for (int64_t i = 0; i < iterations; ++i) {
      if (absl::Status s = all_reduce(); !s.ok()) return s;
    }
    per_round.push_back(absl::ToDoubleSeconds(absl::Now() - t0) / iterations);
    auto cpu = GatherNumbers(**ring, (CpuSeconds().value_or(0) - cpu0) / iterations);
    if (!cpu.ok()) return cpu.status();
    cpu_per_round.push_back(*std::move(cpu));
  }
  auto threads = GatherNumbers(**ring, ThreadCount().value_or(0));
  if (!threads.ok()) return threads.status();
  return MemberResult{per_round, cpu_per_round, std::vector<int>(threads->begin(), threads->end()),
                      (*ring)->DescribeLinks()};
}

int Main(int argc, char** argv) {
  auto args = CliArgs::Parse(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "%s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  Options o;
  auto processes = args->GetIntInRange("processes", o.processes, 1, 64);
  auto bytes = args->GetIntInRange("bytes", o.bytes, 4, int64_t{1} << 34);
  auto seconds = args->GetDouble("seconds", o.seconds);
  auto repeat = args->GetIntInRange("repeat", o.repeat, 1, 1000);
  auto piece = args->GetIntInRange("piece_bytes", o.piece_bytes, 4, int64_t{1} << 30);
  auto rank = args->GetIntInRange("rank", -1, -1, 63);
  auto ports = args->GetString("ports", "");
  auto shared = args->GetBool("shared_memory", o.shared_memory);
  auto wire = args->GetString("wire_dtype", "float32");
  for (const absl::Status& s : {processes.status(), bytes.status(), seconds.status(),
                                repeat.status(), piece.status(), rank.status(), ports.status(),
                                shared.status(), wire.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  o.processes = static_cast<int>(*processes);
  o.bytes = *bytes / 4 * 4;
  o.seconds = *seconds;
  o.repeat = static_cast<int>(*repeat);
  o.piece_bytes = *piece;
  o.rank = static_cast<int>(*rank);
  o.shared_memory = *shared;
  if (*wire != "float32" && *wire != "bfloat16") {
    std::fprintf(stderr, "--wire_dtype=%s: must be float32 or bfloat16\n", wire->c_str());
    return 2;
  }
  o.bfloat16_wire = *wire == "bfloat16";
  std::vector<pid_t> children;
  if (o.rank < 0) {
    auto picked = PickFreePorts(o.processes);
    if (!picked.ok()) {
      std::fprintf(stderr, "%s\n", std::string(picked.status().message()).c_str());
      return 1;
    }
    o.ports = *picked;
    for (int r = 1; r < o.processes; ++r) {
      SpawnOptions spawn;
      spawn.argv = {"/proc/self/exe", absl::StrCat("--processes=", o.processes),
                    absl::StrCat("--bytes=", o.bytes), absl::StrCat("--seconds=", o.seconds),
                    absl::StrCat("--repeat=", o.repeat), absl::StrCat("--piece_bytes=", o.piece_bytes),
                    o.shared_memory ? "--shared_memory" : "--noshared_memory",
                    absl::StrCat("--wire_dtype=", o.bfloat16_wire ? "bfloat16" : "float32"),
                    absl::StrCat("--rank=", r), absl::StrCat("--ports=", absl::StrJoin(o.ports, ","))};
      auto pid = Spawn(spawn);
      if (!pid.ok()) {
        std::fprintf(stderr, "%s\n", std::string(pid.status().message()).c_str());
        StopChildren(children, absl::Seconds(1));
        return 1;
      }
      children.push_back(*pid);
    }
  } else {
    for (absl::string_view p : absl::StrSplit(*ports, ',')) {
      int port = 0;
      if (!absl::SimpleAtoi(p, &port)) return 2;
      o.ports.push_back(port);
    }
  }
  auto result = RunMember(o);
  if (o.rank >= 0) return result.ok() ? 0 : 1;
  for (pid_t c : children) {
    auto e = WaitChild(c, absl::Seconds(30));
    if (!e.has_value() || e->code != 0) {
      std::fprintf(stderr, "process %d failed\n", static_cast<int>(c));
      StopChildren(children, absl::Seconds(1));
      return 1;
    }
  }
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  const std::vector<double>* rounds = &result->per_round;
  const int n = o.processes;
  const double bus = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  cpu_set_t affinity;
  const int cores = sched_getaffinity(0, sizeof(affinity), &affinity) == 0
                        ? CPU_COUNT(&affinity)
                        : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::printf(
      "ring all-reduce: %d processes on 127.0.0.1 (%d cores), one TCP frame connection to "
      "each neighbour, a sender thread beside the caller's (threads per process: %s); "
      "%lld bytes of float32 (%s on the wire), pieces of %lld elements\n"
      "  process:0's links: %s\n",
      n, cores, absl::StrJoin(result->threads, ", ").c_str(), static_cast<long long>(o.bytes),
      o.bfloat16_wire ? "bfloat16" : "float32", static_cast<long long>(o.piece_bytes / 4),
      result->links.c_str());
  std::vector<double> algbw, cpu_all, busy;
  for (size_t i = 0; i < rounds->size(); ++i) {
    const double t = (*rounds)[i];
    algbw.push_back(o.bytes / t / 1e9);
    const std::vector<double>& cpu = result->cpu_per_round[i];
    double sum = 0;
    std::vector<std::string> each;
    for (double c : cpu) {
      sum += c;
      each.push_back(absl::StrFormat("%.3f", c * 1e3));
    }
    cpu_all.push_back(sum);
    busy.push_back(sum / t);
    std::printf(
        "  round %zu: %.3f ms per all-reduce, algbw %.3f GB/s, busbw %.3f GB/s; CPU per "
        "all-reduce %s ms (all %.3f ms: %.2f of %d cores busy)\n",
        i + 1, t * 1e3, algbw.back(), algbw.back() * bus, absl::StrJoin(each, " / ").c_str(),
        sum * 1e3, busy.back(), cores);
  }
  std::printf(
      "  median of %d: %.3f ms, algbw %.3f GB/s, busbw %.3f GB/s; CPU of all processes "
      "%.3f ms per all-reduce, %.2f of %d cores busy\n",
      o.repeat, Median(*rounds) * 1e3, Median(algbw), Median(algbw) * bus, Median(cpu_all) * 1e3,
      Median(busy), cores);
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) { return pstrain::Main(argc, argv); }
