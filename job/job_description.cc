#include "job/job_description.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "data/input.h"
#include "model/model_graph.h"
#include "model/network.h"

namespace pstrain {
namespace {

std::string ShapeText(const Json& shape) {
  std::vector<std::string> dims;
  if (shape.is_array()) {
    for (const Json& d : shape) dims.push_back(d.dump());
  }
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

std::string StringMember(const Json& j, absl::string_view key) {
  const Json* m = FindMember(j, key);
  return m != nullptr && m->is_string() ? m->get<std::string>() : "";
}

// name -> "shape [..]" or "table [..]", in the order given.
std::vector<std::pair<std::string, std::string>> Variables(const Json& model) {
  std::vector<std::pair<std::string, std::string>> out;
  const Json* vars = FindMember(model, "variables");
  if (vars == nullptr || !vars->is_array()) return out;
  for (const Json& v : *vars) {
    const Json* table = FindMember(v, "table");
    const Json* shape = FindMember(v, "shape");
    const bool is_table = table != nullptr && table->is_boolean() && table->get<bool>();
    out.emplace_back(StringMember(v, "name"), absl::StrCat(is_table ? "table " : "shape ",
                                                           ShapeText(shape ? *shape : Json())));
  }
  return out;
}

// A float setting as a flag gives it (6 significant digits), so that
// records read 0.05, not 0.05000000074505806.
double Num(float f) { return std::strtod(absl::StrCat(f).c_str(), nullptr); }

// A setting's value as a flag would give it: 0.05, not 0.05000000074505806.
std::string ValueText(const Json* v) {
  if (v == nullptr) return "(unset)";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_float()) return absl::StrCat(v->get<double>());
  return v->dump();
}

}  // namespace

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
  const OptimizerSpec& opt = job.optimizer;
  Json j = {{"data_dir", job.data_dir},
            {"input_format", data::InputFormatName(job.input)},
            {"train_files", job.input.train_files},
            {"test_files", job.input.test_files},
            {"skip_bad_records", job.input.skip_bad_records},
            {"batch_size", job.batch_size},
            {"epochs", job.epochs},
            {"max_steps", job.max_steps},
            {"optimizer", opt.name},
            {"learning_rate", Num(opt.learning_rate)},
            {"seed", job.seed},
            {"consistency", job.consistency.ToString()},
            {"replicas_to_aggregate", job.replicas_to_aggregate},
            {"chief_trains", job.chief_trains},
            {"sync_wait_secs", job.sync_wait_secs},
            {"checkpoint_secs", job.checkpoint_every_secs},
            {"checkpoint_steps", job.checkpoint_every_steps},
            {"keep_checkpoints", job.keep_checkpoints},
            {"device", job.device.ToString()},
            {"push_per_layer", job.push_per_layer},
            {"bytes_per_pack",
             job.bytes_per_pack < 0 ? Json("auto") : Json(job.bytes_per_pack)},
            {"shared_memory", job.shared_memory},
            {"tcp_frames", job.tcp_frames},
            {"wire_dtype", job.bfloat16_wire ? "bfloat16" : "float32"}};
  if (job.input.format == data::InputFormat::kTfds) {
    j["train_split"] = job.input.train_split;
    j["test_split"] = job.input.test_split;
  }
  // Only the hyper-parameters the optimizer reads.
  if (opt.name == "momentum") {
    j["momentum"] = Num(opt.momentum);
    j["nesterov"] = opt.nesterov;
  } else if (opt.name == "adagrad") {
    j["initial_accumulator"] = Num(opt.initial_accumulator);
  } else if (opt.name == "adam" || opt.name == "nadam") {
    j["beta1"] = Num(opt.beta1);
    j["beta2"] = Num(opt.beta2);
    j["epsilon"] = Num(opt.epsilon);
  } else if (opt.name == "ftrl") {
    j["initial_accumulator"] = Num(opt.initial_accumulator);
    j["l1"] = Num(opt.l1);
    j["l2"] = Num(opt.l2);
  }
  if (opt.schedule != "constant") {
    Json schedule = {{"kind", opt.schedule}};
    if (opt.schedule == "piecewise_constant") {
      schedule["boundaries"] = opt.boundaries;
      Json values = Json::array();
      for (float v : opt.values) values.push_back(Num(v));
      schedule["values"] = values;
    } else {
      schedule["decay_steps"] = opt.decay_steps;
      if (opt.schedule == "cosine_decay") {
        schedule["alpha"] = Num(opt.alpha);
      } else {
        schedule["decay_rate"] = Num(opt.decay_rate);
        schedule["staircase"] = opt.staircase;
      }
    }
    j["learning_rate_schedule"] = schedule;
  }
  if (opt.clipnorm > 0) j["clipnorm"] = Num(opt.clipnorm);
  if (opt.clipvalue > 0) j["clipvalue"] = Num(opt.clipvalue);
  return j;
}

Json DescribeScore(const model::BatchResult& score, int64_t global_step) {
  Json out = Json::object();
  out["test_accuracy"] = score.accuracy();
  out["test_loss"] = score.mean_loss();
  if (score.has_auc()) out["test_auc"] = score.Auc();
  out["test_examples"] = score.count;
  out["global_step"] = global_step;
  return out;
}

absl::StatusOr<Json> ReadRunModel(const std::string& dir) {
  const std::string path = dir + "/run.json";
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat("no run.json in ", dir));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  auto run = ParseJson(text);
  if (!run.ok() || !run->is_object()) {
    return absl::DataLossError(absl::StrCat(path, " does not parse"));
  }
  const Json* model = FindMember(*run, "model");
  // A launch that failed before it began records its end with no model
  // (job/run_record.h, RecordFailedLaunch): nothing to compare with.
  if (model == nullptr && FindMember(*run, "outcome") != nullptr) {
    return absl::NotFoundError(absl::StrCat(path, " records a launch that failed before it began"));
  }
  if (model == nullptr || !model->is_object()) {
    return absl::DataLossError(absl::StrCat(path, " has no \"model\""));
  }
  return *model;
}

absl::StatusOr<Json> DescribeJobAndModel(const model::JobSpec& job) {
  PSTRAIN_ASSIGN_OR_RETURN(model::ModelGraph graph, model::ModelGraph::Create(job.model));
  return Json{{"job", DescribeJob(job)},
              {"model", DescribeModel(graph.variables(), job.optimizer.name)}};
}

std::string JoinDifferences(const std::vector<std::string>& differences) {
  const int n = static_cast<int>(differences.size());
  if (n <= kMostDifferences) return absl::StrJoin(differences, "; ");
  return absl::StrCat(absl::StrJoin(differences.begin(), differences.begin() + kMostDifferences,
                                    "; "),
                      "; and ", n - kMostDifferences, " more");
}

std::vector<std::string> ModelDifferences(const Json& a, const Json& b, absl::string_view a_is,
                                          absl::string_view b_is) {
  std::vector<std::string> out;
  const std::string opt_a = StringMember(a, "optimizer");
  const std::string opt_b = StringMember(b, "optimizer");
  if (opt_a != opt_b) {
    out.push_back(absl::StrCat("optimizer: ", opt_a, " ", a_is, ", ", opt_b, " ", b_is));
  }
  const auto in_a = Variables(a);
  const auto in_b = Variables(b);
  const std::map<std::string, std::string> a_by_name(in_a.begin(), in_a.end());
  const std::map<std::string, std::string> b_by_name(in_b.begin(), in_b.end());
  for (const auto& [name, text] : in_a) {
    auto it = b_by_name.find(name);
    if (it == b_by_name.end()) {
      out.push_back(absl::StrCat(name, ": ", text, " ", a_is, ", not ", b_is));
    } else if (it->second != text) {
      out.push_back(absl::StrCat(name, ": ", text, " ", a_is, ", ", it->second, " ", b_is));
    }
  }
  for (const auto& [name, text] : in_b) {
    if (a_by_name.count(name) == 0) {
      out.push_back(absl::StrCat(name, ": not ", a_is, ", ", text, " ", b_is));
    }
  }
  return out;
}

std::vector<std::string> JobDifferences(const Json& chief, const Json& mine) {
  static const auto* own = new std::set<std::string>{
      "device",     "push_per_layer",  "bytes_per_pack",   "shared_memory",    "tcp_frames",
      "wire_dtype", "checkpoint_secs", "checkpoint_steps", "keep_checkpoints"};
  std::set<std::string> names;
  for (const auto& [key, value] : chief.items()) names.insert(key);
  for (const auto& [key, value] : mine.items()) names.insert(key);
  std::vector<std::string> out;
  for (const std::string& name : names) {
    if (own->count(name) > 0) continue;
    const Json* c = FindMember(chief, name);
    const Json* m = FindMember(mine, name);
    if (c != nullptr && m != nullptr && *c == *m) continue;
    out.push_back(
        absl::StrCat("--", name, "=", ValueText(m), " here, ", ValueText(c), " on the chief"));
  }
  return out;
}

}  // namespace pstrain
