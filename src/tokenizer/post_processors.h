// Post-processors of tokenizer.json ("post_processor"): TemplateProcessing, ByteLevel,
// RobertaProcessing, BertProcessing and Sequence, for single sequences.
//
// They add the special tokens of the template (BOS, CLS/SEP ...) when add_special_tokens
// is true and leave the ids alone otherwise. ByteLevel only trims offsets, which the
// engine does not track, so it changes no id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"

namespace tachyon::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

// nullptr for JSON null; unknown types throw an Error naming the type and the path.
std::unique_ptr<PostProcessor> make_post_processor(const Json& value, const std::string& path);

}  // namespace tachyon::tokenizer
