#include "worker/worker_main.h"

#include <cblas.h>

#include "absl/strings/str_format.h"
#include "chief/chief_duties.h"
#include "common/exit_codes.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "data/dataset.h"
#include "cli/job_flags.h"
#include "worker/trainer.h"

namespace pstrain::worker {
namespace {

absl::Status Run(const TfConfig& cfg, CliArgs& args) {
  PSTRAIN_RETURN_IF_ERROR(ValidateForParameterServerTraining(cfg));
  PSTRAIN_ASSIGN_OR_RETURN(model::JobSpec job, JobSpecFromFlags(args));
  PSTRAIN_ASSIGN_OR_RETURN(std::string output_dir,
                           OutputDirFromFlags(args, cfg.environment));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t ps_wait_s, args.GetInt("ps_wait_s", 120));
  // One BLAS thread: a worker shares the machine with the PS and other
  // workers, and these matrices are too small to split well.
  PSTRAIN_ASSIGN_OR_RETURN(int64_t blas_threads, args.GetInt("blas_threads", 1));
  const bool chief_duties = cfg.HasChiefDuties();
  chief::ChiefOptions chief_options;
  if (chief_duties) {
    chief_options.job = job;
    chief_options.output_dir = output_dir;
    PSTRAIN_ASSIGN_OR_RETURN(chief_options.bind_address,
                             args.GetString("bind", cfg.task_address()->ToString()));
    PSTRAIN_ASSIGN_OR_RETURN(int64_t job_timeout_s, args.GetInt("job_timeout_s", 86400));
    chief_options.ps_wait = absl::Seconds(ps_wait_s);
    chief_options.job_timeout = absl::Seconds(job_timeout_s);
  }
  PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
  openblas_set_num_threads(static_cast<int>(blas_threads));

  std::unique_ptr<chief::ChiefDuties> duties;
  if (chief_duties) {
    Log("the cluster has no chief: worker:0 takes the chief's duties");
    PSTRAIN_ASSIGN_OR_RETURN(duties, chief::ChiefDuties::Start(cfg, chief_options));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Mlp> mlp, model::Mlp::Create(job.model, 1));
  PSTRAIN_ASSIGN_OR_RETURN(Placement placement,
                           ComputePlacement(mlp->variables(), cfg.cluster.ps.size()));
  PsClientOptions client_options;
  client_options.ps_addresses = cfg.cluster.ps;
  client_options.replica = cfg.task.index;
  client_options.consistency = job.consistency;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client,
                           PsClient::Create(client_options, placement));
  PSTRAIN_ASSIGN_OR_RETURN(data::Dataset train,
                           data::LoadMnistFormat(job.data_dir, data::Split::kTrain));
  Log("waiting for the ps to hold initialised variables");
  PSTRAIN_RETURN_IF_ERROR(client->WaitUntilReady(absl::Seconds(ps_wait_s), true));

  TrainerOptions options;
  options.job = job;
  options.replica = cfg.task.index;
  options.num_replicas = cfg.cluster.worker.size();
  // Replica 0 reports the training scalars for the job, as a chief would.
  if (cfg.task.index == 0) options.summary_dir = output_dir + "/train";
  auto trained = RunTrainer(options, train, client.get());
  if (!trained.ok()) {
    if (duties != nullptr) duties->StopParameterServers("job failed");
    return trained.status();
  }
  v1::ReportDoneRequest report;
  report.set_task_type("worker");
  report.set_task_index(cfg.task.index);
  report.set_steps(trained->steps);
  report.set_examples(trained->examples);
  report.set_final_loss(trained->final_loss);
  report.set_examples_per_sec(trained->examples_per_sec);
  Log(absl::StrFormat("done: %d steps in %.1fs, %.0f examples/s", trained->steps,
                      trained->seconds, trained->examples_per_sec));
  if (duties == nullptr) {
    return chief::ReportDoneToChief(*cfg.chief_duties_address(), report,
                                    absl::Seconds(ps_wait_s));
  }
  PSTRAIN_RETURN_IF_ERROR(duties->ReportLocal(report));
  PSTRAIN_ASSIGN_OR_RETURN(Json metrics, duties->Finish());
  Log(absl::StrFormat("test accuracy: %.4f (loss %.4f)",
                      metrics.Find("test_accuracy")->number_value(),
                      metrics.Find("test_loss")->number_value()));
  return absl::OkStatus();
}

}  // namespace

int WorkerMain(const TfConfig& cfg, CliArgs& args) {
  absl::Status s = Run(cfg, args);
  if (!s.ok()) Log("failed: ", s.message());
  return ExitCodeFor(s);
}

}  // namespace pstrain::worker
