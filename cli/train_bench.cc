#include "cli/train_bench.h"

#include <cblas.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "launcher/local_cluster.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/median.h"
#include "base/status_macros.h"
#include "job/job_flags.h"
#include "model/backend.h"
#include "model/compute_threads.h"
#include "model/cuda_device.h"
#include "train/local_trainer.h"

namespace pstrain {
namespace {

using Gemm = model::GemmShape;

// The sgemm calls of one training step of `model` at `batch`
// (Network::StepGemms: per layer with variables the forward product, the
// weight gradient, and the input gradient where one is needed).
absl::StatusOr<std::vector<Gemm>> StepGemms(const model::NetworkSpec& model, int batch) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Network> net,
                           model::Network::Create(model, batch));
  return net->StepGemms(batch);
}

double GemmFlops(const std::vector<Gemm>& gemms) {
  double f = 0;
  for (const Gemm& g : gemms) f += 2.0 * g.m * g.n * g.k;
  return f;
}

// OpenBLAS's rate (FLOP/s) on the current thread count for these calls,
// timed over at least `seconds`.
double MeasureGemms(const std::vector<Gemm>& gemms, double seconds) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::vector<float>> a(gemms.size()), b(gemms.size()), c(gemms.size());
  for (size_t i = 0; i < gemms.size(); ++i) {
    const Gemm& g = gemms[i];
    a[i].resize(static_cast<size_t>(g.m) * g.k);
    b[i].resize(static_cast<size_t>(g.k) * g.n);
    c[i].resize(static_cast<size_t>(g.m) * g.n);
    for (float& x : a[i]) x = u(rng);
    for (float& x : b[i]) x = u(rng);
  }
  auto run = [&] {
    for (size_t i = 0; i < gemms.size(); ++i) {
      const Gemm& g = gemms[i];
      const int lda = g.trans_a ? g.m : g.k;
      const int ldb = g.trans_b ? g.k : g.n;
      cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                  g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, a[i].data(), lda,
                  b[i].data(), ldb, 0.0f, c[i].data(), g.n);
    }
  };
  for (int i = 0; i < 20; ++i) run();  // warm caches and OpenBLAS's buffers
  int64_t iters = 0;
  const absl::Time start = absl::Now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 50; ++i) run();
    iters += 50;
    elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  }
  return GemmFlops(gemms) * iters / elapsed;
}

// Forward and backward on CUDA device `device` at `batch` (no optimizer),
// timed over at least `min_seconds` and 20 steps after 20 of warm-up.
struct CudaStepRun {
  double seconds_per_step = 0;
  double copy_share = 0;  // of step time, in host<->device copies
};
absl::StatusOr<CudaStepRun> CudaStepRate(const model::NetworkSpec& spec, int device, int batch,
                                         double min_seconds) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> cuda,
                           model::CreateBackend(spec, batch, model::Device::Cuda(device)));
  const std::vector<float> params = cuda->network().InitialParameters(1);
  std::vector<float> grads(params.size());
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> x(static_cast<size_t>(batch) * cuda->network().input_width());
  for (float& v : x) v = pixel(rng);
  std::vector<int32_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = i % spec.num_classes();
  for (int i = 0; i < 20; ++i) {
    PSTRAIN_RETURN_IF_ERROR(
        cuda->ComputeGradients(params.data(), x.data(), y.data(), batch, grads.data()).status());
  }
  double copy = 0, total = 0, elapsed = 0;
  int64_t steps = 0;
  const absl::Time start = absl::Now();
  while (steps < 20 || elapsed < min_seconds) {
    PSTRAIN_RETURN_IF_ERROR(
        cuda->ComputeGradients(params.data(), x.data(), y.data(), batch, grads.data()).status());
    double c = 0, t = 0;
    cuda->LastStepTiming(&c, &t);
    copy += c;
    total += t;
    ++steps;
    elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  }
  CudaStepRun run;
  run.seconds_per_step = elapsed / static_cast<double>(steps);
  run.copy_share = total > 0 ? copy / total : 0;
  return run;
}

// The CUDA rows: forward + backward at batch 32, 256 and 1024 against the
// cuBLAS-only time of the same step's products (model::CudaGemmSeconds).
// Skipped, saying why, without a usable device; an error only from CUDA
// once one was found.
absl::Status PrintCudaRows(const model::JobSpec& job) {
  if (job.device.kind == model::Device::Kind::kCpu) {
    std::printf("  cuda: skipped (--device=cpu)\n");
    return absl::OkStatus();
  }
  auto devices = model::ListCudaDevices();
  if (!devices.ok()) {
    std::printf("  cuda: skipped (%s)\n", std::string(devices.status().message()).c_str());
    return absl::OkStatus();
  }
  const int device = job.device.kind == model::Device::Kind::kCuda ? job.device.index : 0;
  if (device >= static_cast<int>(devices->size())) {
    return absl::InvalidArgumentError(absl::StrCat("--device=", job.device.ToString(), ": only ",
                                                   devices->size(), " CUDA device(s) here"));
  }
  const model::CudaDeviceInfo& info = (*devices)[device];
  std::printf(
      "  cuda: device %d %s (sm_%d%d), forward + backward against the cuBLAS-only time\n"
      "  of the same step's sgemm calls:\n",
      device, info.name.c_str(), info.major, info.minor);
  for (int batch : {32, 256, 1024}) {
    PSTRAIN_ASSIGN_OR_RETURN(CudaStepRun step, CudaStepRate(job.model, device, batch, 1.0));
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<Gemm> gemms, StepGemms(job.model, batch));
    PSTRAIN_ASSIGN_OR_RETURN(double blas, model::CudaGemmSeconds(device, gemms, 0.5));
    std::printf(
        "  cuda, batch %4d: %.0f examples/s, %.3f ms a step (copies %.0f%%); cuBLAS alone "
        "%.3f ms (%.1f GFLOP/s, limit %.0f examples/s): the step takes %.2fx its cuBLAS time\n",
        batch, batch / step.seconds_per_step, 1e3 * step.seconds_per_step, 100 * step.copy_share,
        1e3 * blas, GemmFlops(gemms) / blas / 1e9, batch / blas, step.seconds_per_step / blas);
  }
  return absl::OkStatus();
}

struct ClusterRun {
  std::string name;
  int workers;
  std::string consistency;
  std::vector<std::string> flags;  // besides the bench's own
  bool tls = false;                // every task with --certs's TLS and token
  // TLS runs: who sealed the frames' records, as the last run's first
  // worker logged it.
  std::string sealing;
};

// Who sealed the records of a TLS run's frames, as its first worker logged
// it with the connection ("records sealed and opened by the kernel", or
// "records sealed by OpenSSL in this process (why)"); "" when it did not.
std::string TlsSealingOf(const std::string& output_dir) {
  absl::StatusOr<std::string> log = ReadFile(output_dir + "/logs/worker-0.log");
  if (!log.ok()) return "";
  const size_t at = log->find("records sealed ");
  if (at == std::string::npos) return "";
  const size_t end = log->find('\n', at);
  std::string said = log->substr(at, end == std::string::npos ? end : end - at);
  if (!said.empty() && said.back() == ')') said.pop_back();  // the log line's own parenthesis
  return said;
}

}  // namespace

int TrainBenchMain(const std::string& self_path, CliArgs& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "pstrain bench: %s\n", std::string(s.message()).c_str());
    return CommandExitCode(s);
  };
  auto steps = args.GetInt("steps", 1000);
  auto repeat = args.GetInt("repeat", 3);
  if (!steps.ok()) return fail(steps.status());
  if (!repeat.ok()) return fail(repeat.status());
  if (*steps < 10 || *repeat < 1 || *repeat > 100) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "--steps=", *steps, " --repeat=", *repeat, ": need at least 10 steps and 1..100 repeats")));
  }
  std::string default_dir = "/tmp/pstrain-bench-XXXXXX";
  if (::mkdtemp(default_dir.data()) == nullptr) {
    return fail(absl::InternalError("cannot create a directory under /tmp"));
  }
  auto output_dir = args.GetString("output_dir", default_dir);
  if (!output_dir.ok()) return fail(output_dir.status());
  // --certs=DIR (what deploy/make_certs.sh DIR makes): the TLS runs too.
  auto certs = args.GetString("certs", "");
  if (!certs.ok()) return fail(certs.status());
  // --cuda_only: the CUDA rows alone (no data read, nothing launched).
  auto cuda_only = args.GetBool("cuda_only", false);
  if (!cuda_only.ok()) return fail(cuda_only.status());
  // The default directory, made above, stays only where the runs write.
  if (*cuda_only || *output_dir != default_dir) ::rmdir(default_dir.c_str());
  std::vector<std::string> tls_flags;
  if (!certs->empty()) {
    tls_flags = {"--tls_cert=" + *certs + "/cert.pem", "--tls_key=" + *certs + "/key.pem",
                 "--tls_ca=" + *certs + "/ca.pem", "--token_file=" + *certs + "/token"};
  }
  // The job flags, passed on to every launched task as given.
  std::vector<std::string> job_flags;
  for (const std::string& flag : args.raw_flags()) {
    if (absl::StartsWith(flag, "--steps") || absl::StartsWith(flag, "--repeat") ||
        absl::StartsWith(flag, "--output_dir") || absl::StartsWith(flag, "--max_steps") ||
        absl::StartsWith(flag, "--certs") || absl::StartsWith(flag, "--cuda_only") ||
        absl::StartsWith(flag, "--nocuda_only") || absl::StartsWith(flag, "--consistency") ||
        absl::StartsWith(flag, "--chief_trains") || absl::StartsWith(flag, "--nochief_trains")) {
      continue;
    }
    job_flags.push_back(flag);
  }
  auto job = JobSpecFromFlags(args);
  if (!job.ok()) return fail(job.status());
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return fail(s);
  job->max_steps = *steps;
  job->consistency = Consistency::Async();

  // One BLAS thread for this process and every task it starts.
  model::SetComputeThreads(1);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);

  auto step_gemms = StepGemms(job->model, job->batch_size);
  if (!step_gemms.ok()) return fail(step_gemms.status());
  const std::vector<Gemm> gemms = *std::move(step_gemms);
  const double flop_per_example = GemmFlops(gemms) / job->batch_size;
  if (*cuda_only) {
    std::printf("model: %.3f MFLOP of sgemm per example (%zu sgemm calls per step)\n",
                flop_per_example / 1e6, gemms.size());
    if (absl::Status st = PrintCudaRows(*job); !st.ok()) return fail(st);
    return kExitOk;
  }
  std::vector<ClusterRun> clusters = {
      {"1 PS + 1 worker, async", 1, "async"},
      {"1 PS + 2 workers, async", 2, "async"},
      {"1 PS + 2 workers, sync", 2, "sync"},
      // The same as the first without shared memory, as between hosts:
      // every tensor byte through the loopback socket, in the frames over
      // the PS's TCP frame port, then in the gRPC stream.
      {"1 PS + 1 worker, async, frames over TCP", 1, "async", {"--noshared_memory"}},
      {"1 PS + 1 worker, async, frames in gRPC",
       1,
       "async",
       {"--noshared_memory", "--notcp_frames"}},
      // Frames over TCP with half the tensor bytes (--wire_dtype).
      {"1 PS + 1 worker, async, frames over TCP, bfloat16",
       1,
       "async",
       {"--noshared_memory", "--wire_dtype=bfloat16"}},
  };
  if (!tls_flags.empty()) {
    // With the job's TLS and token (as between hosts in a secured job):
    // frames over the TCP port inside TLS, and in the gRPC stream inside
    // gRPC's TLS.
    clusters.push_back(
        {"1 PS + 1 worker, async, frames over TCP inside TLS", 1, "async", {"--noshared_memory"},
         true});
    clusters.push_back({"1 PS + 1 worker, async, frames in gRPC inside TLS",
                        1,
                        "async",
                        {"--noshared_memory", "--notcp_frames"},
                        true});
  }
  // Where train --local computed (--device: auto takes a usable CUDA
  // device): on CUDA, the CPU's sgemm limit says nothing of its rate.
  std::string local_on;
  std::vector<double> gemm_rate, local_rate;
  std::vector<std::vector<double>> cluster_rate(clusters.size()), cluster_ratio(clusters.size());
  std::printf("model: %.3f MFLOP of sgemm per example (batch %d, %zu sgemm calls per step)\n",
              flop_per_example / 1e6, job->batch_size, gemms.size());
  for (int r = 0; r < *repeat; ++r) {
    gemm_rate.push_back(MeasureGemms(gemms, 1.0));
    auto local = train::RunLocal(*job, 1 << 30);
    if (!local.ok()) return fail(local.status());
    local_rate.push_back(local->examples_per_sec);
    local_on = local->backend;
    if (local_on == "cpu") {
      std::printf(
          "round %d: sgemm %.1f GFLOP/s -> limit %.0f examples/s; local %.0f examples/s "
          "(%.2fx the limit)\n",
          r + 1, gemm_rate.back() / 1e9, gemm_rate.back() / flop_per_example, local_rate.back(),
          local_rate.back() * flop_per_example / gemm_rate.back());
    } else {
      std::printf("round %d: sgemm %.1f GFLOP/s on the CPU; local on %s %.0f examples/s\n", r + 1,
                  gemm_rate.back() / 1e9, local_on.c_str(), local_rate.back());
    }
    for (size_t c = 0; c < clusters.size(); ++c) {
      LaunchOptions launch;
      launch.self_path = self_path;
      launch.num_ps = 1;
      launch.num_workers = clusters[c].workers;
      launch.output_dir = absl::StrCat(*output_dir, "/round", r + 1, "_", c);
      launch.job_flags = job_flags;
      launch.job_flags.push_back(absl::StrCat("--max_steps=", *steps));
      launch.job_flags.push_back(absl::StrCat("--consistency=", clusters[c].consistency));
      launch.job_flags.insert(launch.job_flags.end(), clusters[c].flags.begin(),
                              clusters[c].flags.end());
      // The chief coordinates only, so "N workers" are the N replicas.
      launch.job_flags.push_back("--chief_trains=false");
      launch.job_flags.push_back(absl::StrCat("--output_dir=", launch.output_dir));
      if (clusters[c].tls) launch.task_flags = tls_flags;
      launch.timeout = absl::Minutes(10);
      const int code = RunLaunch(launch);
      if (code != kExitOk) {
        return fail(absl::InternalError(absl::StrCat(clusters[c].name, " failed with exit code ",
                                                     code, "; logs under ", launch.output_dir)));
      }
      auto text = ReadFile(launch.output_dir + "/final_metrics.json");
      if (!text.ok()) return fail(text.status());
      auto metrics = ParseJson(*text);
      const Json* rate = metrics.ok() ? FindMember(*metrics, "examples_per_sec") : nullptr;
      if (rate == nullptr || !rate->is_number()) {
        return fail(absl::DataLossError(launch.output_dir + "/final_metrics.json has no rate"));
      }
      cluster_rate[c].push_back(rate->get<double>());
      cluster_ratio[c].push_back(rate->get<double>() / local_rate.back());
      if (clusters[c].tls) clusters[c].sealing = TlsSealingOf(launch.output_dir);
      std::printf("round %d: %s: %.0f examples/s (%.2fx local)\n", r + 1, clusters[c].name.c_str(),
                  cluster_rate[c].back(), cluster_ratio[c].back());
    }
  }
  const double gemm = Median(gemm_rate), local = Median(local_rate);
  std::printf("\nmedians of %d rounds, batch %d per worker, %lld steps per run:\n",
              static_cast<int>(*repeat), job->batch_size, static_cast<long long>(*steps));
  std::printf("  OpenBLAS sgemm, 1 thread, at the model's shapes: %.1f GFLOP/s\n", gemm / 1e9);
  std::printf("  limit (sgemm rate / %.3f MFLOP per example):  %.0f examples/s\n",
              flop_per_example / 1e6, gemm / flop_per_example);
  const std::vector<model::EmbeddingBagSpec>& embeddings = job->model.embeddings;
  if (local_on != "cpu") {
    // The clusters' replicas compute there too (--device reaches every task).
    std::printf(
        "  train --local, on %s:                            %.0f examples/s (the CPU's limit "
        "above does not apply; see the cuda rows)\n",
        local_on.c_str(), local);
  } else {
    std::printf(
        "  train --local, 1 thread:                         %.0f examples/s = %.2fx the "
        "limit (%.1f GFLOP/s of sgemm work)\n",
        local, local * flop_per_example / gemm, local * flop_per_example / 1e9);
    if (!embeddings.empty() && !embeddings[0].sequence) {
      std::printf(
          "  (the embedding bags' row sums, one row per id of an example, are not sgemm\n"
          "   work: the limit leaves them out, and they dominate this model's steps)\n");
    } else if (!embeddings.empty()) {
      std::printf(
          "  (the embedding's row gathers and the pooling are not sgemm work: the limit\n"
          "   leaves them out, and the ratio counts them against this model)\n");
    }
  }
  for (size_t c = 0; c < clusters.size(); ++c) {
    std::printf("  %-47s %.0f examples/s, %.2fx local%s\n", (clusters[c].name + ":").c_str(),
                Median(cluster_rate[c]), Median(cluster_ratio[c]),
                clusters[c].sealing.empty() ? "" : ("; " + clusters[c].sealing).c_str());
  }
  if (absl::Status st = PrintCudaRows(*job); !st.ok()) return fail(st);
  return kExitOk;
}

}  // namespace pstrain
