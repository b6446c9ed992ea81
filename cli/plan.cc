#include "cli/plan.h"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exit_codes.h"
#include "experiment/cost_model.h"
#include "experiment/step_measure.h"

namespace pstrain {

using experiment::Plan;
using experiment::PlanRow;

int PlanMain(const std::string& self_path, CliArgs& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "pstrain plan: %s\n", std::string(s.message()).c_str());
    return CommandExitCode(s);
  };
  auto model_bytes = args.GetDouble("model-bytes", 0);
  auto workers = args.GetInt("workers", 0);
  auto bandwidth = args.GetDouble("bandwidth", 0);
  auto step_ms = args.GetDouble("step-ms", 0);
  auto max_ps = args.GetInt("max-ps", 0);
  auto measure = args.GetBool("measure", false);
  for (const absl::Status& s : {model_bytes.status(), workers.status(), bandwidth.status(),
                                step_ms.status(), max_ps.status(), measure.status()}) {
    if (!s.ok()) return fail(s);
  }
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return fail(s);
  if (!(*model_bytes >= 4 && *model_bytes <= 1e12) || *workers < 1 || *workers > 4096 ||
      !(*step_ms >= 0) || *max_ps < 0 || *max_ps > 256) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "--model-bytes=", *model_bytes, " --workers=", *workers, " --step-ms=", *step_ms,
        " --max-ps=", *max_ps,
        ": need 4 <= model bytes <= 1e12, 1..4096 workers, step-ms >= 0, max-ps 0..256")));
  }
  if (!*measure && !(*bandwidth > 0)) {
    return fail(absl::InvalidArgumentError(
        "--bandwidth=GBPS (each link's GB/s) is needed, or --measure to take it from this "
        "machine"));
  }
  const int k = *max_ps > 0 ? static_cast<int>(*max_ps)
                            : static_cast<int>(std::min<int64_t>(2 * *workers, 16));
  double bw = *bandwidth * 1e9;
  std::vector<double> measured;
  int measured_up_to = 0;
  if (*measure) {
    // What fits here: one process per PS and a thread per worker on this
    // machine's cores, a few seconds each.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    measured_up_to = std::min(k, std::max(1, cores));
    std::printf(
        "measuring on this machine (%d cores): %d worker thread(s), 1..%d PS process(es) "
        "on loopback, 3 s each\n",
        cores, static_cast<int>(*workers), measured_up_to);
    for (int p = 1; p <= measured_up_to; ++p) {
      auto step = experiment::MeasureStep(self_path, *model_bytes, static_cast<int>(*workers), p,
                                          absl::Seconds(3));
      if (!step.ok()) return fail(step.status());
      measured.push_back(*step);
    }
    if (!(*bandwidth > 0)) {
      // Calibrate the link from 1 PS: its step is 2BN / BW (compute 0).
      bw = 2 * *model_bytes * *workers / measured[0];
      std::printf("bandwidth taken from the 1-PS measurement: %.2f GB/s per link\n", bw / 1e9);
    }
  }
  const Plan plan =
      experiment::MakePlan(*model_bytes, static_cast<int>(*workers), bw, *step_ms / 1000, k);
  std::printf("model %.1f MB, %d workers, %.2f GB/s links, compute %.1f ms per step\n",
              *model_bytes / 1e6, static_cast<int>(*workers), bw / 1e9, *step_ms);
  std::printf("each worker moves 2 x %.1f MB per step: %.2f ms on its link\n", *model_bytes / 1e6,
              2 * *model_bytes / bw * 1000);
  std::printf("\n%4s  %14s  %15s%s\n", "PS", "MB per PS/step", "predicted step",
              measured.empty() ? "" : "  measured step  error");
  for (const PlanRow& row : plan.rows) {
    std::string m;
    if (row.num_ps <= static_cast<int>(measured.size())) {
      const double got = measured[row.num_ps - 1];
      m = absl::StrFormat("  %10.2f ms  %+5.0f%%", got * 1000, 100 * (row.step_s - got) / got);
    }
    std::printf("%4d  %14.1f  %12.2f ms%s%s\n", row.num_ps, row.ps_bytes / 1e6, row.step_s * 1000,
                m.c_str(), row.num_ps == plan.recommended_ps ? "   <- recommended" : "");
  }
  std::string allreduce_measured;
  if (*measure) {
    auto step = experiment::MeasureAllReduceStep(*model_bytes, static_cast<int>(*workers),
                                                 absl::Seconds(3));
    if (!step.ok()) return fail(step.status());
    allreduce_measured = absl::StrFormat(
        "; measured %.2f ms (%+.0f%%: %d ring members as threads, TCP links on loopback)",
        *step * 1000, *step > 0 ? 100 * (plan.allreduce_step_s - *step) / *step : 0.0,
        static_cast<int>(*workers));
  }
  std::printf("\nring all-reduce of the same gradient, no PS: %.2f ms per step predicted%s\n",
              plan.allreduce_step_s * 1000, allreduce_measured.c_str());
  const double recommended_step = plan.rows[plan.recommended_ps - 1].step_s;
  if (plan.cap_binds) {
    std::printf(
        "recommended: %d PS, the cap (--max-ps=%d) binds: %.2f ms per step, %.1fx the "
        "%.2f ms of unlimited PS; %d PS come within 10%% of that and %d reach it (each "
        "worker's own link is then the limit): raise --max-ps to go further.",
        plan.recommended_ps, k, recommended_step * 1000, recommended_step / plan.floor_step_s,
        plan.floor_step_s * 1000, plan.ps_within_10_percent, plan.ps_at_floor);
  } else {
    std::printf(
        "recommended: %d PS (the fewest within 10%% of unlimited PS, %.2f ms); beyond %d "
        "PS each worker's own link is the limit.",
        plan.recommended_ps, plan.floor_step_s * 1000, static_cast<int>(*workers));
  }
  if (plan.recommended_ps > 1) {
    std::printf(
        " One PS is enough once a step computes for %.1f ms or more (--step-ms; %.1f ms "
        "given): its extra traffic then stays within the 10%% margin.",
        plan.one_ps_enough_from_compute_s * 1000, *step_ms);
  } else {
    std::printf(" One PS is enough for this model.");
  }
  std::printf("%s\n", plan.allreduce_step_s < recommended_step
                          ? " All-reduce moves less per worker link at this size: PS pay off when "
                            "updates are sparse, asynchronous or the workers are many and "
                            "unreliable."
                          : "");
  return kExitOk;
}

}  // namespace pstrain
