// Byte buffers in tests: the bytes a grpc::ByteBuffer holds, as one string.
#ifndef PSTRAIN_BASE_TESTING_BYTE_BUFFERS_H_
#define PSTRAIN_BASE_TESTING_BYTE_BUFFERS_H_

#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"

namespace pstrain::testing {

inline std::string Flatten(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

}  // namespace pstrain::testing

#endif  // PSTRAIN_BASE_TESTING_BYTE_BUFFERS_H_
