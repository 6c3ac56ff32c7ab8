// src/train/totals.h: byte and selection counts per layer type, summed over
// learners and steps, from which the reported compression rates and
// selected-per-bin figures come; and their checkpoint record. Thread
// safety: values; one object per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "adacomp/trainer.h"
#include "byte_io.h"

namespace adacomp::train {

struct Totals {
  uint64_t wire[kLayerTypeCount] = {};
  uint64_t dense[kLayerTypeCount] = {};
  uint64_t selected[kLayerTypeCount] = {};
  uint64_t bins[kLayerTypeCount] = {};
  void Add(const Totals& o) {
    for (int t = 0; t < kLayerTypeCount; ++t) {
      wire[t] += o.wire[t];
      dense[t] += o.dense[t];
      selected[t] += o.selected[t];
      bins[t] += o.bins[t];
    }
  }
  uint64_t WireAll() const { return wire[0] + wire[1] + wire[2] + wire[3]; }
  uint64_t DenseAll() const { return dense[0] + dense[1] + dense[2] + dense[3]; }
  void Rates(const bool present[], std::optional<double> (&rate)[kLayerTypeCount],
             double* end_to_end) const {
    for (int t = 0; t < kLayerTypeCount; ++t) {
      rate[t] = (present[t] && wire[t] > 0)
                    ? std::optional<double>(static_cast<double>(dense[t]) / wire[t])
                    : std::nullopt;
    }
    *end_to_end = WireAll() ? static_cast<double>(DenseAll()) / WireAll() : 0.0;
  }
  void SelectedPerBin(std::optional<double> (&out)[kLayerTypeCount]) const {
    for (int t = 0; t < kLayerTypeCount; ++t) {
      out[t] = bins[t] ? std::optional<double>(static_cast<double>(selected[t]) / bins[t])
                       : std::nullopt;
    }
  }
};

inline std::vector<uint8_t> TotalsBytes(const Totals& t) {
  ByteWriter w;
  for (int k = 0; k < kLayerTypeCount; ++k) {
    w.Put(t.wire[k]);
    w.Put(t.dense[k]);
    w.Put(t.selected[k]);
    w.Put(t.bins[k]);
  }
  return std::move(w.bytes);
}

inline Status ReadTotals(std::span<const uint8_t> b, const std::string& what, Totals* t) {
  ByteReader r(b, what);
  for (int k = 0; k < kLayerTypeCount; ++k) {
    ADACOMP_RETURN_IF_ERROR(r.Get(&t->wire[k]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&t->dense[k]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&t->selected[k]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&t->bins[k]));
  }
  return Status::OK();
}

}  // namespace adacomp::train
