// A model folder's fingerprint: 64 bits that change when its weights or config change, for
// caches that must never serve one model's results to another (the disk prefix tier, the
// response cache).
//
// Hashed: config.json and every weight file directly in the folder (*.safetensors, *.gguf,
// the safetensors index), each by name, size, its first and last MiB (the headers, with every
// tensor's name, dtype, shape and offset) and 4 KiB of every 64 MiB between, so a checkpoint
// retrained or re-randomized with the same shapes differs too. Not the whole of the bytes:
// hashing tens of GB at every start would cost more than the caches save.
//
//   uint64_t fp = weights_fingerprint("/models/qwen3-8b");   // throws Error when nothing is there
#pragma once

#include <cstdint>
#include <string>

namespace tachyon::io {

uint64_t weights_fingerprint(const std::string& dir);

}  // namespace tachyon::io
