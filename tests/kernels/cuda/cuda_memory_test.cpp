// Out of device memory on the CUDA backend: the error names the size asked for and what the
// device had free (a user sizing --ctx-size or --gpu-memory-utilization needs both), and the
// backend goes on working: the failure leaves no error behind for the next call to report.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "cuda_test_fixture.h"

namespace tachyon::kernels {
namespace {

TEST_F(CudaKernels, AnAllocationLargerThanTheDeviceNamesItsSizeAndWhatWasFree) {
  const auto memory = gpu->device_memory();
  ASSERT_TRUE(memory.has_value());
  const size_t too_much = memory->total_bytes * 2;
  std::string message;
  try {
    gpu->allocate(too_much);
    FAIL() << "allocating twice the device's memory succeeded";
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("device memory"), std::string::npos) << message;
  EXPECT_NE(message.find("could not be allocated"), std::string::npos) << message;
  EXPECT_NE(message.find(" free of "), std::string::npos) << message;
  EXPECT_NE(message.find("GiB"), std::string::npos) << message;
  // The next allocation and copy work, and no stale error surfaces at the next check.
  const std::vector<float> values = {1.f, 2.f, 3.f};
  float* d = upload(values);
  EXPECT_EQ(download(d, values.size()), values);
  gpu->synchronize();
}

}  // namespace
}  // namespace tachyon::kernels
