// tools/adacomp/train_report.h: what `adacomp train` prints of a run: the
// number formats of its progress lines and the summary table at the end.
#pragma once

#include <optional>
#include <string>

#include "adacomp/trainer.h"

namespace adacomp::tool {

std::string Fmt(double v, const char* f = "%.4g");
std::string Bytes(double b);  // "1.23 MB" (decimal units), "850 B"
std::string RateText(const std::optional<double>& r);
std::string Duration(double s);  // "45s", "3m05s", "1h02m"
std::string RatesLine(const std::optional<double> (&rate)[kLayerTypeCount], double e2e);

// The summary table (rank 0, after a run).
void PrintTrainSummary(const TrainSummary& s);

}  // namespace adacomp::tool
