// Labelled texts as a text-classification corpus of token ids, the way
// Keras's Reuters and IMDB sets come: a vocabulary of the training split's
// N most frequent words (data/tokenize.h), 0 padding and 1 out of
// vocabulary, each text a sequence of ids.
//
// Written under an output directory:
//   train-SSSSS-of-NNNNN.tfrecord[.gz]  the training split, in order, in N
//                                       files of consecutive examples
//   test-00000-of-00001.tfrecord[.gz]   the test split
//   vocab.txt                           word i (from 0) is id i + 2, the
//                                       vocabulary_file of the feature spec
//   labels.txt                          class i's name on line i
// Each record is a tf.train.Example of "tokens" (an int64_list of every
// word's id, in order) and "label" (an int64_list of one class).
// Stateless; thread-safe for distinct outputs.
#ifndef PSTRAIN_DATA_TEXT_CORPUS_H_
#define PSTRAIN_DATA_TEXT_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/byte_source.h"

namespace pstrain::data {

struct LabeledText {
  std::string label;
  std::string text;
};

// The lines "label<TAB>text" of a file (plain or ".gz"): the label is
// everything before the first tab, the text everything after it. Blank
// lines are passed over. InvalidArgument "PATH line N: ..." for a line
// without a tab or with an empty label; the reader's errors.
absl::StatusOr<std::vector<LabeledText>> ReadLabeledTsv(const std::string& path);

// The `size` most frequent words of the texts, most frequent first, ties
// in bytewise order.
std::vector<std::string> BuildVocabulary(const std::vector<LabeledText>& texts, int64_t size);

struct TextCorpusOptions {
  std::string out;
  int64_t vocab_size = 20000;
  int train_files = 1;
  Compression compression = Compression::kGzip;
};

struct TextCorpusSummary {
  std::vector<std::string> classes;   // by id
  std::vector<int64_t> train_counts;  // per class
  std::vector<int64_t> test_counts;   // per class
  int64_t vocabulary = 0;             // words in vocab.txt
  // Of the test split's words, the share outside the vocabulary.
  double test_oov_share = 0;
  std::vector<std::string> files;  // every file written
};

// Writes the corpus to options.out (created if needed). Classes: when
// every training label is an integer 0..99999 the labels are the class ids
// ("0".."max"); otherwise the training split's distinct labels in bytewise
// order. InvalidArgument for an empty training split, vocab_size or
// train_files out of range, a test label that is no training class;
// FailedPrecondition when out holds train-* or test-* files already;
// write errors. Each file is written whole or not at all.
absl::StatusOr<TextCorpusSummary> WriteTextCorpus(const std::vector<LabeledText>& train,
                                                  const std::vector<LabeledText>& test,
                                                  const TextCorpusOptions& options);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_TEXT_CORPUS_H_
