#include "engine_decode.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include "engine/engine.h"

namespace tachyon::bench {

void engine_decode_table(model::Model& model, const std::vector<int>& batches, int runs, double roofline_batch1,
                         Json& out) {
  constexpr int kPrompt = 128, kTokens = 64;
  std::mt19937 rng(5);
  const auto vocab = static_cast<uint32_t>(model.config().vocab_size);
  for (int b : batches) {
    double off_tps = 0;
    for (auto overlap : {engine::EngineConfig::Overlap::Off, engine::EngineConfig::Overlap::On}) {
      engine::EngineConfig config;
      config.max_concurrent = b;
      config.num_blocks = b * (kPrompt + kTokens + 32) / 16 + 16;
      config.prefix_cache = false;
      config.overlap_steps = overlap;
      engine::Engine engine(model, config);
      std::vector<double> tps;
      for (int r = 0; r <= runs; ++r) {  // run 0 warms up (graphs captured)
        const auto before = engine.stats();
        std::vector<std::shared_ptr<engine::RequestStream>> streams;
        for (int i = 0; i < b; ++i) {
          engine::GenerationRequest request;
          for (int t = 0; t < kPrompt; ++t) request.prompt.push_back(static_cast<int32_t>(rng() % vocab));
          request.max_tokens = kTokens;
          request.sampling.temperature = 0;
          streams.push_back(engine.submit(std::move(request)));
        }
        for (auto& s : streams)
          while (auto o = s->next(std::chrono::seconds(300)))
            if (o->finish != engine::FinishReason::None) break;
        for (int i = 0; i < 1000 && engine.stats().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const auto after = engine.stats();
        const double seconds = after.plain_step_seconds - before.plain_step_seconds;
        const double steps = static_cast<double>(after.plain_decode_steps - before.plain_decode_steps);
        if (r > 0 && seconds > 0) tps.push_back(b * steps / seconds);
      }
      std::sort(tps.begin(), tps.end());
      const double d = tps.empty() ? 0 : tps[tps.size() / 2];
      const bool on = overlap == engine::EngineConfig::Overlap::On;
      if (b == 1)
        std::printf("| decode batch 1 tok/s, engine, overlap %s | %.1f | %.1f | %.1f%% |\n", on ? "on" : "off", d,
                    roofline_batch1, 100 * d / roofline_batch1);
      else
        std::printf("| decode batch %d tok/s, engine, overlap %s | %.1f | | |\n", b, on ? "on" : "off", d);
      if (on) std::printf("| decode batch %d engine, overlap on over off | %.3f | | |\n", b, off_tps > 0 ? d / off_tps : 0);
      else off_tps = d;
      out["engine_decode_" + std::to_string(b) + (on ? "_on" : "_off")] = {{"tok_s", d}, {"runs", tps}};
      std::fflush(stdout);
    }
  }
}

}  // namespace tachyon::bench
