#include "tokenizer/post_processors.h"

#include "base/error.h"
#include "tokenizer/json_fields.h"

namespace tachyon::tokenizer {

namespace {

// The single-sequence template: ids before $A and ids after it.
class Template : public PostProcessor {
 public:
  Template(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class NoOp : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& p : parts_) p->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> make_template(const Json& value, const std::string& path) {
  const std::string single_path = join_path(path, "single");
  const Json& single = get_array(value, "single", path);
  const std::string specials_path = join_path(path, "special_tokens");
  const Json* specials = optional_field(value, "special_tokens", path);
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string p = index_path(single_path, i);
    const Json& piece = require_object(single[i], p);
    if (piece.contains("Sequence")) {
      const std::string name = get_string(piece["Sequence"], "id", join_path(p, "Sequence"));
      if (name != "A") throw Error("{}.Sequence.id: a single-sequence template can only hold $A, got '{}'", p, name);
      if (seen_sequence) throw Error("{}: $A appears twice in the template", p);
      seen_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      const std::string name = get_string(piece["SpecialToken"], "id", join_path(p, "SpecialToken"));
      if (!specials || !specials->contains(name))
        throw Error("{}.SpecialToken.id: '{}' is not listed in {}", p, name, specials_path);
      const std::string sp = join_path(specials_path, name);
      const Json& ids = get_array((*specials)[name], "ids", sp);
      for (size_t k = 0; k < ids.size(); ++k)
        (seen_sequence ? after : before).push_back(to_token_id(ids[k], index_path(join_path(sp, "ids"), k)));
    } else {
      throw Error("{}: expected {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}, got {}", p, piece.dump());
    }
  }
  if (!seen_sequence) throw Error("{}: the template has no $A", single_path);
  return std::make_unique<Template>(std::move(before), std::move(after));
}

// [cls] $A [sep], with the tokens given as [string, id] pairs.
std::unique_ptr<PostProcessor> make_cls_sep(const Json& value, const std::string& path) {
  auto id_of = [&](const char* key) {
    const Json& pair = get_array(value, key, path);
    const std::string p = join_path(path, key);
    if (pair.size() != 2) throw Error("{}: expected [token, id]", p);
    return to_token_id(pair[1], index_path(p, 1));
  };
  return std::make_unique<Template>(std::vector<int32_t>{id_of("cls")}, std::vector<int32_t>{id_of("sep")});
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& value, const std::string& path) {
  if (value.is_null()) return nullptr;
  const std::string type = get_type(value, path);
  if (type == "TemplateProcessing") return make_template(value, path);
  if (type == "ByteLevel") return std::make_unique<NoOp>();
  if (type == "RobertaProcessing" || type == "BertProcessing") return make_cls_sep(value, path);
  if (type == "Sequence") {
    const std::string list_path = join_path(path, "processors");
    const Json& list = get_array(value, "processors", path);
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto part = make_post_processor(list[i], index_path(list_path, i));
      if (part) parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  throw Error("{}.type: unsupported post-processor type '{}' (supported: TemplateProcessing, ByteLevel, "
              "RobertaProcessing, BertProcessing, Sequence)",
              path, type);
}

}  // namespace tachyon::tokenizer
