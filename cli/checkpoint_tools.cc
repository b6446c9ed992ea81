#include "cli/checkpoint_tools.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "checkpoint/checkpoint_shard.h"
#include "cli/build_info.h"
#include "cli/command_output.h"
#include "exporter/npz_writer.h"
#include "exporter/onnx_writer.h"
#include "cluster/checkpoint_layout.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "data/image_files.h"
#include "data/input.h"
#include "data/tfds.h"
#include "evaluator/evaluator.h"
#include "job/job_description.h"
#include "job/job_flags.h"
#include "job/run_settings.h"
#include "model/backend.h"
#include "model/network.h"
#include "train/local_table.h"

namespace pstrain {
namespace {

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

// The run that wrote the checkpoint (its run.json) says what model it is;
// FailedPrecondition naming each difference from `net`'s.
absl::Status CheckModel(const CheckpointAt& at, const model::Network& net,
                        const model::JobSpec& job) {
  absl::StatusOr<Json> model = ReadRunModel(at.output_dir);
  if (!model.ok()) return absl::OkStatus();  // a directory from before run.json
  const std::vector<std::string> diff =
      ModelDifferences(*model, DescribeModel(net.variables(), job.optimizer.name),
                       "in the checkpoint", "in these flags");
  if (diff.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the checkpoint is of another model (", at.output_dir, "/run.json): ",
      JoinDifferences(diff),
      ". Leave out the flags that change the model: the run's own are taken from its run.json"));
}

// A flag that is neither the command's own (read before this) nor a job
// flag is refused before the checkpoint is looked for.
absl::Status CheckFlagsKnown(const CliArgs& args) {
  std::vector<std::string> job_flags;
  return args.CheckAllUsed(JobFlagNames(), &job_flags);
}

// The job of `args`, taking each setting it does not give from the run
// that wrote the checkpoint (job/run_settings.h: its config as the text
// run.json records, not --device, which is this machine's), and saying on
// stderr what was taken and what differs. A run.json that cannot be read
// is said and passed over: the flags alone then give the job.
absl::StatusOr<model::JobSpec> JobOfRun(CliArgs& args, const CheckpointAt& at, const char* cmd) {
  absl::StatusOr<std::optional<RunSettings>> run = ReadRunSettings(at.output_dir);
  if (!run.ok()) {
    std::fprintf(stderr, "pstrain %s: %s: the flags alone give the model\n", cmd,
                 std::string(run.status().message()).c_str());
  }
  if (!run.ok() || !run->has_value()) return JobSpecFromFlags(args);
  const TakenSettings taken =
      TakeRunSettings(**run, {"device", "output_dir"}, /*config_as_text=*/true, args);
  if (const std::string said = DescribeTaken(**run, taken); !said.empty()) {
    std::fprintf(stderr, "pstrain %s: %s\n", cmd, said.c_str());
  }
  if (taken.config_text.empty()) return JobSpecFromFlags(args);
  const ConfigText text{taken.config_text,
                        absl::StrCat((*run)->model_config_file.empty()
                                         ? std::string("the model config")
                                         : (*run)->model_config_file,
                                     " (as ", (*run)->path, " records it)")};
  return JobSpecFromFlags(args, &text);
}

// A checkpoint's values in `job`'s network (after CheckModel): the dense
// variables flat, the tables' rows (those never written at their initial
// values).
struct LoadedModel {
  std::unique_ptr<model::Network> net;
  train::LocalTables tables;
  std::vector<float> params;
};

absl::StatusOr<LoadedModel> LoadModel(const CheckpointAt& at, const model::JobSpec& job,
                                      int max_batch) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Network> net,
                           model::Network::Create(job.model, max_batch));
  PSTRAIN_RETURN_IF_ERROR(CheckModel(at, *net, job));
  PSTRAIN_ASSIGN_OR_RETURN(
      evaluator::CheckpointValues values,
      evaluator::LoadCheckpointValues(*net, job.seed, at.output_dir, at.step, at.num_ps));
  return LoadedModel{std::move(net), std::move(values.tables), std::move(values.params)};
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
          // A non-trainable variable (moving statistics, a frozen layer)
          // is stored without optimizer slots.
          j["trainable"] = t.update().empty();
          if (!t.update().empty()) j["update"] = t.update();
          absl::StrAppendFormat(&table, "  %-28s %s rows %d..%d x %d = %d values  updates %d%s\n",
                                t.key(), t.variable(), t.row_begin(), t.row_end(), t.row_elements(),
                                t.elements(), t.updates(),
                                t.update().empty()
                                    ? ""
                                    : absl::StrCat("  non-trainable (", t.update(), "), no slots"));
        }
        tensors.push_back(std::move(j));
      }
      s["tensors"] = std::move(tensors);
      shards.push_back(std::move(s));
    }
    out["shards"] = std::move(shards);
    // The run that wrote it: the settings evaluate, predict and export take.
    std::string run_line;
    if (absl::StatusOr<std::optional<RunSettings>> run = ReadRunSettings(at.output_dir);
        run.ok() && run->has_value()) {
      const RunSettings& r = **run;
      out["run"] = {{"path", r.path}, {"job_flags", r.flags}};
      if (!r.model_config.empty()) out["run"]["model_config_file"] = r.model_config_file;
      run_line = absl::StrCat(
          "trained by the run of ", r.path, " with ",
          r.flags.empty() ? "the default settings" : absl::StrJoin(r.flags, " "),
          r.model_config.empty() ? "" : " (the config's text recorded there)", "\n");
    }
    if (json) return out.dump(2) + "\n";
    return absl::StrFormat(
               "checkpoint at step %d in %s, written by %d ps; optimizer %s (%d "
               "slots per value)\n",
               at.step, out["dir"].get<std::string>(), at.num_ps,
               out.value("optimizer", std::string()), out.value("optimizer_slots", 0)) +
           run_line + table;
  };
  return FinishCommand("inspect", run());
}

namespace {

// The class names of a TensorFlow Datasets input's label (its
// NAME.labels.txt), else none.
std::vector<std::string> ClassNamesOf(const model::JobSpec& job) {
  if (job.input.format != data::InputFormat::kTfds) return {};
  absl::StatusOr<data::TfdsDataset> ds = data::ReadTfdsDirectory(job.data_dir);
  if (!ds.ok()) return {};
  const data::TfdsFeature* label = ds->FindFeature(job.input.features.label);
  return label != nullptr ? label->class_names : std::vector<std::string>{};
}

// The class an example's probabilities predict: one sigmoid output above
// 0.5, else the most probable of the softmax's.
int64_t PredictedClass(const float* p, int64_t width) {
  return width == 1 ? (p[0] > 0.5f ? 1 : 0) : std::max_element(p, p + width) - p;
}

// The probabilities of a line of JSON output, as %.6g.
std::string ProbabilitiesJson(const float* p, int64_t width) {
  std::vector<std::string> each;
  for (int64_t j = 0; j < width; ++j) each.push_back(absl::StrFormat("%.6g", p[j]));
  return absl::StrCat("[", absl::StrJoin(each, ", "), "]");
}

// One line per image file: its name, the class predicted (by name when
// `names` has it) and the probabilities; CSV with a header, or JSON lines.
std::string ImagePredictions(const std::vector<std::string>& files, const std::vector<float>& probs,
                             int64_t width, const std::vector<std::string>& names, bool csv) {
  std::string text;
  if (csv) {
    text = "file,predicted,class";
    for (int64_t j = 0; j < width; ++j) absl::StrAppend(&text, ",p", j);
    text += "\n";
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const float* p = probs.data() + i * width;
    const int64_t predicted = PredictedClass(p, width);
    const std::string name =
        predicted < static_cast<int64_t>(names.size()) ? names[predicted] : "";
    if (csv) {
      // A name with a comma or quote is quoted, as RFC 4180 quotes.
      auto field = [](const std::string& v) {
        if (v.find_first_of(",\"\n") == std::string::npos) return v;
        return absl::StrCat("\"", absl::StrReplaceAll(v, {{"\"", "\"\""}}), "\"");
      };
      absl::StrAppend(&text, field(files[i]), ",", predicted, ",", field(name));
      for (int64_t j = 0; j < width; ++j) absl::StrAppendFormat(&text, ",%.6g", p[j]);
      text += "\n";
    } else {
      absl::StrAppend(&text, "{\"file\": ", Json(files[i]).dump(), ", \"predicted\": ", predicted,
                      name.empty() ? "" : absl::StrCat(", \"class\": ", Json(name).dump()),
                      ", \"probabilities\": ", ProbabilitiesJson(p, width), "}\n");
    }
  }
  return text;
}

}  // namespace

int PredictMain(CliArgs& args) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(std::string path, CheckpointPath(args, "predict"));
    PSTRAIN_ASSIGN_OR_RETURN(std::string out_path, args.GetString("out", ""));
    PSTRAIN_ASSIGN_OR_RETURN(std::string input, args.GetString("input", ""));
    PSTRAIN_ASSIGN_OR_RETURN(std::string images, args.GetString("images", ""));
    PSTRAIN_RETURN_IF_ERROR(CheckFlagsKnown(args));
    if (!input.empty() && !images.empty()) {
      return absl::InvalidArgumentError(
          "--input names record files and --images image files: give one");
    }
    if (out_path.empty()) {
      return absl::InvalidArgumentError("--out=FILE is needed (.csv for CSV, else JSON lines)");
    }
    PSTRAIN_ASSIGN_OR_RETURN(CheckpointAt at, ResolveCheckpoint(path));
    PSTRAIN_ASSIGN_OR_RETURN(model::JobSpec job, JobOfRun(args, at, "predict"));
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    if (!input.empty()) {
      if (job.input.format == data::InputFormat::kIdx) {
        return absl::InvalidArgumentError(
            "--input names CSV or TFRecord files, read as a --model_config's input block says; "
            "without one, predict scores the IDX test split of --data_dir");
      }
      job.input.test_files = input;
    }
    // Image files: read as the run's input reads its images.
    std::vector<std::string> image_files;
    if (!images.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(image_files, data::ExpandImagePatterns(images));
    }
    PSTRAIN_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(at, job, 1024));
    model::Network* net = loaded.net.get();
    const std::vector<float>& params = loaded.params;
    train::LocalTables& tables = loaded.tables;
    PSTRAIN_ASSIGN_OR_RETURN(
        data::Dataset examples,
        image_files.empty()
            ? data::LoadInputSplit(job.data_dir, job.input, data::Split::kTest,
                                   job.model.num_classes(), /*pixels_as_bytes=*/true)
            : data::LoadImageFiles(job.input, image_files));
    std::vector<float> probs;
    PSTRAIN_ASSIGN_OR_RETURN(model::BatchResult r,
                             model::EvaluateExamples(
                                 net->embeddings(),
                                 [&tables](const std::string& table, absl::Span<const int64_t> ids,
                                           float* out) { return tables.Read(table, ids, out); },
                                 examples, 1024,
                                 [&](const float* in, const int32_t* labels, int n) {
                                   return net->Evaluate(params.data(), in, labels, n, &probs);
                                 }));
    const int64_t n = examples.num_examples;
    const int64_t width = n > 0 ? static_cast<int64_t>(probs.size()) / n : 0;
    const bool csv = out_path.size() > 4 && out_path.substr(out_path.size() - 4) == ".csv";
    if (!image_files.empty()) {
      PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(
          out_path, ImagePredictions(image_files, probs, width, ClassNamesOf(job), csv)));
      return absl::StrFormat("wrote %d predictions of the checkpoint at step %d to %s\n",
                             n, at.step, out_path);
    }
    std::string text;
    if (csv) {
      text = "example,label,predicted";
      for (int64_t j = 0; j < width; ++j) absl::StrAppend(&text, ",p", j);
      text += "\n";
    }
    for (int64_t i = 0; i < n; ++i) {
      const float* p = probs.data() + i * width;
      const int64_t predicted = PredictedClass(p, width);
      if (csv) {
        absl::StrAppend(&text, i, ",", examples.labels[i], ",", predicted);
        for (int64_t j = 0; j < width; ++j) absl::StrAppendFormat(&text, ",%.6g", p[j]);
        text += "\n";
      } else {
        absl::StrAppend(&text, "{\"example\": ", i, ", \"label\": ", examples.labels[i],
                        ", \"predicted\": ", predicted, ", \"probabilities\": ",
                        ProbabilitiesJson(p, width), "}\n");
      }
    }
    PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(out_path, text));
    return absl::StrFormat(
        "wrote %d predictions of the checkpoint at step %d to %s (accuracy "
        "%.4f against their labels)\n",
        n, at.step, out_path, r.accuracy());
  };
  return FinishCommand("predict", run());
}

int ExportMain(CliArgs& args) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(std::string path, CheckpointPath(args, "export"));
    PSTRAIN_ASSIGN_OR_RETURN(std::string out_path, args.GetString("out", ""));
    PSTRAIN_ASSIGN_OR_RETURN(std::string format, args.GetString("format", ""));
    PSTRAIN_RETURN_IF_ERROR(CheckFlagsKnown(args));
    if (out_path.empty()) return absl::InvalidArgumentError("--out=FILE.npz|FILE.onnx is needed");
    // The format: as given, else from the file's name.
    if (format.empty()) format = absl::EndsWith(out_path, ".onnx") ? "onnx" : "npz";
    if (format != "npz" && format != "onnx") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--format=", format, ": the formats written are npz (NumPy's .npz) and onnx"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(CheckpointAt at, ResolveCheckpoint(path));
    PSTRAIN_ASSIGN_OR_RETURN(model::JobSpec job, JobOfRun(args, at, "export"));
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    PSTRAIN_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(at, job, 1));
    const model::Network* net = loaded.net.get();
    const std::vector<float>& params = loaded.params;
    const train::LocalTables& tables = loaded.tables;
    std::vector<NpzArray> arrays;
    int64_t floats = 0;
    for (size_t v = 0; v < net->variables().size(); ++v) {
      const VariableDef& def = net->variables()[v];
      NpzArray a{def.name, def.shape, {}};
      a.values.resize(static_cast<size_t>(def.elements()));
      if (def.embedding) {
        // Every row, in id order, a chunk of ids at a time.
        const int64_t width = def.row_elements();
        std::vector<int64_t> ids;
        for (int64_t first = 0; first < def.rows(); first += 4096) {
          ids.clear();
          for (int64_t id = first; id < std::min(def.rows(), first + 4096); ++id) ids.push_back(id);
          PSTRAIN_RETURN_IF_ERROR(tables.Read(def.name, ids, a.values.data() + first * width));
        }
      } else {
        const float* from = params.data() + net->offsets()[v];
        std::copy(from, from + def.elements(), a.values.begin());
      }
      floats += def.elements();
      arrays.push_back(std::move(a));
    }
    if (format == "onnx") {
      std::map<std::string, std::vector<float>> whole_tables;
      for (size_t v = 0; v < arrays.size(); ++v) {
        if (net->variables()[v].embedding)
          whole_tables[arrays[v].name] = std::move(arrays[v].values);
      }
      PSTRAIN_ASSIGN_OR_RETURN(std::string bytes,
                               OnnxModelBytes(net->graph(), params, whole_tables, kPstrainVersion));
      PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(out_path, bytes));
      return absl::StrFormat(
          "wrote the model of the checkpoint at step %d to %s (ONNX, opset 13: input \"input\" "
          "[batch, %d]%s, outputs \"logits\" and \"probabilities\")\n",
          at.step, out_path, job.model.input_dim,
          net->embeddings().reads_ids() ? " and \"ids\" [batch, ids_width]" : "");
    }
    PSTRAIN_ASSIGN_OR_RETURN(std::string bytes, NpzBytes(arrays));
    PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(out_path, bytes));
    return absl::StrFormat("wrote %d arrays (%d floats) of the checkpoint at step %d to %s\n",
                           arrays.size(), floats, at.step, out_path);
  };
  return FinishCommand("export", run());
}

int EvaluateMain(CliArgs& args) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(std::string path, CheckpointPath(args, "evaluate"));
    PSTRAIN_RETURN_IF_ERROR(CheckFlagsKnown(args));
    PSTRAIN_ASSIGN_OR_RETURN(CheckpointAt at, ResolveCheckpoint(path));
    PSTRAIN_ASSIGN_OR_RETURN(model::JobSpec job, JobOfRun(args, at, "evaluate"));
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend,
                             model::CreateBackend(job.model, 1024, job.device));
    PSTRAIN_RETURN_IF_ERROR(CheckModel(at, backend->network(), job));
    PSTRAIN_ASSIGN_OR_RETURN(
        data::Dataset test,
        data::LoadInputSplit(job.data_dir, job.input, data::Split::kTest, job.model.num_classes(),
                             /*pixels_as_bytes=*/true));
    PSTRAIN_ASSIGN_OR_RETURN(
        model::BatchResult r,
        evaluator::ScoreCheckpoint(*backend, job.seed, at.output_dir, at.step, at.num_ps, test));
    return absl::StrFormat(
        "checkpoint at step %d (%s): loss %.4f - accuracy %.4f%s on %d test "
        "examples\n",
        at.step, CheckpointDir(at.output_dir, at.step), r.mean_loss(), r.accuracy(),
        r.has_auc() ? absl::StrFormat(" - auc %.4f", r.Auc()) : "", r.count);
  };
  return FinishCommand("evaluate", run());
}

}  // namespace pstrain
