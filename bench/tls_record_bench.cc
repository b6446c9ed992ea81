// Google Benchmark of TLS 1.3 records sealed and opened in this process
// (transport/tls_record.h) on one core, against one bare AES-128-GCM pass
// of OpenSSL over the same bytes and a memcpy: what the record layer adds
// to the cipher per byte of a frame (a nonce, additional data and tag per
// 16 KiB record, and the spill of a record past a read's end).
//   bazel build -c opt //bench:tls_record_bench && bazel-bin/bench/tls_record_bench
#include <openssl/evp.h>

#include <cstring>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "transport/frame_tls.h"
#include "transport/tls_record.h"

namespace pstrain {
namespace {

TrafficKeys Keys() {
  TrafficKeys keys;
  keys.key = std::string(16, 'k');
  keys.iv = std::string(12, 'i');
  return keys;
}

std::vector<char> Frame(size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 131);
  return v;
}

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<char> in = Frame(n), out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), n);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}

// One AES-128-GCM encryption of the whole frame: the cipher alone.
void BM_BareAesGcm(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<char> in = Frame(n), out(n + 16);
  const TrafficKeys keys = Keys();
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const auto* key = reinterpret_cast<const unsigned char*>(keys.key.data());
  const auto* iv = reinterpret_cast<const unsigned char*>(keys.iv.data());
  for (auto _ : state) {
    int len = 0;
    EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key, iv);
    EVP_EncryptUpdate(ctx, reinterpret_cast<unsigned char*>(out.data()), &len,
                      reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(n));
    EVP_EncryptFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()) + len, &len);
    benchmark::DoNotOptimize(out.data());
  }
  EVP_CIPHER_CTX_free(ctx);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}

// The records of a frame (its 8-byte length, then its bytes) sealed into
// one buffer, as a frame socket's writer does.
size_t SealFrame(RecordSealer& sealer, const std::vector<char>& frame, std::vector<char>& out) {
  char length[8] = {};
  size_t filled = 0, at = 0;
  bool first = true;
  while (at < frame.size()) {
    iovec pieces[2];
    size_t count = 0, bytes = 0;
    if (first) {
      pieces[count++] = {length, sizeof(length)};
      bytes = sizeof(length);
      first = false;
    }
    const size_t take = std::min(kTlsMaxRecordData - bytes, frame.size() - at);
    pieces[count++] = {const_cast<char*>(frame.data()) + at, take};
    bytes += take;
    at += take;
    filled += sealer.Seal(kTlsApplicationData, pieces, count, bytes, out.data() + filled).value();
  }
  return filled;
}

std::vector<char> SealedBuffer(size_t n) {
  return std::vector<char>(n + (n / kTlsMaxRecordData + 2) * SealedRecordBytes(0) + 8);
}

void BM_SealFrame(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<char> frame = Frame(n), out = SealedBuffer(n);
  auto sealer = RecordSealer::Make(Keys()).value();
  for (auto _ : state) {
    benchmark::DoNotOptimize(SealFrame(*sealer, frame, out));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}

// The same records opened into the frame's memory, as a frame socket's
// reader does: the length into its 8 bytes (the rest of the first record
// spills), then the payload.
void BM_OpenFrame(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<char> frame = Frame(n), sealed = SealedBuffer(n), into(n);
  std::vector<char> spill(kTlsMaxRecordData);
  // Sealed once per sequence number the opener will reach: a fresh
  // sealer and opener per pass keep them in step.
  for (auto _ : state) {
    state.PauseTiming();
    auto sealer = RecordSealer::Make(Keys()).value();
    auto opener = RecordOpener::Make(Keys()).value();
    const size_t total = SealFrame(*sealer, frame, sealed);
    state.ResumeTiming();
    char length[8];
    size_t at = 0, placed = 0;
    bool first = true;
    while (at < total) {
      const size_t record =
          RecordOpener::RecordBytes(reinterpret_cast<const unsigned char*>(sealed.data() + at))
              .value();
      iovec dst = first ? iovec{length, sizeof(length)} : iovec{into.data() + placed, n - placed};
      RecordOpener::Opened o =
          opener->Open(sealed.data() + at, record, &dst, 1, spill.data()).value();
      if (first) {
        std::memcpy(into.data(), spill.data(), o.spilled);
        placed = o.spilled;
        first = false;
      } else {
        placed += o.placed;
      }
      at += record;
    }
    benchmark::DoNotOptimize(into.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}

// A 4 KiB frame, the guide MLP's 1 MiB frames, and 4 MiB.
BENCHMARK(BM_Memcpy)->Arg(4096)->Arg(1 << 20)->Arg(4 << 20);
BENCHMARK(BM_BareAesGcm)->Arg(4096)->Arg(1 << 20)->Arg(4 << 20);
BENCHMARK(BM_SealFrame)->Arg(4096)->Arg(1 << 20)->Arg(4 << 20);
BENCHMARK(BM_OpenFrame)->Arg(4096)->Arg(1 << 20)->Arg(4 << 20);

}  // namespace
}  // namespace pstrain
