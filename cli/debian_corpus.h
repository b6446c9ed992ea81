// `pstrain data debian-descriptions --out=DIR [--vocab_size=N] [--files=N]
// [--min_class=N] [--compression=GZIP|NONE] [--packages=FILE
// --translations=FILE]`: builds the Debian package descriptions corpus
// under DIR (data/debian_corpus_build.h) and prints its README.
#ifndef PSTRAIN_CLI_DEBIAN_CORPUS_H_
#define PSTRAIN_CLI_DEBIAN_CORPUS_H_

#include "base/cli_args.h"

namespace pstrain {

// Exit 0 when written; 2 for bad flags; 1 when apt's files cannot be
// found or read, or the corpus cannot be written.
int DebianDescriptionsMain(CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_DEBIAN_CORPUS_H_
