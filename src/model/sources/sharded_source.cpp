#include "model/sources/sharded_source.h"

#include <cstring>
#include <numeric>

#include "base/dtype.h"
#include "base/error.h"
#include "model/weights.h"

namespace tachyon::model {

ShardedSource::ShardedSource(std::shared_ptr<WeightSource> inner, ShardPlan plan, int rank)
    : inner_(std::move(inner)), plan_(std::move(plan)), rank_(rank) {
  if (rank < 0 || rank >= plan_.world) throw Error("rank {} is outside a tensor-parallel group of {}", rank, plan_.world);
}

WeightSource::Info ShardedSource::info(const std::string& name) const {
  Info i = inner_->info(name);
  const ShardKind kind = plan_.kind_of(name);
  if (kind == ShardKind::Rows && !i.shape.empty()) i.shape[0] /= plan_.world;
  if (kind == ShardKind::Cols && i.shape.size() >= 2) i.shape[1] /= plan_.world;
  return i;
}

namespace {

void check_divides(const std::string& name, int64_t extent, int world, const char* what) {
  if (extent % world != 0)
    throw Error("{}: its {} ({}) do not split evenly over {} tensor-parallel ranks", name, what, extent, world);
}

}  // namespace

HostTensor ShardedSource::load(const std::string& name) const {
  const ShardKind kind = plan_.kind_of(name);
  HostTensor t = inner_->load(name);
  if (kind == ShardKind::Replicate) return t;
  if (t.stored_transposed) throw Error("{}: tensor parallelism cannot split a transposed expert tensor", name);
  Weight& w = t.weight;
  const bool vector = t.shape.size() == 1;
  if (kind == ShardKind::FirstRank) {
    if (rank_ == 0) return t;
    if (w.quantized()) throw Error("{}: a quantized bias cannot be zeroed for tensor parallelism", name);
    HostTensor zero;
    zero.shape = t.shape;
    zero.owned.emplace_back(static_cast<size_t>(w.rows * w.cols) * dtype_size(w.dtype), uint8_t{0});
    zero.weight = w;
    zero.weight.data = zero.owned.back().data();
    return zero;
  }
  if (kind == ShardKind::Rows && !vector) {
    check_divides(name, w.rows, plan_.world, "rows");
    const auto [begin, end] = ShardPlan::range(w.rows, plan_.world, rank_);
    if (w.quantized()) {
      std::vector<int64_t> rows(static_cast<size_t>(end - begin));
      std::iota(rows.begin(), rows.end(), begin);
      HostTensor part = gather_rows(t, rows, name);
      if (part.weight.empty())
        throw Error("{}: tensor parallelism cannot split this quantized format's rows (its scales span rows)", name);
      return part;
    }
    w.data = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(begin * w.cols) * dtype_size(w.dtype);
    w.rows = end - begin;
    t.shape[0] = w.rows;
    return t;
  }
  // A column split (dim 1 of a matrix, or the elements of a vector): a strided copy.
  if (w.quantized()) throw Error("{}: tensor parallelism cannot split the columns of a quantized tensor yet", name);
  check_divides(name, w.cols, plan_.world, vector ? "elements" : "columns");
  const auto [begin, end] = ShardPlan::range(w.cols, plan_.world, rank_);
  const size_t esize = dtype_size(w.dtype), part_bytes = static_cast<size_t>(end - begin) * esize;
  HostTensor part;
  part.shape = t.shape;
  part.shape.back() = end - begin;
  part.owned.emplace_back(static_cast<size_t>(w.rows) * part_bytes);
  uint8_t* dst = part.owned.back().data();
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r)
    std::memcpy(dst + static_cast<size_t>(r) * part_bytes, src + static_cast<size_t>(r * w.cols + begin) * esize,
                part_bytes);
  part.weight = w;
  part.weight.data = dst;
  part.weight.cols = end - begin;
  return part;
}

}  // namespace tachyon::model
