// `pstrain data debian-descriptions --out=DIR [--vocab_size=N] [--files=N]
// [--min_class=N] [--compression=GZIP|NONE] [--packages=FILE
// --translations=FILE]`: builds the Debian package descriptions corpus
// (data/debian_descriptions.h, data/text_corpus.h) under DIR with a README
// of its classes. Without --packages and --translations it reads the main
// archive's index files of the system's release as apt keeps them
// (`apt-get indextargets`, decompressed by `apt-helper cat-file`), first
// running `apt-get update -o Acquire::Languages=en` when the English
// translations are missing (as root; otherwise it says to).
#ifndef PSTRAIN_CLI_DEBIAN_CORPUS_H_
#define PSTRAIN_CLI_DEBIAN_CORPUS_H_

#include "base/cli_args.h"

namespace pstrain {

// Exit 0 when written; 2 for bad flags; 1 when apt's files cannot be
// found or read, or the corpus cannot be written.
int DebianDescriptionsMain(CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_DEBIAN_CORPUS_H_
