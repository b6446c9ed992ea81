#include "coordinator/run_record.h"

#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "data/input.h"

namespace pstrain::coordinator {
namespace {

std::string ShapeText(const Json& shape) {
  std::vector<std::string> dims;
  if (shape.is_array()) {
    for (const Json& d : shape) dims.push_back(d.dump());
  }
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

std::string VariableText(const Json& v) {
  const Json* table = FindMember(v, "table");
  const Json* shape = FindMember(v, "shape");
  const std::string kind =
      table != nullptr && table->is_boolean() && table->get<bool>() ? "table " : "shape ";
  return kind + ShapeText(shape == nullptr ? Json() : *shape);
}

std::string StringMember(const Json& j, absl::string_view key) {
  const Json* m = FindMember(j, key);
  return m != nullptr && m->is_string() ? m->get<std::string>() : "";
}

// name -> description, in the order given.
std::vector<std::pair<std::string, std::string>> Variables(const Json& model) {
  std::vector<std::pair<std::string, std::string>> out;
  const Json* vars = FindMember(model, "variables");
  if (vars == nullptr || !vars->is_array()) return out;
  for (const Json& v : *vars) out.emplace_back(StringMember(v, "name"), VariableText(v));
  return out;
}

}  // namespace

std::string RunRecordPath(const std::string& dir) { return dir + "/run.json"; }

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

Json DescribeModel(const std::vector<VariableDef>& variables, const std::string& optimizer) {
  Json model = Json::object();
  model["optimizer"] = optimizer;
  Json list = Json::array();
  for (const VariableDef& v : variables) {
    Json d = Json::object();
    d["name"] = v.name;
    d["shape"] = v.shape;
    if (v.embedding) d["table"] = true;
    list.push_back(std::move(d));
  }
  model["variables"] = std::move(list);
  return model;
}

Json DescribeJob(const model::JobSpec& job) {
  Json j = Json::object();
  j["data_dir"] = job.data_dir;
  j["input_format"] = data::InputFormatName(job.input);
  if (!job.input.train_files.empty()) j["train_files"] = job.input.train_files;
  if (!job.input.test_files.empty()) j["test_files"] = job.input.test_files;
  j["batch_size"] = job.batch_size;
  j["epochs"] = job.epochs;
  j["max_steps"] = job.max_steps;
  Json opt = Json::object();
  opt["name"] = job.optimizer.name;
  opt["learning_rate"] = job.optimizer.learning_rate;
  if (job.optimizer.name == "momentum") {
    opt["momentum"] = job.optimizer.momentum;
    opt["nesterov"] = job.optimizer.nesterov;
  } else if (job.optimizer.name == "adagrad") {
    opt["initial_accumulator"] = job.optimizer.initial_accumulator;
  } else if (job.optimizer.name == "adam" || job.optimizer.name == "nadam") {
    opt["beta1"] = job.optimizer.beta1;
    opt["beta2"] = job.optimizer.beta2;
    opt["epsilon"] = job.optimizer.epsilon;
  } else if (job.optimizer.name == "ftrl") {
    opt["initial_accumulator"] = job.optimizer.initial_accumulator;
    opt["l1"] = job.optimizer.l1;
    opt["l2"] = job.optimizer.l2;
  }
  j["optimizer"] = std::move(opt);
  j["seed"] = job.seed;
  j["consistency"] = job.consistency;
  j["replicas_to_aggregate"] = job.replicas_to_aggregate;
  j["device"] = job.device;
  j["chief_trains"] = job.chief_trains;
  j["checkpoint_secs"] = job.checkpoint_every_secs;
  j["checkpoint_steps"] = job.checkpoint_every_steps;
  j["keep_checkpoints"] = job.keep_checkpoints;
  j["sync_wait_secs"] = job.sync_wait_secs;
  j["push_per_layer"] = job.push_per_layer;
  j["shared_memory"] = job.shared_memory;
  j["tcp_frames"] = job.tcp_frames;
  j["wire_dtype"] = job.bfloat16_wire ? "bfloat16" : "float32";
  return j;
}

std::vector<std::string> ModelDifferences(const Json& before, const Json& now) {
  std::vector<std::string> out;
  const std::string opt_before = StringMember(before, "optimizer");
  const std::string opt_now = StringMember(now, "optimizer");
  if (opt_before != opt_now) {
    out.push_back(absl::StrCat("optimizer: ", opt_before, " on disk, ", opt_now, " in this job"));
  }
  const auto there = Variables(before);
  const auto here = Variables(now);
  std::map<std::string, std::string> here_by_name(here.begin(), here.end());
  std::map<std::string, std::string> there_by_name(there.begin(), there.end());
  for (const auto& [name, text] : there) {
    auto it = here_by_name.find(name);
    if (it == here_by_name.end()) {
      out.push_back(absl::StrCat(name, ": ", text, " on disk, not in this job"));
    } else if (it->second != text) {
      out.push_back(absl::StrCat(name, ": ", text, " on disk, ", it->second, " in this job"));
    }
  }
  for (const auto& [name, text] : here) {
    if (there_by_name.count(name) == 0) {
      out.push_back(absl::StrCat(name, ": not on disk, ", text, " in this job"));
    }
  }
  return out;
}

absl::Status CheckRelaunch(const std::string& dir, const Json& model) {
  const std::string path = RunRecordPath(dir);
  if (!std::filesystem::exists(path)) return absl::OkStatus();
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  auto run = ParseJson(text);
  const Json* before = run.ok() ? FindMember(*run, "model") : nullptr;
  if (before == nullptr || !before->is_object()) {
    return absl::DataLossError(
        absl::StrCat(path, " does not parse or has no \"model\"; move it away to go on"));
  }
  const std::vector<std::string> diff = ModelDifferences(*before, model);
  if (diff.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      dir, " holds a run of another model (", path,
      "), and its checkpoints cannot be restored "
      "into this one: ",
      absl::StrJoin(diff, "; "),
      ". Nothing was changed. Relaunch with that run's flags and --model_config to resume it, "
      "or give a new --output_dir to start afresh"));
}

absl::Status WriteRunStart(const std::string& dir, Json run, absl::Time started) {
  const std::string path = RunRecordPath(dir);
  int64_t launches = 0;
  std::string first = Rfc3339(started);
  if (auto text = ReadFile(path); text.ok()) {
    if (auto old = ParseJson(*text); old.ok()) {
      const Json* n = FindMember(*old, "launches");
      if (n != nullptr && n->is_number_integer()) launches = n->get<int64_t>();
      const std::string f = StringMember(*old, "first_started");
      if (!f.empty()) first = f;
    }
  }
  run["started"] = Rfc3339(started);
  run["first_started"] = first;
  run["launches"] = launches + 1;
  return WriteFileAtomically(path, run.dump(2) + "\n");
}

absl::Status WriteRunEnd(const std::string& dir, const absl::Status& outcome, absl::Time ended) {
  const std::string path = RunRecordPath(dir);
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  PSTRAIN_ASSIGN_OR_RETURN(Json run, ParseJson(text));
  run["ended"] = Rfc3339(ended);
  run["outcome"] = outcome.ok() ? std::string("ok") : outcome.ToString();
  return WriteFileAtomically(path, run.dump(2) + "\n");
}

}  // namespace pstrain::coordinator
