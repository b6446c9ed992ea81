// What `pstrain launch` reads from its tasks' logs and the chief's
// metrics: the lines it relays, why a task failed, the closing report.
// Pure functions over text and files; thread-compatible.
#ifndef PSTRAIN_LAUNCHER_TASK_LOGS_H_
#define PSTRAIN_LAUNCHER_TASK_LOGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cluster/tf_config.h"

namespace pstrain::launcher {

// The whole lines of `path` past *offset (advanced past them); "" when
// there are none yet or the file cannot be read.
std::string ReadNewLines(const std::string& path, int64_t* offset);

// A log an earlier launch into the same directory left at `log`
// (logs/ps-0.log) is kept as logs/ps-0.1.log, .2, ...: the first free one.
// Nothing happens when `log` is missing or empty.
void KeepEarlierLog(const std::string& log);

// The line of a failed task's log that says why: its last line naming
// "failed" or "error", else its last line, less the log's own
// "HH:MM:SS.mmm type:index: " prefix. "" when the log cannot be read.
std::string WhyFailed(const std::string& log);

// The line launch prints for `line` of task `id`'s log, if any: a
// training task's progress lines ("step N/M - loss ... - ETA ...") under
// the task's name, the evaluator's "eval at step" lines.
std::optional<std::string> RelayedLine(const TaskId& id, absl::string_view line);

// The closing lines from the chief's final_metrics.json text: the test
// accuracy (and AUC), the job's throughput with each replica's beside it,
// and where the metrics and logs are. FailedPrecondition when the text
// has no test_accuracy.
absl::StatusOr<std::vector<std::string>> FinalReport(const std::string& metrics_json,
                                                     const std::string& output_dir,
                                                     const std::string& logs);

}  // namespace pstrain::launcher

#endif  // PSTRAIN_LAUNCHER_TASK_LOGS_H_
