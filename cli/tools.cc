#include "cli/tools.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/command_output.h"
#include "client/grpc_control_channel.h"
#include "base/exit_codes.h"
#include "base/json.h"
#include "cluster/staleness.h"
#include "base/status_macros.h"
#include "cluster/tf_config.h"
#include "job/job_flags.h"
#include "job/security_flags.h"
#include "model/layer_kind.h"
#include "model/model_config.h"
#include "model/network.h"

namespace pstrain {
namespace {

double ImbalancePercent(const Placement& p) {
  int64_t total = 0, largest = 0;
  for (int64_t b : p.bytes_per_ps) {
    total += b;
    largest = std::max(largest, b);
  }
  const double ideal = static_cast<double>(total) / p.num_ps;
  return ideal > 0 ? 100.0 * (largest - ideal) / ideal : 0.0;
}

}  // namespace

// What moves each non-trainable variable, by name ("increment", "frozen").
static std::map<std::string, std::string> NonTrainable(const Placement& p) {
  std::map<std::string, std::string> out;
  for (const VariableDef& v : p.variables) {
    if (!v.trainable()) out[v.name] = VariableUpdateName(v.update);
  }
  return out;
}

std::string PlacementTable(const Placement& p) {
  std::string out =
      absl::StrFormat("%-28s %-8s %-16s %12s %4s\n", "variable", "slice", "rows", "bytes", "ps");
  const std::map<std::string, std::string> non_trainable = NonTrainable(p);
  for (const SliceDef& s : p.slices) {
    auto it = non_trainable.find(s.variable);
    out += absl::StrFormat(
        "%-28s %-8s %-16s %12d %4d%s\n", s.variable,
        absl::StrFormat("%d/%d", s.slice_index, s.num_slices),
        absl::StrFormat("[%d, %d)", s.row_begin, s.row_end), s.bytes(), s.ps,
        it == non_trainable.end() ? "" : absl::StrCat("  non-trainable (", it->second, ")"));
  }
  for (const VariableDef& e : p.embeddings) {
    out += absl::StrFormat("%-28s %-8s %-16s %12d %4s\n", e.name, "table",
                           absl::StrFormat("hash(id)%%%d", p.num_ps), e.bytes(), "all");
  }
  int64_t total = 0;
  for (int64_t b : p.bytes_per_ps) total += b;
  out += "\n";
  for (int i = 0; i < p.num_ps; ++i) {
    out += absl::StrFormat("ps:%-3d %12d bytes  %5.1f%%\n", i, p.bytes_per_ps[i],
                           total > 0 ? 100.0 * p.bytes_per_ps[i] / total : 0.0);
  }
  out += absl::StrFormat("total  %12d bytes; largest ps is %.1f%% above the ideal %d\n", total,
                         ImbalancePercent(p), total / p.num_ps);
  return out;
}

std::string PlacementJson(const Placement& p) {
  const std::map<std::string, std::string> non_trainable = NonTrainable(p);
  Json slices = Json::array();
  for (const SliceDef& s : p.slices) {
    Json j = Json::object();
    j["variable"] = s.variable;
    j["key"] = s.key();
    j["slice_index"] = s.slice_index;
    j["num_slices"] = s.num_slices;
    j["row_begin"] = s.row_begin;
    j["row_end"] = s.row_end;
    j["bytes"] = s.bytes();
    j["ps"] = s.ps;
    auto it = non_trainable.find(s.variable);
    j["trainable"] = it == non_trainable.end();
    if (it != non_trainable.end()) j["update"] = it->second;
    slices.push_back(std::move(j));
  }
  Json tables = Json::array();
  for (const VariableDef& e : p.embeddings) {
    Json j = Json::object();
    j["variable"] = e.name;
    j["vocabulary"] = e.rows();
    j["dim"] = e.row_elements();
    j["bytes"] = e.bytes();
    j["rows_on"] = "hash(id) mod num_ps";
    tables.push_back(std::move(j));
  }
  Json per_ps = Json::array();
  for (int64_t b : p.bytes_per_ps) per_ps.push_back(b);
  Json root = Json::object();
  root["num_ps"] = p.num_ps;
  root["slices"] = std::move(slices);
  root["embeddings"] = std::move(tables);
  root["bytes_per_ps"] = std::move(per_ps);
  root["imbalance_percent"] = ImbalancePercent(p);
  return root.dump() + "\n";
}

namespace {

// "staleness 0|1|2|3-4|...|65+": the histogram's column heading.
std::string StalenessHeader() {
  std::vector<std::string> names;
  for (int b = 0; b < kStalenessBuckets; ++b) names.push_back(StalenessBucketName(b));
  return absl::StrCat("staleness ", absl::StrJoin(names, "|"));
}

// One PS's slices summed per variable, in first-seen order.
std::vector<v1::SliceStats> PerVariable(const v1::StatsResponse& ps) {
  std::vector<v1::SliceStats> out;
  std::map<std::string, size_t> index;
  for (const v1::SliceStats& s : ps.slices()) {
    const std::string name = s.variable().empty() ? s.key() : s.variable();
    auto [it, inserted] = index.emplace(name, out.size());
    if (inserted) {
      v1::SliceStats v = s;
      v.set_key(name);
      out.push_back(v);
      continue;
    }
    v1::SliceStats& v = out[it->second];
    v.set_bytes(v.bytes() + s.bytes());
    v.set_rows(v.rows() + s.rows());
    v.set_pushes(v.pushes() + s.pushes());
    v.set_pulls(v.pulls() + s.pulls());
    v.set_step(std::min(v.step(), s.step()));
    v.set_dropped_stale(v.dropped_stale() + s.dropped_stale());
    for (int b = 0; b < s.staleness_histogram_size() && b < v.staleness_histogram_size(); ++b) {
      v.set_staleness_histogram(b, v.staleness_histogram(b) + s.staleness_histogram(b));
    }
  }
  return out;
}

}  // namespace

std::string StatusTable(const std::vector<HostPort>& addresses,
                        const std::vector<v1::StatsResponse>& stats) {
  std::string out;
  for (size_t i = 0; i < stats.size(); ++i) {
    out += absl::StrFormat("ps:%d %s  global step %d  resident %.0f MiB\n", stats[i].ps_index(),
                           addresses[i].ToString(), stats[i].global_step(),
                           stats[i].resident_bytes() / 1048576.0);
    if (stats[i].refused_unauthenticated() > 0 || stats[i].refused_over_limit() > 0) {
      out += absl::StrFormat("  refused: %d calls without the right token, %d over a limit\n",
                             stats[i].refused_unauthenticated(), stats[i].refused_over_limit());
    }
    if (stats[i].slices_size() == 0) {
      out += "  (no variables yet)\n";
      continue;
    }
    out += absl::StrFormat("  %-24s %-7s %12s %9s %9s %8s %8s  %s\n", "variable", "mode", "bytes",
                           "pushes", "pulls", "step", "dropped", StalenessHeader());
    for (const v1::SliceStats& v : PerVariable(stats[i])) {
      out += absl::StrFormat("  %-24s %-7s %12d %9d %9d %8d %8d  %s\n", v.key(), v.consistency(),
                             v.bytes(), v.pushes(), v.pulls(), v.step(), v.dropped_stale(),
                             absl::StrJoin(v.staleness_histogram(), " "));
    }
  }
  return out;
}

std::string StatusJson(const std::vector<HostPort>& addresses,
                       const std::vector<v1::StatsResponse>& stats) {
  Json root = Json::array();
  for (size_t i = 0; i < stats.size(); ++i) {
    Json ps = Json::object();
    ps["ps"] = stats[i].ps_index();
    ps["address"] = addresses[i].ToString();
    ps["global_step"] = stats[i].global_step();
    ps["resident_bytes"] = stats[i].resident_bytes();
    ps["refused_unauthenticated"] = stats[i].refused_unauthenticated();
    ps["refused_over_limit"] = stats[i].refused_over_limit();
    Json vars = Json::array();
    for (const v1::SliceStats& v : PerVariable(stats[i])) {
      Json j = Json::object();
      j["variable"] = v.key();
      j["consistency"] = v.consistency();
      j["bytes"] = v.bytes();
      j["rows"] = v.rows();
      j["pushes"] = v.pushes();
      j["pulls"] = v.pulls();
      j["step"] = v.step();
      j["dropped_stale"] = v.dropped_stale();
      Json hist = Json::array();
      for (int64_t b : v.staleness_histogram()) hist.push_back(b);
      j["staleness_histogram"] = std::move(hist);
      vars.push_back(std::move(j));
    }
    ps["variables"] = std::move(vars);
    root.push_back(std::move(ps));
  }
  return root.dump() + "\n";
}

int PlacementMain(CliArgs& args) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(int64_t num_ps, args.GetInt("ps", 0));
    PSTRAIN_ASSIGN_OR_RETURN(bool json, args.GetBool("json", false));
    PlacementOptions options;
    PSTRAIN_ASSIGN_OR_RETURN(options.min_slice_bytes,
                             args.GetInt("min_slice_bytes", options.min_slice_bytes));
    PSTRAIN_ASSIGN_OR_RETURN(std::string config, args.GetString("config", ""));
    // Without a config file, the job flags describe the model.
    model::JobSpec job;
    if (config.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(job, JobSpecFromFlags(args));
    }
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    if (num_ps < 1 || num_ps > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("--ps=", num_ps, ": must be in 1..1024"));
    }
    std::vector<VariableDef> variables;
    if (!config.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(variables, model::LoadModelConfig(config));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(model::ModelGraph graph, model::ModelGraph::Create(job.model));
      variables = graph.variables();
    }
    PSTRAIN_ASSIGN_OR_RETURN(Placement p, ComputePlacement(variables, num_ps, options));
    return json ? PlacementJson(p) : PlacementTable(p);
  };
  return FinishCommand("placement", run());
}

namespace {

// 332856 -> "332,856".
std::string WithCommas(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace

std::string SummaryTable(const std::string& title, const model::ModelGraph& net,
                         const Placement& placement) {
  // A graph adds Keras's functional columns: its input's row and, per
  // layer, the tensors it reads.
  const bool graph = !net.sequential();
  const int width = graph ? 112 : 78;
  const std::string rule(width, '_'), double_rule(width, '=');
  std::string out = absl::StrCat("Model: \"", title, "\"\n", rule, "\n");
  out += absl::StrFormat(" %-36s %-26s %12s", "Layer (type)", "Output Shape", "Param #");
  out += graph ? "   Connected to\n" : "\n";
  out += double_rule + "\n";
  int64_t total = 0;
  auto row = [&](const std::string& layer, const std::string& shape, int64_t params,
                 const std::string& connected) {
    std::string line = absl::StrFormat(" %-36s %-26s %12d", layer, shape, params);
    out += graph ? absl::StrCat(line, "   ", connected, "\n") : line + "\n";
    total += params;
  };
  const model::Embeddings& embeddings = net.embeddings();
  for (int i = 0; i < embeddings.size(); ++i) {
    const model::EmbeddingBag& e = embeddings[i];
    row(absl::StrCat(e.spec().name, e.spec().sequence ? " (Embedding)" : " (EmbeddingBag)"),
        model::KerasShape(e.output_shape()), e.spec().vocabulary * e.dim(), "[]");
  }
  // Several embeddings reach the first layer side by side.
  if (embeddings.size() > 1) {
    row("concatenate (Concatenate)", model::KerasShape(embeddings.output_shape()), 0, "[]");
  }
  const model::NetworkSpec& spec = net.spec();
  if (graph) row("input (InputLayer)", absl::StrCat("[", model::KerasShape(net.shapes()[0]), "]"),
                 0, "[]");
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    int64_t params = 0;
    for (const model::Shape& v :
         model::LayerVariableShapes(spec.layers[l], net.input_shape(static_cast<int>(l)))) {
      params += model::ShapeSize(v);
    }
    std::vector<std::string> reads;
    for (int p : net.layer_inputs(static_cast<int>(l))) {
      reads.push_back(absl::StrCat("'", p == 0 ? "input" : spec.layers[p - 1].name, "[0][0]'"));
    }
    const char* keras_class = model::KindDef(spec.layers[l].kind).keras_class();
    row(absl::StrCat(spec.layers[l].name, " (", keras_class, ")"),
        model::KerasShape(net.shapes()[l + 1]), params,
        absl::StrCat("[", absl::StrJoin(reads, ", "), "]"));
  }
  out += double_rule + "\n";
  // Keras's counts: the optimizer's variables, and the rest (moving
  // statistics, frozen layers).
  int64_t trainable = 0;
  for (const VariableDef& v : net.variables()) {
    if (v.embedding || v.trainable()) trainable += v.elements();
  }
  out += absl::StrCat("Total params: ", WithCommas(total), "\nTrainable params: ",
                      WithCommas(trainable), "\nNon-trainable params: ", WithCommas(total - trainable),
                      "\n", rule, "\n");
  out += absl::StrFormat("Variables on %d PS:\n", placement.num_ps);
  for (const VariableDef& v : placement.variables) {
    std::string where;
    if (v.embedding) {
      where =
          absl::StrCat("embedding table, rows spread by hash(id) over ",
                       placement.num_ps == 1 ? "the PS" : "every PS", ", pulled and pushed by id");
    } else {
      const std::vector<SliceDef> slices = placement.SlicesOf(v.name);
      if (slices.size() == 1) {
        where = absl::StrCat("ps ", slices[0].ps);
      } else {
        std::vector<std::string> parts;
        for (const SliceDef& s : slices) {
          parts.push_back(absl::StrFormat("rows [%d, %d) on ps %d", s.row_begin, s.row_end, s.ps));
        }
        where = absl::StrCat(slices.size(), " slices: ", absl::StrJoin(parts, ", "));
      }
      if (v.update == VariableUpdate::kIncrement) {
        where += "; non-trainable, moved by the replicas' increments";
      } else if (v.update == VariableUpdate::kFrozen) {
        where += "; non-trainable, frozen";
      }
    }
    out += absl::StrFormat(" %-28s %-18s %12s bytes  %s\n", v.name, model::ShapeString(v.shape),
                           WithCommas(v.bytes()), where);
  }
  return out;
}

int SummaryMain(CliArgs& args) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(int64_t num_ps, args.GetInt("ps", 1));
    PSTRAIN_ASSIGN_OR_RETURN(std::string config, args.GetString("config", ""));
    if (config.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(config, args.GetString("model_config", ""));
    }
    // The sizes that follow from the data: its vocab.txt and labels.txt,
    // or what --vocabulary and --classes say in their place.
    PSTRAIN_ASSIGN_OR_RETURN(std::string data_dir,
                             args.GetString("data_dir", model::JobSpec().data_dir));
    PSTRAIN_ASSIGN_OR_RETURN(int64_t vocabulary,
                             args.GetIntInRange("vocabulary", 0, 0, int64_t{1} << 40));
    PSTRAIN_ASSIGN_OR_RETURN(int64_t classes, args.GetIntInRange("classes", 0, 0, 65536));
    model::DataSizes sizes = model::DataSizesOf(data_dir);
    if (vocabulary > 0) {
      sizes.vocabulary = vocabulary;
      sizes.replace_vocabulary = true;
    }
    if (classes > 0) {
      sizes.classes = classes;
      sizes.replace_classes = true;
    }
    PSTRAIN_RETURN_IF_ERROR(ReadModelOverrides(args, &sizes));
    model::JobSpec job;
    if (config.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(job, JobSpecFromFlags(args, nullptr, &sizes));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(model::ModelConfigFile file,
                               model::LoadModelConfigFile(config, sizes));
      if (!file.trainable) {
        return absl::InvalidArgumentError(
            absl::StrCat(config,
                         " lists variables, not layers: there is no model to summarise "
                         "(pstrain placement places its variables)"));
      }
      job = std::move(file.job);
    }
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    if (num_ps < 1 || num_ps > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("--ps=", num_ps, ": must be in 1..1024"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(model::ModelGraph graph, model::ModelGraph::Create(job.model));
    PSTRAIN_ASSIGN_OR_RETURN(Placement p,
                             ComputePlacement(graph.variables(), static_cast<int>(num_ps)));
    return SummaryTable(config.empty() ? "job flags" : config, graph, p);
  };
  return FinishCommand("summary", run());
}

int StatusMain(CliArgs& args, const std::string& tf_config) {
  absl::Status unanswered;  // the first PS that did not answer
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(std::string ps_list, args.GetString("ps", ""));
    PSTRAIN_ASSIGN_OR_RETURN(bool json, args.GetBool("json", false));
    PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const Security> security, SecurityFromFlags(args));
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    std::vector<HostPort> addresses;
    if (!ps_list.empty()) {
      int i = 0;
      for (absl::string_view a : absl::StrSplit(ps_list, ',')) {
        PSTRAIN_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(a, absl::StrCat("--ps entry ", i++)));
        addresses.push_back(hp);
      }
    } else if (!tf_config.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(TfConfig cfg, ParseTfConfig(tf_config));
      addresses = cfg.cluster.ps;
    }
    if (addresses.empty()) {
      return absl::InvalidArgumentError("no ps to ask: give --ps=HOST:PORT,... or set TF_CONFIG");
    }
    // Each PS on its own: one that does not answer is reported, and the
    // others still are.
    std::string table;
    Json list = Json::array();
    for (size_t i = 0; i < addresses.size(); ++i) {
      client::ControlChannelOptions options;
      options.ps_addresses = {addresses[i]};
      options.security = security;
      client::GrpcControlChannel channel(options);
      absl::StatusOr<std::vector<v1::StatsResponse>> stats;
      if (absl::StatusOr<v1::StatsResponse> one = channel.Stats(0, absl::Now() + absl::Seconds(5));
          one.ok()) {
        stats = std::vector<v1::StatsResponse>{*std::move(one)};
      } else {
        stats = one.status();
      }
      if (!stats.ok()) {
        if (unanswered.ok()) unanswered = stats.status();
        // The client, asking this PS alone, calls it ps:0: the line names it.
        absl::string_view why = stats.status().message();
        absl::ConsumePrefix(&why, absl::StrCat("ps:0 (", addresses[i].ToString(), "): "));
        table +=
            absl::StrCat("ps:", i, " ", addresses[i].ToString(), "  not answering: ", why, "\n");
        list.push_back(
            Json{{"ps", i}, {"address", addresses[i].ToString()}, {"error", std::string(why)}});
        continue;
      }
      if (json) {
        PSTRAIN_ASSIGN_OR_RETURN(Json one_ps, ParseJson(StatusJson({addresses[i]}, *stats)));
        for (Json& entry : one_ps) list.push_back(std::move(entry));
      } else {
        table += StatusTable({addresses[i]}, *stats);
      }
    }
    return json ? list.dump() + "\n" : table;
  };
  auto out = run();
  if (!out.ok()) return FailCommand("status", out.status());
  std::fputs(out->c_str(), stdout);
  if (!unanswered.ok()) {
    std::fprintf(stderr, "pstrain status: not every ps answered\n");
    return CommandExitCode(unanswered);
  }
  return kExitOk;
}

}  // namespace pstrain
