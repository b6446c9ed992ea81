#include "cli/checkpoint_tools.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_shard.h"
#include "common/checkpoint_layout.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "data/input.h"
#include "evaluator/evaluator.h"
#include "job/job_description.h"
#include "job/job_flags.h"
#include "model/backend.h"

namespace pstrain {
namespace {

int Fail(const char* cmd, const absl::Status& s) {
  std::fprintf(stderr, "pstrain %s: %s\n", cmd, std::string(s.message()).c_str());
  return ExitCodeFor(s);
}

// The checkpoint path of `args`: --checkpoint, else the word after the
// command.
absl::StatusOr<std::string> CheckpointPath(CliArgs& args, const char* cmd) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string path, args.GetString("checkpoint", ""));
  if (path.empty() && args.positional().size() == 2) path = args.positional()[1];
  if (path.empty() || args.positional().size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("give one checkpoint: pstrain ", cmd,
                     " DIR (a job's output directory or a ckpt-<step> directory in it)"));
  }
  return path;
}

}  // namespace

absl::StatusOr<CheckpointAt> ResolveCheckpoint(const std::string& path) {
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!std::filesystem::is_directory(dir)) {
    return absl::NotFoundError(absl::StrCat(path, " is not a directory"));
  }
  CheckpointAt at;
  const std::string base = std::filesystem::path(dir).filename().string();
  int64_t step = -1;
  if (base.rfind("ckpt-", 0) == 0 && absl::SimpleAtoi(base.substr(5), &step) && step >= 0) {
    at.output_dir = std::filesystem::path(dir).parent_path().string();
    if (at.output_dir.empty()) at.output_dir = ".";
  } else {
    at.output_dir = dir;
    if (auto index = ReadCheckpointIndex(dir); index.ok()) step = index->step;
  }
  std::vector<IncompleteCheckpoint> skipped;
  const std::vector<CompleteCheckpoint> complete = CompleteCheckpoints(at.output_dir, &skipped);
  for (const CompleteCheckpoint& c : complete) {
    if (step < 0 || c.step == step) {
      at.step = c.step;
      at.num_ps = c.num_ps;
      return at;
    }
  }
  for (const IncompleteCheckpoint& c : skipped) {
    if (c.step == step) return absl::FailedPreconditionError(c.ToString());
  }
  return absl::NotFoundError(
      step >= 0 ? absl::StrCat("no checkpoint at step ", step, " under ", at.output_dir)
                : absl::StrCat("no complete checkpoint under ", path));
}

int InspectMain(CliArgs& args) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(bool json, args.GetBool("json", false));
    PSTRAIN_ASSIGN_OR_RETURN(std::string path, CheckpointPath(args, "inspect"));
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    PSTRAIN_ASSIGN_OR_RETURN(CheckpointAt at, ResolveCheckpoint(path));
    PSTRAIN_ASSIGN_OR_RETURN(std::string manifest_text,
                             ReadFile(ManifestPath(at.output_dir, at.step)));
    PSTRAIN_ASSIGN_OR_RETURN(Json manifest, ParseJson(manifest_text));
    Json out = {
        {"dir", CheckpointDir(at.output_dir, at.step)}, {"step", at.step}, {"num_ps", at.num_ps}};
    Json shards = Json::array();
    std::string table;
    for (int ps = 0; ps < at.num_ps; ++ps) {
      const std::string file = ShardPath(at.output_dir, at.step, ps, at.num_ps);
      // Every tensor's checksum is verified as the shard is read.
      PSTRAIN_ASSIGN_OR_RETURN(ckpt::ShardContents shard, ckpt::ReadShard(file));
      const Json& listed = manifest["shards"][ps];
      if (ps == 0) {
        out["optimizer"] = shard.header.optimizer();
        out["optimizer_slots"] = shard.header.num_slots();
      }
      Json s = {{"file", std::filesystem::path(file).filename().string()},
                {"bytes", listed.value("bytes", int64_t{0})},
                {"crc32c", listed.value("crc32c", int64_t{0})}};
      absl::StrAppendFormat(&table, "%s  %d bytes  crc32c %08x  (checksums verified)\n",
                            s["file"].get<std::string>(), s["bytes"].get<int64_t>(),
                            static_cast<uint32_t>(s["crc32c"].get<int64_t>()));
      Json tensors = Json::array();
      for (const v1::TensorCheckpoint& t : shard.tensors) {
        Json j = {{"key", t.key()}, {"updates", t.updates()}};
        if (t.embedding()) {
          j["table"] = true;
          j["rows_held"] = t.row_ids_size();
          j["dim"] = t.dim();
          absl::StrAppendFormat(&table, "  %-28s table: %d rows held of width %d  updates %d\n",
                                t.key(), t.row_ids_size(), t.dim(), t.updates());
        } else {
          j["variable"] = t.variable();
          j["rows"] = {t.row_begin(), t.row_end()};
          j["row_elements"] = t.row_elements();
          j["elements"] = t.elements();
          absl::StrAppendFormat(&table, "  %-28s %s rows %d..%d x %d = %d values  updates %d\n",
                                t.key(), t.variable(), t.row_begin(), t.row_end(), t.row_elements(),
                                t.elements(), t.updates());
        }
        tensors.push_back(std::move(j));
      }
      s["tensors"] = std::move(tensors);
      shards.push_back(std::move(s));
    }
    out["shards"] = std::move(shards);
    if (json) return out.dump(2) + "\n";
    return absl::StrFormat(
               "checkpoint at step %d in %s, written by %d ps; optimizer %s (%d "
               "slots per value)\n",
               at.step, out["dir"].get<std::string>(), at.num_ps,
               out.value("optimizer", std::string()), out.value("optimizer_slots", 0)) +
           table;
  };
  auto out = run();
  if (!out.ok()) return Fail("inspect", out.status());
  std::fputs(out->c_str(), stdout);
  return kExitOk;
}

int EvaluateMain(CliArgs& args) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(std::string path, CheckpointPath(args, "evaluate"));
    PSTRAIN_ASSIGN_OR_RETURN(model::JobSpec job, JobSpecFromFlags(args));
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    PSTRAIN_ASSIGN_OR_RETURN(CheckpointAt at, ResolveCheckpoint(path));
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend,
                             model::CreateBackend(job.model, 1024, job.device));
    // The run that wrote the checkpoint says what model it is.
    if (auto text = ReadFile(at.output_dir + "/run.json"); text.ok()) {
      auto run_json = ParseJson(*text);
      const Json* model = run_json.ok() ? FindMember(*run_json, "model") : nullptr;
      if (model != nullptr) {
        const std::vector<std::string> diff = ModelDifferences(
            *model, DescribeModel(backend->network().variables(), job.optimizer.name),
            "in the checkpoint", "in these flags");
        if (!diff.empty()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "the checkpoint is of another model (", at.output_dir, "/run.json): ",
              absl::StrJoin(diff, "; "), ". Give the flags and --model_config of that run"));
        }
      }
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        data::Dataset test,
        data::LoadInputSplit(job.data_dir, job.input, data::Split::kTest, job.model.num_classes()));
    PSTRAIN_ASSIGN_OR_RETURN(
        model::BatchResult r,
        evaluator::ScoreCheckpoint(*backend, job.seed, at.output_dir, at.step, at.num_ps, test));
    return absl::StrFormat(
        "checkpoint at step %d (%s): loss %.4f - accuracy %.4f%s on %d test "
        "examples\n",
        at.step, CheckpointDir(at.output_dir, at.step), r.mean_loss(), r.accuracy(),
        r.has_auc() ? absl::StrFormat(" - auc %.4f", r.Auc()) : "", r.count);
  };
  auto out = run();
  if (!out.ok()) return Fail("evaluate", out.status());
  std::fputs(out->c_str(), stdout);
  return kExitOk;
}

}  // namespace pstrain
