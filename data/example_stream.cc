#include "data/example_stream.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace pstrain::data {
namespace {

std::mt19937_64 RngOf(uint64_t seed, int64_t epoch, uint32_t stream) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(epoch), stream};
  return std::mt19937_64(seq);
}

}  // namespace

ExampleStream::ExampleStream(const StreamSpec& spec, std::shared_ptr<const RecordFormat> format)
    : spec_(spec), format_(std::move(format)), decoder_(format_->NewDecoder(spec.num_classes)) {}

absl::StatusOr<std::unique_ptr<ExampleStream>> ExampleStream::Open(
    const StreamSpec& spec, std::shared_ptr<const RecordFormat> format) {
  std::unique_ptr<ExampleStream> s(new ExampleStream(spec, std::move(format)));
  PSTRAIN_RETURN_IF_ERROR(s->Count());
  const int64_t slots = std::max<int64_t>(1, std::min(spec.shuffle_buffer, s->shard_size_));
  if (s->encoded()) {
    s->records_.resize(slots);
    s->wheres_.resize(slots);
  } else {
    s->dense_.resize(slots * s->example_dim());
    s->ids_.resize(slots * s->ids_dim());
    s->labels_.resize(slots);
  }
  return s;
}

absl::StatusOr<std::unique_ptr<RecordReader>> ExampleStream::OpenFile(int i) const {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RecordReader> reader,
                           format_->OpenFile(spec_.files[i].path, spec_.compressions[i]));
  return LimitToRange(std::move(reader), spec_.files[i]);
}

absl::Status ExampleStream::Count() {
  const int files = static_cast<int>(spec_.files.size());
  std::vector<int64_t> counts(files);
  std::vector<float> dense(example_dim());
  std::vector<int64_t> ids(ids_dim());
  int32_t label;
  for (int i = 0; i < files; ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RecordReader> reader, OpenFile(i));
    while (true) {
      const int64_t at = reader->offset();
      // Strict: the framing is enough (a bad record stops the job when it
      // is read). Skipping: only what decodes counts.
      absl::StatusOr<bool> more = spec_.skip_bad ? reader->Next(&record_) : reader->Skip();
      if (!more.ok()) {
        if (!spec_.skip_bad) return more.status();
        ++skipped_;
        LogSkippedRecord(more.status().message());
        if (!reader->can_continue()) break;
        continue;
      }
      if (!*more) break;
      if (spec_.skip_bad) {
        absl::Status s = decoder_->Decode(record_, dense.data(), ids.data(), &label);
        if (!s.ok()) {
          ++skipped_;
          LogSkippedRecord(absl::StrCat(reader->Where(at), ": ", s.message()));
          continue;
        }
      }
      ++counts[i];
    }
    split_examples_ += counts[i];
  }
  const int r = spec_.replica, n = spec_.num_replicas;
  for (int i = 0; i < files; ++i) {
    if (!spec_.by_file || i % n == r) own_files_.push_back(i);
  }
  if (spec_.by_file) {
    for (int i : own_files_) shard_size_ += counts[i];
  } else {
    shard_size_ = split_examples_ / n + (r < split_examples_ % n ? 1 : 0);
  }
  return absl::OkStatus();
}

void ExampleStream::StartEpoch(int64_t epoch) {
  epoch_ = epoch;
  emitted_ = 0;
  // The file order is the same on every replica: (seed, epoch) only.
  file_order_ = own_files_;
  std::mt19937_64 order = RngOf(spec_.seed, epoch, 0);
  std::shuffle(file_order_.begin(), file_order_.end(), order);
  next_file_ = 0;
  reader_.reset();
  sequence_ = 0;
  rng_ = RngOf(spec_.seed, epoch, 1 + static_cast<uint32_t>(spec_.replica));
  held_ = 0;
  drained_ = false;
}

absl::StatusOr<bool> ExampleStream::ReadInto(int64_t slot) {
  const int r = spec_.replica, n = spec_.num_replicas;
  while (true) {
    if (reader_ == nullptr) {
      if (next_file_ == file_order_.size()) return false;
      const int f = file_order_[next_file_++];
      PSTRAIN_ASSIGN_OR_RETURN(reader_, OpenFile(f));
    }
    const int64_t at = reader_->offset();
    absl::StatusOr<bool> more = reader_->Next(&record_);
    if (!more.ok()) {
      // Open's pass logged and counted it.
      if (!spec_.skip_bad) return more.status();
      if (!reader_->can_continue()) reader_.reset();
      continue;
    }
    if (!*more) {
      reader_.reset();
      continue;
    }
    // Strict, the epoch's sequence is every record; skipping, every record
    // that decodes, so only then must each replica decode all of them.
    if (!spec_.skip_bad && !spec_.by_file && sequence_++ % n != r) continue;
    if (encoded()) {
      records_[slot].swap(record_);
      wheres_[slot] = reader_->Where(at);
      return true;
    }
    absl::Status s = decoder_->Decode(record_, dense_.data() + slot * example_dim(),
                                      ids_.data() + slot * ids_dim(), &labels_[slot]);
    if (!s.ok()) {
      if (!spec_.skip_bad) {
        return absl::DataLossError(absl::StrCat(reader_->Where(at), ": ", s.message()));
      }
      continue;
    }
    if (spec_.skip_bad && !spec_.by_file && sequence_++ % n != r) continue;
    return true;
  }
}

absl::Status ExampleStream::Emit(float* dense, int64_t* ids, int32_t* label) {
  const int64_t slots = this->slots();
  while (!drained_ && held_ < slots) {
    PSTRAIN_ASSIGN_OR_RETURN(bool got, ReadInto(held_));
    if (!got) {
      drained_ = true;
      break;
    }
    ++held_;
  }
  if (held_ == 0) {
    return absl::DataLossError(
        absl::StrCat("the training files hold fewer records than when the job started: epoch ",
                     epoch_, " of replica ", spec_.replica, " ended after ", emitted_, " of its ",
                     shard_size_, " examples"));
  }
  const int64_t i = std::uniform_int_distribution<int64_t>(0, held_ - 1)(rng_);
  const int64_t dim = example_dim(), ids_dim = this->ids_dim();
  if (encoded()) {
    // Decoded now (not at all when Seek passes over it).
    if (dense != nullptr) {
      scratch_ids_.resize(ids_dim);
      absl::Status s = decoder_->Decode(records_[i], dense,
                                        ids != nullptr ? ids : scratch_ids_.data(), label);
      if (!s.ok()) return absl::DataLossError(absl::StrCat(wheres_[i], ": ", s.message()));
    }
  } else if (dense != nullptr) {
    std::memcpy(dense, dense_.data() + i * dim, dim * sizeof(float));
    if (ids != nullptr && ids_dim > 0) {
      std::memcpy(ids, ids_.data() + i * ids_dim, ids_dim * sizeof(int64_t));
    }
    *label = labels_[i];
  }
  ++emitted_;
  // The slot taken is refilled from the files, or by the last one held.
  if (!drained_) {
    PSTRAIN_ASSIGN_OR_RETURN(bool got, ReadInto(i));
    if (got) return absl::OkStatus();
    drained_ = true;
  }
  --held_;
  if (i != held_ && encoded()) {
    records_[i].swap(records_[held_]);
    wheres_[i].swap(wheres_[held_]);
  } else if (i != held_) {
    std::memcpy(dense_.data() + i * dim, dense_.data() + held_ * dim, dim * sizeof(float));
    if (ids_dim > 0) {
      std::memcpy(ids_.data() + i * ids_dim, ids_.data() + held_ * ids_dim,
                  ids_dim * sizeof(int64_t));
    }
    labels_[i] = labels_[held_];
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ExampleStream::Next(float* features, int32_t* labels, int64_t* ids) {
  const int batch = spec_.batch_size;
  if (batches_per_epoch() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("replica ", spec_.replica, "'s share of the stream has ", shard_size_,
                     " examples, fewer than one batch of ", batch));
  }
  if (epoch_ < 0 || emitted_ >= batches_per_epoch() * batch) StartEpoch(epoch_ + 1);
  const int64_t dim = example_dim(), ids_dim = this->ids_dim();
  for (int b = 0; b < batch; ++b) {
    PSTRAIN_RETURN_IF_ERROR(
        Emit(features + b * dim, ids == nullptr ? nullptr : ids + b * ids_dim, labels + b));
  }
  return epoch_;
}

absl::Status ExampleStream::Seek(int64_t batch) {
  const int64_t per_epoch = batches_per_epoch();
  epoch_ = -1;
  if (per_epoch == 0 || batch == 0) return absl::OkStatus();
  // Epochs are independent: open the batch's and replay it to the batch.
  StartEpoch(batch / per_epoch);
  const int64_t examples = (batch % per_epoch) * spec_.batch_size;
  while (emitted_ < examples) {
    PSTRAIN_RETURN_IF_ERROR(Emit(nullptr, nullptr, nullptr));
  }
  return absl::OkStatus();
}

}  // namespace pstrain::data
