#include "chief/chief_duties.h"

#include "absl/strings/str_cat.h"
#include "common/event_file.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "data/dataset.h"

namespace pstrain::chief {

ChiefDuties::ChiefDuties(const TfConfig& cfg, const ChiefOptions& options)
    : cfg_(cfg),
      options_(options),
      tracker_(cfg.cluster.worker),
      service_(&tracker_) {}

ChiefDuties::~ChiefDuties() {
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
}

absl::StatusOr<std::unique_ptr<ChiefDuties>> ChiefDuties::Start(
    const TfConfig& cfg, const ChiefOptions& options) {
  std::unique_ptr<ChiefDuties> chief(new ChiefDuties(cfg, options));
  PSTRAIN_ASSIGN_OR_RETURN(chief->server_,
                           GrpcServer::Create({options.bind_address}, {&chief->service_}));
  Log("coordinator serving on ", options.bind_address);
  PSTRAIN_ASSIGN_OR_RETURN(chief->mlp_, model::Mlp::Create(options.job.model, 1024));
  PSTRAIN_ASSIGN_OR_RETURN(
      Placement placement,
      ComputePlacement(chief->mlp_->variables(), cfg.cluster.ps.size()));
  worker::PsClientOptions client_options;
  client_options.ps_addresses = cfg.cluster.ps;
  client_options.replica = -1;  // the chief does not train: it only observes
  PSTRAIN_ASSIGN_OR_RETURN(chief->client_,
                           worker::PsClient::Create(client_options, placement));
  Log("waiting for ", cfg.cluster.ps.size(), " ps");
  PSTRAIN_RETURN_IF_ERROR(chief->client_->WaitUntilReady(options.ps_wait, false));
  const std::vector<float> initial = chief->mlp_->InitialParameters(options.job.seed);
  worker::CreateOptions create;
  create.optimizer = options.job.optimizer;
  create.consistency = options.job.consistency;
  create.num_replicas = static_cast<int>(cfg.cluster.worker.size());
  create.replicas_to_aggregate = options.job.replicas_to_aggregate;
  create.seed = options.job.seed;
  PSTRAIN_ASSIGN_OR_RETURN(
      int kept, chief->client_->CreateVariables(initial, chief->mlp_->offsets(), create));
  if (kept > 0) {
    Log(kept, " of ", cfg.cluster.ps.size(),
        " ps already held initialised variables; they were kept");
  }
  Log("initialised ", chief->mlp_->num_parameters(), " parameters in ",
      chief->mlp_->variables().size(), " variables on ", cfg.cluster.ps.size(),
      " ps");
  return chief;
}

void ChiefDuties::StopParameterServers(const std::string& reason) {
  absl::Status s = client_->ShutdownAll(reason);
  if (!s.ok()) Log("stopping the ps: ", s.message());
}

absl::StatusOr<Json> ChiefDuties::Finish() {
  absl::Status waited = tracker_.WaitForAll(options_.job_timeout);
  if (!waited.ok()) {
    StopParameterServers("job failed");
    return waited;
  }
  auto scored = [&]() -> absl::StatusOr<Json> {
    PSTRAIN_ASSIGN_OR_RETURN(data::Dataset test,
                             data::LoadMnistFormat(options_.job.data_dir, data::Split::kTest));
    std::vector<float> params(mlp_->num_parameters());
    PSTRAIN_ASSIGN_OR_RETURN(int64_t step, client_->PullAll(params.data(), mlp_->offsets()));
    PSTRAIN_ASSIGN_OR_RETURN(
        model::BatchResult r,
        mlp_->Evaluate(params.data(), test.features.data(), test.labels.data(),
                       test.num_examples));
    Json metrics = Json::Object();
    metrics.Set("test_accuracy", Json::Number(static_cast<double>(r.correct) / r.count));
    metrics.Set("test_loss", Json::Number(r.loss_sum / r.count));
    metrics.Set("test_examples", Json::Number(r.count));
    metrics.Set("global_step", Json::Number(step));
    Json workers = Json::Array();
    double total_rate = 0;
    for (const auto& [index, rep] : tracker_.reports()) {
      Json w = Json::Object();
      w.Set("index", Json::Number(index));
      w.Set("steps", Json::Number(rep.steps()));
      w.Set("examples", Json::Number(rep.examples()));
      w.Set("final_loss", Json::Number(rep.final_loss()));
      w.Set("examples_per_sec", Json::Number(rep.examples_per_sec()));
      total_rate += rep.examples_per_sec();
      workers.Append(std::move(w));
    }
    metrics.Set("workers", std::move(workers));
    metrics.Set("examples_per_sec", Json::Number(total_rate));
    PSTRAIN_RETURN_IF_ERROR(MakeDirs(options_.output_dir));
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> eval,
                             EventWriter::Open(options_.output_dir + "/eval"));
    PSTRAIN_RETURN_IF_ERROR(eval->WriteScalars(
        step, {{"loss", r.loss_sum / r.count},
               {"accuracy", static_cast<double>(r.correct) / r.count}}));
    PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(
        options_.output_dir + "/final_metrics.json", metrics.Dump() + "\n"));
    return metrics;
  }();
  StopParameterServers(scored.ok() ? "job finished" : "job failed");
  return scored;
}

}  // namespace pstrain::chief
