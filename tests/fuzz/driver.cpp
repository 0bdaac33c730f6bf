// Replay-and-mutate driver for fuzz targets, used when libFuzzer is not the build's
// engine (gcc, CI). It feeds every file of the corpus directory to the target, then
// `--runs N` inputs made by seeded random mutations of corpus entries (bit flips, byte
// insertions and deletions, splices, truncations). Deterministic: the same corpus and N
// give the same inputs. A crash, sanitizer report or escaped exception fails the test.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<uint8_t> mutate(const std::vector<std::vector<uint8_t>>& corpus, std::mt19937_64& rng) {
  std::vector<uint8_t> out = corpus[rng() % corpus.size()];
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:
        if (!out.empty()) out[rng() % out.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        out.insert(out.begin() + static_cast<long>(out.empty() ? 0 : rng() % (out.size() + 1)),
                   static_cast<uint8_t>(rng()));
        break;
      case 2:
        if (!out.empty()) out.erase(out.begin() + static_cast<long>(rng() % out.size()));
        break;
      case 3:
        if (!out.empty()) out.resize(rng() % out.size());
        break;
      case 4: {
        const auto& other = corpus[rng() % corpus.size()];
        if (!other.empty()) {
          size_t from = rng() % other.size(), len = 1 + rng() % std::min<size_t>(64, other.size() - from);
          size_t at = out.empty() ? 0 : rng() % (out.size() + 1);
          out.insert(out.begin() + static_cast<long>(at), other.begin() + static_cast<long>(from),
                     other.begin() + static_cast<long>(from + len));
        }
        break;
      }
      default:
        if (!out.empty()) {
          static constexpr char kInteresting[] = "{}[]\":,\\\0\xff 0a<>|%";
          out[rng() % out.size()] = static_cast<uint8_t>(kInteresting[rng() % (sizeof(kInteresting) - 1)]);
        }
        break;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 20000;
  std::vector<std::vector<uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::atol(argv[++i]);
      continue;
    }
    std::filesystem::path dir(argv[i]);
    if (!std::filesystem::exists(dir)) {
      std::fprintf(stderr, "fuzz driver: corpus '%s' does not exist\n", argv[i]);
      return 2;
    }
    auto add = [&](const std::filesystem::path& p) {
      std::ifstream in(p, std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    };
    if (std::filesystem::is_directory(dir)) {
      std::vector<std::filesystem::path> files;
      for (auto& entry : std::filesystem::recursive_directory_iterator(dir))
        if (entry.is_regular_file()) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (auto& f : files) add(f);
    } else {
      add(dir);
    }
  }
  if (corpus.empty()) corpus.push_back({});
  for (auto& input : corpus) LLVMFuzzerTestOneInput(input.data(), input.size());
  std::mt19937_64 rng(0x7ac4f0);
  for (long r = 0; r < runs; ++r) {
    auto input = mutate(corpus, rng);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("fuzz driver: %zu corpus inputs, %ld mutations, no crash\n", corpus.size(), runs);
  return 0;
}
