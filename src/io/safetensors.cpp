#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace tachyon::io {

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::map<std::string, TensorView> parse_safetensors(const uint8_t* bytes, size_t size, const std::string& path,
                                                    Json* metadata) {
  if (size < 8) throw Error("{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", path, size);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian on every platform we support
  if (header_len > size - 8)
    throw Error("{}: safetensors header claims {} bytes but the file has only {} after the length field (truncated?)",
                path, header_len, size - 8);
  const std::string_view header_text(reinterpret_cast<const char*>(bytes + 8), header_len);
  Json header;
  try {
    header = Json::parse(header_text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number past a double (1e400)
    throw Error("{}: safetensors header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) throw Error("{}: safetensors header is not a JSON object", path);

  const uint8_t* data = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::map<std::string, TensorView> tensors;
  std::vector<std::pair<uint64_t, std::pair<uint64_t, std::string>>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (metadata) *metadata = it.value();
      continue;
    }
    const Json& entry = it.value();
    auto field_error = [&](const char* what) {
      return Error("{}: tensor '{}': {} in the safetensors header", path, name, what);
    };
    if (!entry.is_object()) throw field_error("entry is not an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) throw field_error("missing or non-string 'dtype'");
    if (!entry.contains("shape") || !entry["shape"].is_array()) throw field_error("missing or non-array 'shape'");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      throw field_error("missing 'data_offsets' [begin, end]");
    auto dtype = dtype_from_name(entry["dtype"].get<std::string>());
    if (!dtype) throw Error("{}: tensor '{}': unsupported dtype '{}'", path, name, entry["dtype"].get<std::string>());
    TensorView view;
    view.name = name;
    view.dtype = *dtype;
    view.file = path;
    uint64_t elements = 1;
    for (const Json& dim : entry["shape"]) {
      if (!dim.is_number_unsigned()) throw field_error("shape entry is not a non-negative integer");
      const uint64_t d = dim.get<uint64_t>();
      if (d != 0 && elements > (uint64_t{1} << 62) / d) throw field_error("shape overflows");
      elements *= d;
      view.shape.push_back(static_cast<int64_t>(d));
    }
    const Json& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      throw field_error("data_offsets are not non-negative integers");
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end) throw Error("{}: tensor '{}': data_offsets begin {} > end {}", path, name, begin, end);
    if (end > data_size)
      throw Error("{}: tensor '{}': data ends at byte {} but the data section has only {} bytes (truncated file?)",
                  path, name, end, data_size);
    if (end - begin != elements * dtype_size(*dtype))
      throw Error("{}: tensor '{}': shape {} of {} needs {} bytes but data_offsets span {}", path, name,
                  view.shape_string(), dtype_name(*dtype), elements * dtype_size(*dtype), end - begin);
    view.data = data + begin;
    view.num_bytes = end - begin;
    ranges.push_back({begin, {end, name}});
    tensors.emplace(name, std::move(view));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second.first)
      throw Error("{}: tensors '{}' and '{}' overlap in the data section", path, ranges[i - 1].second.second,
                  ranges[i].second.second);
  return tensors;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot stat '{}'", path);
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->mapping_size_ = static_cast<size_t>(st.st_size);
  if (file->mapping_size_ > 0) {
    file->mapping_ = ::mmap(nullptr, file->mapping_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file->mapping_ == MAP_FAILED) {
      file->mapping_ = nullptr;
      ::close(fd);
      throw Error("cannot mmap '{}': {}", path, std::strerror(errno));
    }
  }
  ::close(fd);
  file->tensors_ = parse_safetensors(static_cast<const uint8_t*>(file->mapping_), file->mapping_size_, path,
                                     &file->metadata_);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, mapping_size_);
}

Checkpoint Checkpoint::open_file(const std::string& path) {
  Checkpoint ckpt;
  ckpt.location_ = path;
  auto file = std::shared_ptr<SafetensorsFile>(SafetensorsFile::open(path));
  ckpt.tensors_ = file->tensors();
  ckpt.files_.push_back(std::move(file));
  return ckpt;
}

Checkpoint Checkpoint::open(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path index_path = dir / "model.safetensors.index.json";
  const fs::path single_path = dir / "model.safetensors";
  if (!fs::exists(index_path)) {
    if (!fs::exists(single_path))
      throw Error("{}: no model.safetensors or model.safetensors.index.json in the model directory", model_dir);
    Checkpoint ckpt = open_file(single_path.string());
    ckpt.location_ = model_dir;
    return ckpt;
  }
  const Json index = parse_json(read_file(index_path.string()), index_path.string());
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw Error("{}: missing 'weight_map' object", index_path.string());
  std::map<std::string, std::vector<std::string>> by_shard;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    if (!it.value().is_string()) throw Error("{}: weight_map['{}'] is not a file name", index_path.string(), it.key());
    const std::string shard = it.value().get<std::string>();
    if (shard.find('/') != std::string::npos || shard == "..")
      throw Error("{}: weight_map['{}'] names '{}', which is not a file in the model directory", index_path.string(),
                  it.key(), shard);
    by_shard[shard].push_back(it.key());
  }
  Checkpoint ckpt;
  ckpt.location_ = model_dir;
  for (const auto& [shard, names] : by_shard) {
    const fs::path shard_path = dir / shard;
    if (!fs::exists(shard_path))
      throw Error("{}: shard '{}' (holding '{}') does not exist", index_path.string(), shard, names.front());
    auto file = std::shared_ptr<SafetensorsFile>(SafetensorsFile::open(shard_path.string()));
    for (const auto& name : names) {
      auto it = file->tensors().find(name);
      if (it == file->tensors().end())
        throw Error("{}: the index maps tensor '{}' to this shard but it is not in it", shard_path.string(), name);
      ckpt.tensors_.emplace(name, it->second);
    }
    ckpt.files_.push_back(std::move(file));
  }
  return ckpt;
}

const TensorView& Checkpoint::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("{}: tensor '{}' not found in the checkpoint", location_, name);
  return it->second;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, const Json& metadata) {
  Json header = Json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    const uint64_t bytes = elements * dtype_size(t.dtype);
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  while ((text.size() + 8) % 8) text.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error("cannot write '{}'", path);
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(elements * dtype_size(t.dtype)));
  }
  if (!out) throw Error("error writing '{}'", path);
}

}  // namespace tachyon::io
