// `adacomp bench exchange-bytes` (see bench_exchange_bytes.h).
#include "bench_exchange_bytes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "cli_util.h"
#include "exchange/byte_simulation.h"
#include "gradient_gen.h"

namespace adacomp::tool {
namespace {

constexpr const char* kCmd = "bench exchange-bytes";
constexpr size_t kPool = 8;

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct Mean {
  double sent = 0, received = 0, most_received = 0;
};

Mean Average(const std::vector<exchange_internal::LearnerBytes>& v) {
  Mean m;
  for (const auto& b : v) {
    m.sent += static_cast<double>(b.sent) / static_cast<double>(v.size());
    m.received += static_cast<double>(b.received) / static_cast<double>(v.size());
    m.most_received = std::max(m.most_received, static_cast<double>(b.received));
  }
  return m;
}

std::string Json(const char* name, const Mean& m) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "\"%s\": {\"sent\": %.1f, \"received\": %.1f, \"most_received\": %.0f}", name,
                m.sent, m.received, m.most_received);
  return buf;
}

}  // namespace

void AddExchangeBytesOptions(CLI::App* sub, ExchangeBytesArgs* a) {
  sub->add_option("--elements", a->elements, "tensor sizes, comma-separated")
      ->capture_default_str();
  sub->add_option("--learners", a->learners, "group sizes P, comma-separated")
      ->capture_default_str();
  sub->add_option("--bin-size", a->bin_size, "AdaComp L_T")->capture_default_str();
  sub->add_option("--own-scale", a->own_scale,
                  "learner r's gradient = shared + own-scale x its own (both from the generator "
                  "below): 0 = identical gradients, large = nearly independent")
      ->capture_default_str();
  sub->add_option("--summed-values", a->summed_values,
                  "the reduce-scatter's averaged slices: fp32 (exact) or fp16 (ExchangeOptions)")
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "data seed")->capture_default_str();
  sub->add_option("--json", a->json, "also write the rows as JSON to this file");
  sub->footer(
      "One step of one tensor, AdaComp (ternary, this L_T), each learner's compressor fresh\n"
      "(zero residue) and seeded by its rank. Learner r's gradient: a shared generated tensor\n"
      "plus own-scale x its own part, one of 8 generated tensors (r mod 8) rotated by a\n"
      "pseudo-random whole number of 256-element units for r >= 8. Every learner's frame is made, "
      "cut into the\n"
      "reduce-scatter's pieces and added into the sum in rank order, one learner at a time;\n"
      "the owners' averaged slices are encoded as the exchange encodes them. The bytes are\n"
      "what each learner's Communicator::traffic() would count (the finiteness agreement and\n"
      "every collective's 32-byte headers included; TCP/IP framing not), and equal the\n"
      "in-process communicator's counters (adacomp_exchange_test, SimulateStep). auto: the\n"
      "exchange auto would pick with this step's figures as the previous step's. Rings: the\n"
      "float32 and binary16 ring all-reduce of the same tensor.\n"
      "Columns: bytes received per learner per step, the mean over learners.\n");
}

int RunExchangeBytes(const ExchangeBytesArgs& a) {
  auto sizes = ParseCountList(a.elements, "--elements");
  if (!sizes.ok()) return Fail(kCmd, 2, sizes.status().message());
  auto groups = ParseCountList(a.learners, "--learners");
  if (!groups.ok()) return Fail(kCmd, 2, groups.status().message());
  for (uint64_t p : *groups) {
    if (p < 2 || p > 65536) return Fail(kCmd, 2, "--learners: P must be 2 .. 65536");
  }
  if (a.bin_size < 1) return Fail(kCmd, 2, "--bin-size must be at least 1");
  if (!(a.own_scale >= 0)) return Fail(kCmd, 2, "--own-scale must be >= 0");
  if (a.summed_values != "fp32" && a.summed_values != "fp16") {
    return Fail(kCmd, 2, "--summed-values: fp32 or fp16, not '" + a.summed_values + "'");
  }
  const ValueMode summed = a.summed_values == "fp16" ? ValueMode::kFp16 : ValueMode::kFp32;
  std::string rows;
  std::printf("%10s %5s %8s %12s %12s %12s %12s %12s %6s %10s\n", "elements", "P", "rate",
              "allgather", "reduce-sc.", "auto", "ring fp32", "ring fp16", "auto", "seconds");
  for (uint64_t n : *sizes) {
    GradientSpec shared{n, a.seed, 1e-3, 256};
    std::vector<float> base(n), g(n);
    GenerateGradient(shared, 0, base);
    // The learners' own parts: kPool generated tensors, learner r's the
    // (r mod kPool)-th rotated by a pseudo-random whole number of units.
    std::vector<std::vector<float>> pool(kPool, std::vector<float>(n));
    for (size_t j = 0; j < kPool; ++j) {
      GenerateGradient({n, a.seed + 1000003 * (j + 1), 1e-3, 256}, 0, pool[j]);
    }
    for (uint64_t p : *groups) {
      const auto t0 = std::chrono::steady_clock::now();
      exchange_internal::SimulatedStep sim;
      const Status st = exchange_internal::SimulateStep(
          static_cast<int>(p), n,
          [&](int r, std::vector<uint8_t>* frame) -> Status {
            const std::vector<float>& own = pool[static_cast<size_t>(r) % kPool];
            const uint64_t units = std::max<uint64_t>(1, n / 256);
            const uint64_t shift = (r < static_cast<int>(kPool) ? 0 : Mix(r) % units * 256) % n;
            const float s = static_cast<float>(a.own_scale);
            for (uint64_t i = 0, j = shift; i < n; ++i, j = j + 1 == n ? 0 : j + 1) {
              g[i] = base[i] + s * own[j];
            }
            CodecConfig c;
            c.codec = Codec::kAdaComp;
            c.bin_size = a.bin_size;
            c.seed = static_cast<uint64_t>(r) + 1;
            ADACOMP_ASSIGN_OR_RETURN(auto comp, Compressor::Create(c, 0, n));
            return comp->Compress(g, frame);
          },
          &sim, summed);
      if (!st.ok()) return Fail(kCmd, 1, st.ToString());
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const Mean ag = Average(sim.allgather), rs = Average(sim.reduce_scatter),
                 au = Average(sim.auto_exchange), r32 = Average(sim.ring_fp32),
                 r16 = Average(sim.ring_fp16);
      const double rate = 4.0 * static_cast<double>(n) * static_cast<double>(p) /
                          static_cast<double>(sim.frame_bytes);
      std::printf("%10llu %5llu %7.0fx %12.0f %12.0f %12.0f %12.0f %12.0f %6s %10.1f\n",
                  static_cast<unsigned long long>(n), static_cast<unsigned long long>(p), rate,
                  ag.received, rs.received, au.received, r32.received, r16.received,
                  sim.auto_reduce_scatter ? "rs" : "ag", secs);
      std::fflush(stdout);
      char head[400];
      std::snprintf(head, sizeof head,
                    "{\"elements\": %llu, \"learners\": %llu, \"rate\": %.2f, \"frame_bytes\": "
                    "%llu, \"selected\": %llu, \"piece_bytes\": %llu, \"summed_slice_bytes\": "
                    "%llu, \"summed_nonzeros\": %llu, \"auto_picks\": \"%s\", ",
                    static_cast<unsigned long long>(n), static_cast<unsigned long long>(p), rate,
                    static_cast<unsigned long long>(sim.frame_bytes),
                    static_cast<unsigned long long>(sim.selected),
                    static_cast<unsigned long long>(sim.piece_bytes),
                    static_cast<unsigned long long>(sim.summed_slice_bytes),
                    static_cast<unsigned long long>(sim.summed_nonzeros),
                    sim.auto_reduce_scatter ? "reduce-scatter" : "allgather");
      if (!rows.empty()) rows += ",\n  ";
      rows += std::string(head) + Json("allgather", ag) + ", " + Json("reduce_scatter", rs) + ", " +
              Json("auto", au) + ", " + Json("ring_fp32", r32) + ", " + Json("ring_fp16", r16) +
              "}";
      if (!a.json.empty()) {  // rewritten after every row: an interrupted run keeps its rows
        std::ofstream out(a.json + ".tmp");
        char settings[200];
        std::snprintf(settings, sizeof settings,
                      "{\"codec\": \"adacomp\", \"bin_size\": %u, \"own_scale\": %g, \"seed\": "
                      "%llu, \"summed_values\": \"%s\",\n \"rows\": [\n  ",
                      a.bin_size, a.own_scale, static_cast<unsigned long long>(a.seed),
                      a.summed_values.c_str());
        out << settings << rows << "\n]}\n";
        out.close();
        if (!out || std::rename((a.json + ".tmp").c_str(), a.json.c_str()) != 0) {
          return Fail(kCmd, 1, "cannot write " + a.json);
        }
      }
    }
  }
  return 0;
}

}  // namespace adacomp::tool
