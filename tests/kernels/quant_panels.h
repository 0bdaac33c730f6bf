// Host weights packed into one of the CPU's quantized panel layouts (kernels/cpu/quant_pack.h),
// with the buffers that hold the packed bytes (the tests' QuantHost).
#pragma once

#include "kernels/cpu/quant_pack.h"
#include "quant_test_data.h"

namespace tachyon::kernels {

// bytes_of: quant_panel64_bytes or quant_panel64_dot_bytes; pack: the matching pack function.
template <typename BytesOf, typename Pack>
QuantHost pack_panels(const Weight& host, BytesOf bytes_of, Pack pack) {
  QuantHost p;
  const cpu::QuantPanelBytes bytes = bytes_of(host);
  p.codes.resize(bytes.codes);
  p.scales.resize(bytes.scales);
  p.biases.resize(bytes.biases);
  p.w = pack(host, p.codes.data(), p.scales.data(), p.biases.empty() ? nullptr : p.biases.data());
  return p;
}

}  // namespace tachyon::kernels
