// `pstrain describe`: what TF_CONFIG says this task is, and the cluster.
#ifndef PSTRAIN_CLI_DESCRIBE_H_
#define PSTRAIN_CLI_DESCRIBE_H_

#include <string>

#include "cluster/tf_config.h"

namespace pstrain {

// Text form: first "task: <role>:<index> <address>", then "environment: ..."
// and "chief duties: ...", then "cluster:" and one task per line
// ("ps:0 127.0.0.1:2222"), chief first, then ps, worker, evaluator.
std::string DescribeText(const TfConfig& cfg);

// The same as one JSON object: {"task": {"type", "index", "address"},
// "environment", "chief_duties", "cluster": [{"type","index","address"}...]}.
std::string DescribeJson(const TfConfig& cfg);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_DESCRIBE_H_
