// The codec subcommands of the `adacomp` program: compress, decompress,
// inspect, and gen-gradient (test input). See AddCodecCommands at the end.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/version.h"
#include "cli_util.h"
#include "commands.h"
#include "file_io.h"
#include "gradient_gen.h"

namespace adacomp::tool {
namespace {

constexpr char kExitStatusHelp[] =
    "Exit status: 0 success; 1 bad, unreadable or unwritable data (the one-line message\n"
    "names the file, step or frame, and byte offset); 2 bad usage (options, arguments).\n";

// 32 bits x elements / bits sent.
double Rate(uint64_t elements, uint64_t bytes) {
  return bytes ? 32.0 * static_cast<double>(elements) / (8.0 * static_cast<double>(bytes)) : 0.0;
}

std::string Offset(uint64_t v) { return std::to_string(v); }

// ------------------------------------------------------------------ compress

struct CompressArgs {
  std::string codec = "adacomp";
  std::string elements;
  uint32_t bin_size = CodecConfig{}.bin_size;
  std::string values = "ternary";
  double density = CodecConfig{}.density;
  float tau = CodecConfig{}.tau;
  uint64_t seed = 0;
  uint32_t tensor_id = 0;
  std::string input;
  std::string output;
  std::string residue_out;
  bool quiet = false;
  CLI::Option* bin_size_opt = nullptr;
  CLI::Option* values_opt = nullptr;
  CLI::Option* density_opt = nullptr;
  CLI::Option* tau_opt = nullptr;
  CLI::Option* seed_opt = nullptr;
};

int RunCompress(const CompressArgs& a) {
  constexpr const char* kCmd = "compress";
  // ---- options
  Result<Codec> codec = ParseCodec(a.codec);
  if (!codec.ok()) {
    return Fail(kCmd, kExitBadUsage,
                "--codec: unknown codec '" + a.codec +
                    "' (expected dense, adacomp, topk, threshold, onebit or terngrad)");
  }
  Result<uint64_t> elements = ParseCount(a.elements, "--elements");
  if (!elements.ok()) return Fail(kCmd, kExitBadUsage, elements.status().message());
  const uint64_t n = *elements;
  if (n == 0) return Fail(kCmd, kExitBadUsage, "--elements: must be at least 1");
  struct CodecOnly {
    CLI::Option* opt;
    const char* name;
    Codec codec;
  };
  for (const CodecOnly& c : {CodecOnly{a.bin_size_opt, "--bin-size", Codec::kAdaComp},
                             CodecOnly{a.values_opt, "--values", Codec::kAdaComp},
                             CodecOnly{a.density_opt, "--density", Codec::kTopK},
                             CodecOnly{a.tau_opt, "--tau", Codec::kThreshold},
                             CodecOnly{a.seed_opt, "--seed", Codec::kTernGrad}}) {
    if (c.opt != nullptr && c.opt->count() > 0 && *codec != c.codec) {
      return Fail(
          kCmd, kExitBadUsage,
          std::string(c.name) + " applies only to --codec " + std::string(CodecName(c.codec)));
    }
  }
  CodecConfig config;
  config.codec = *codec;
  config.bin_size = a.bin_size;
  Result<ValueMode> values = ParseValueMode(a.values);
  if (!values.ok()) {
    return Fail(kCmd, kExitBadUsage,
                "--values: unknown value mode '" + a.values + "' (expected ternary, fp16 or fp32)");
  }
  config.values = *values;
  config.density = a.density;
  config.tau = a.tau;
  config.seed = a.seed;
  if (Status s = config.Validate(); !s.ok()) return Fail(kCmd, kExitBadUsage, s.message());

  const bool has_residue = *codec != Codec::kDense && *codec != Codec::kTernGrad;
  if (!a.residue_out.empty() && !has_residue) {
    return Fail(kCmd, kExitBadUsage,
                "--residue-out: codec " + std::string(CodecName(*codec)) + " keeps no residue");
  }

  // ---- input
  Result<std::unique_ptr<InputFile>> in = InputFile::Open(a.input);
  if (!in.ok()) return Fail(kCmd, kExitBadData, in.status().message());
  const uint64_t step_bytes = 4 * n;
  const uint64_t size = (*in)->size();
  if (size == 0) return Fail(kCmd, kExitBadData, a.input + ": empty file (no step to compress)");
  if (size % step_bytes != 0) {
    return Fail(kCmd, kExitBadData,
                a.input + ": size " + std::to_string(size) + " bytes is not a multiple of 4 x " +
                    std::to_string(n) + " = " + std::to_string(step_bytes) +
                    " bytes (one step of " + std::to_string(n) + " float32 elements); " +
                    std::to_string(size / step_bytes) + " whole steps and " +
                    std::to_string(size % step_bytes) + " bytes left over");
  }
  const uint64_t steps = size / step_bytes;

  // Created only now: its residue takes 4N bytes, and N has been checked
  // against the input's size.
  Result<std::unique_ptr<Compressor>> made = Compressor::Create(config, a.tensor_id, n);
  if (!made.ok()) return Fail(kCmd, kExitBadUsage, made.status().ToString());
  Compressor& compressor = **made;
  if (compressor.residue().empty() == has_residue) {
    return Fail(kCmd, kExitBadData, "internal: codec residue does not match the expectation");
  }

  Result<std::unique_ptr<OutputFile>> out = OutputFile::Create(a.output);
  if (!out.ok()) return Fail(kCmd, kExitBadData, out.status().message());
  std::unique_ptr<OutputFile> residue_file;
  if (!a.residue_out.empty()) {
    Result<std::unique_ptr<OutputFile>> r = OutputFile::Create(a.residue_out);
    if (!r.ok()) return Fail(kCmd, kExitBadData, r.status().message());
    residue_file = std::move(*r);
  }

  std::printf("adacomp compress: codec %s", std::string(CodecName(*codec)).c_str());
  if (*codec == Codec::kAdaComp) {
    std::printf(", bin size %u, values %s", config.bin_size,
                std::string(ValueModeName(config.values)).c_str());
  } else if (*codec == Codec::kTopK) {
    std::printf(", density %s", FormatDouble(config.density).c_str());
  } else if (*codec == Codec::kThreshold) {
    std::printf(", tau %s", FormatDouble(config.tau).c_str());
  } else if (*codec == Codec::kTernGrad) {
    std::printf(", seed %" PRIu64, config.seed);
  }
  std::printf("; tensor %u, %" PRIu64 " elements x %" PRIu64 " steps; %s -> %s\n", a.tensor_id, n,
              steps, a.input.c_str(), a.output.c_str());
  const bool is_adacomp = *codec == Codec::kAdaComp;
  if (!a.quiet) {
    std::printf("%6s %12s %12s %9s %10s %10s\n", "step", "frame_bytes", "selected", "sel/bin",
                "rate", "bits/sent");
  }

  // ---- the steps
  std::vector<float> grad(n);
  std::vector<uint8_t> frame;
  CompressStats total;
  uint64_t total_bytes = 0;
  for (uint64_t k = 0; k < steps; ++k) {
    if (Status s = (*in)->ReadFloats(grad); !s.ok()) return Fail(kCmd, kExitBadData, s.message());
    if (std::optional<size_t> bad = FindNonFinite(grad)) {
      return Fail(kCmd, kExitBadData,
                  a.input + ": step " + std::to_string(k) + ", element " + std::to_string(*bad) +
                      " (byte offset " + Offset(k * step_bytes + 4 * *bad) + "): value " +
                      FormatDouble(grad[*bad]) + " is not finite");
    }
    frame.clear();
    CompressStats stats;
    if (Status s = compressor.Compress(grad, &frame, &stats); !s.ok()) {
      return Fail(kCmd, kExitBadData,
                  a.input + ": step " + std::to_string(k) + ": " + s.ToString());
    }
    if (Status s = (*out)->Write(frame.data(), frame.size()); !s.ok()) {
      return Fail(kCmd, kExitBadData, s.message());
    }
    const uint64_t bytes = frame.size();
    stats.frame_bytes = bytes;  // the real bytes, whatever the stats say
    total.Merge(stats);
    total_bytes += bytes;
    if (!a.quiet) {
      std::string per_bin = is_adacomp && stats.bins
                                ? FormatDouble(static_cast<double>(stats.selected) / stats.bins, 4)
                                : std::string("-");
      std::string bits =
          stats.selected ? FormatDouble(8.0 * bytes / stats.selected, 4) : std::string("-");
      std::printf("%6" PRIu64 " %12" PRIu64 " %12" PRIu64 " %9s %10.2f %10s\n", k, bytes,
                  stats.selected, per_bin.c_str(), Rate(n, bytes), bits.c_str());
    }
  }
  if (residue_file) {
    if (Status s = residue_file->WriteFloats(compressor.residue()); !s.ok()) {
      return Fail(kCmd, kExitBadData, s.message());
    }
  }
  if (Status s = (*out)->Commit(); !s.ok()) return Fail(kCmd, kExitBadData, s.message());
  if (residue_file) {
    if (Status s = residue_file->Commit(); !s.ok()) return Fail(kCmd, kExitBadData, s.message());
  }

  const uint64_t all = n * steps;
  std::printf("total: %" PRIu64 " steps x %" PRIu64 " elements, %" PRIu64 " frame bytes, %" PRIu64
              " selected (%.4f%%)\n",
              steps, n, total_bytes, total.selected, 100.0 * total.selected / all);
  std::printf("compression rate: %.2f (32 x %" PRIu64 " elements / %" PRIu64 " bits sent)\n",
              Rate(all, total_bytes), all, 8 * total_bytes);
  if (total.selected) {
    std::printf("bits per sent element: %.3f (8 x frame bytes / selected)\n",
                8.0 * total_bytes / total.selected);
  }
  if (is_adacomp) {
    std::printf("mean selected per bin: %.4f (%" PRIu64 " bins of %u over %" PRIu64 " steps)\n",
                total.bins ? static_cast<double>(total.selected) / total.bins : 0.0, total.bins,
                config.bin_size, steps);
    std::printf("bins by selected count:");
    for (size_t i = 0; i < total.bin_histogram.size(); ++i) {
      std::printf(" %zu%s:%" PRIu64, i, i + 1 == total.bin_histogram.size() ? "+" : "",
                  total.bin_histogram[i]);
    }
    std::printf("\n");
  }
  std::printf("wrote %s (%" PRIu64 " frames, %" PRIu64 " bytes)", a.output.c_str(), steps,
              total_bytes);
  if (residue_file) {
    std::printf(" and residue %s (%" PRIu64 " float32)", a.residue_out.c_str(), n);
  }
  std::printf("\n");
  return kExitOk;
}

// ------------------------------------------------- decompress and inspect

struct FramesArgs {
  std::string input;
  std::string output;
  std::string max_elements = "2147483648";
  std::string max_frame_bytes = "2147483648";
};

// Parses the limits shared by decompress and inspect.
Status ParseDecodeOptions(const FramesArgs& a, DecodeOptions* options) {
  ADACOMP_ASSIGN_OR_RETURN(options->max_elements, ParseCount(a.max_elements, "--max-elements"));
  ADACOMP_ASSIGN_OR_RETURN(options->max_frame_bytes,
                           ParseCount(a.max_frame_bytes, "--max-frame-bytes"));
  return Status::OK();
}

// Registers the limits shared by decompress and inspect.
void AddFrameLimitOptions(CLI::App* app, FramesArgs* args) {
  app->add_option("--max-elements", args->max_elements,
                  "reject frames with more elements (default 2^31)");
  app->add_option("--max-frame-bytes", args->max_frame_bytes,
                  "reject larger frames (default 2^31)");
}

std::string FrameWhere(const std::string& path, uint64_t index, uint64_t offset) {
  return path + ": frame " + std::to_string(index) + " at byte offset " + std::to_string(offset);
}

int RunDecompress(const FramesArgs& a) {
  constexpr const char* kCmd = "decompress";
  DecodeOptions options;
  if (Status s = ParseDecodeOptions(a, &options); !s.ok()) {
    return Fail(kCmd, kExitBadUsage, s.message());
  }
  Result<std::unique_ptr<MappedFile>> in = MappedFile::Open(a.input);
  if (!in.ok()) return Fail(kCmd, kExitBadData, in.status().message());
  std::span<const uint8_t> bytes = (*in)->bytes();
  if (bytes.empty()) return Fail(kCmd, kExitBadData, a.input + ": empty file (no frame)");
  Result<std::unique_ptr<OutputFile>> out = OutputFile::Create(a.output);
  if (!out.ok()) return Fail(kCmd, kExitBadData, out.status().message());

  std::vector<float> dense;
  uint64_t offset = 0;
  uint64_t frames = 0;
  uint64_t elements_total = 0;
  uint64_t min_elements = UINT64_MAX;
  uint64_t max_elements = 0;
  while (offset < bytes.size()) {
    std::span<const uint8_t> rest = bytes.subspan(offset);
    FrameInfo info;
    if (Status s = InspectFrame(rest, &info, options); !s.ok()) {
      return Fail(kCmd, kExitBadData, FrameWhere(a.input, frames, offset) + ": " + s.ToString());
    }
    if (info.frame_bytes == 0 || info.frame_bytes > rest.size()) {
      return Fail(kCmd, kExitBadData,
                  FrameWhere(a.input, frames, offset) + ": frame length " +
                      std::to_string(info.frame_bytes) + " does not fit the " +
                      std::to_string(rest.size()) + " bytes left");
    }
    dense.assign(info.elements, 0.0f);
    if (Status s = DecodeAccumulate(rest.subspan(0, info.frame_bytes), dense, nullptr, options);
        !s.ok()) {
      return Fail(kCmd, kExitBadData, FrameWhere(a.input, frames, offset) + ": " + s.ToString());
    }
    if (Status s = (*out)->WriteFloats(dense); !s.ok()) {
      return Fail(kCmd, kExitBadData, s.message());
    }
    elements_total += info.elements;
    min_elements = std::min(min_elements, info.elements);
    max_elements = std::max(max_elements, info.elements);
    offset += info.frame_bytes;
    ++frames;
  }
  if (Status s = (*out)->Commit(); !s.ok()) return Fail(kCmd, kExitBadData, s.message());
  std::string each = min_elements == max_elements ? std::to_string(min_elements) + " elements each"
                                                  : std::to_string(min_elements) + " to " +
                                                        std::to_string(max_elements) + " elements";
  std::printf("decompressed %" PRIu64 " frames (%s, %" PRIu64 " float32 in all) from %s to %s\n",
              frames, each.c_str(), elements_total, a.input.c_str(), a.output.c_str());
  return kExitOk;
}

int RunInspect(const FramesArgs& a) {
  constexpr const char* kCmd = "inspect";
  DecodeOptions options;
  if (Status s = ParseDecodeOptions(a, &options); !s.ok()) {
    return Fail(kCmd, kExitBadUsage, s.message());
  }
  Result<std::unique_ptr<MappedFile>> in = MappedFile::Open(a.input);
  if (!in.ok()) return Fail(kCmd, kExitBadData, in.status().message());
  std::span<const uint8_t> bytes = (*in)->bytes();
  if (bytes.empty()) return Fail(kCmd, kExitBadData, a.input + ": empty file (no frame)");

  uint64_t offset = 0;
  uint64_t frames = 0;
  uint64_t elements_total = 0;
  uint64_t selected_total = 0;
  while (offset < bytes.size()) {
    std::span<const uint8_t> rest = bytes.subspan(offset);
    FrameInfo info;
    if (Status s = InspectFrame(rest, &info, options); !s.ok()) {
      std::fflush(stdout);
      return Fail(kCmd, kExitBadData, FrameWhere(a.input, frames, offset) + ": " + s.ToString());
    }
    if (info.frame_bytes == 0 || info.frame_bytes > rest.size()) {
      std::fflush(stdout);
      return Fail(kCmd, kExitBadData,
                  FrameWhere(a.input, frames, offset) + ": frame length " +
                      std::to_string(info.frame_bytes) + " does not fit the " +
                      std::to_string(rest.size()) + " bytes left");
    }
    std::printf("frame %" PRIu64 " offset %" PRIu64 " bytes %" PRIu64
                " version %u codec %s tensor %u elements %" PRIu64 " selected %" PRIu64,
                frames, offset, info.frame_bytes, static_cast<unsigned>(info.version),
                std::string(CodecName(info.codec)).c_str(), info.tensor_id, info.elements,
                info.selected);
    switch (info.codec) {
      case Codec::kAdaComp:
        std::printf(" bin_size %u values %s", info.bin_size,
                    std::string(ValueModeName(info.values)).c_str());
        if (info.values == ValueMode::kTernary) std::printf(" scale %.9g", info.scale);
        break;
      case Codec::kThreshold:
        std::printf(" tau %.9g", info.scale);
        break;
      case Codec::kTernGrad:
        std::printf(" s %.9g", info.scale);
        break;
      case Codec::kOneBit:
        std::printf(" mean_pos %.9g mean_neg %.9g", info.scale, info.scale2);
        break;
      default:
        break;
    }
    std::printf(" params %" PRIu64 " payload %" PRIu64 " crc32c 0x%08x rate %.2f\n",
                info.params_bytes, info.payload_bytes, info.crc32c,
                Rate(info.elements, info.frame_bytes));
    elements_total += info.elements;
    selected_total += info.selected;
    offset += info.frame_bytes;
    ++frames;
  }
  std::printf("total: %" PRIu64 " frames, %" PRIu64 " bytes, %" PRIu64 " elements, %" PRIu64
              " selected, compression rate %.2f\n",
              frames, offset, elements_total, selected_total, Rate(elements_total, offset));
  return kExitOk;
}

// -------------------------------------------------------------- gen-gradient

struct GenArgs {
  std::string elements;
  std::string steps = "1";
  uint64_t seed = 1;
  double scale = 1e-3;
  std::string output;
};

int RunGenGradient(const GenArgs& a) {
  constexpr const char* kCmd = "gen-gradient";
  Result<uint64_t> n = ParseCount(a.elements, "--elements");
  if (!n.ok()) return Fail(kCmd, kExitBadUsage, n.status().message());
  Result<uint64_t> steps = ParseCount(a.steps, "--steps");
  if (!steps.ok()) return Fail(kCmd, kExitBadUsage, steps.status().message());
  if (*n == 0) return Fail(kCmd, kExitBadUsage, "--elements: must be at least 1");
  if (*steps == 0) return Fail(kCmd, kExitBadUsage, "--steps: must be at least 1");
  if (!(a.scale > 0) || !std::isfinite(a.scale)) {
    return Fail(kCmd, kExitBadUsage, "--scale: must be positive and finite");
  }
  Result<std::unique_ptr<OutputFile>> out = OutputFile::Create(a.output);
  if (!out.ok()) return Fail(kCmd, kExitBadData, out.status().message());
  GradientSpec spec;
  spec.elements = *n;
  spec.seed = a.seed;
  spec.scale = a.scale;
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  std::vector<float> buf(std::min<uint64_t>(kChunk, *n));
  for (uint64_t k = 0; k < *steps; ++k) {
    for (uint64_t begin = 0; begin < *n; begin += kChunk) {
      std::span<float> part(buf.data(), std::min<uint64_t>(kChunk, *n - begin));
      GenerateGradientRange(spec, k, begin, part);
      if (Status s = (*out)->WriteFloats(part); !s.ok()) {
        return Fail(kCmd, kExitBadData, s.message());
      }
    }
  }
  if (Status s = (*out)->Commit(); !s.ok()) return Fail(kCmd, kExitBadData, s.message());
  std::printf("wrote %s: %" PRIu64 " steps x %" PRIu64 " float32 elements (%" PRIu64
              " bytes), seed %" PRIu64 ", scale %s\n",
              a.output.c_str(), *steps, *n, (*out)->bytes_written(), a.seed,
              FormatDouble(a.scale).c_str());
  return kExitOk;
}

}  // namespace

std::vector<Command> AddCodecCommands(CLI::App& root) {
  std::vector<Command> commands;

  // compress
  {
    auto args = std::make_shared<CompressArgs>();
    CLI::App* app = root.add_subcommand(
        "compress", "Compress K successive gradient steps of one tensor into K frames");
    app->add_option("--codec", args->codec,
                    "dense | adacomp | topk | threshold | onebit | terngrad (default adacomp)");
    app->add_option("--elements", args->elements,
                    "N, float32 elements per step (digits or e.g. 1e6)")
        ->required();
    args->bin_size_opt =
        app->add_option("--bin-size", args->bin_size, "adacomp: bin size L_T (default 500)");
    args->values_opt =
        app->add_option("--values", args->values, "adacomp: ternary (default) | fp16 | fp32");
    args->density_opt = app->add_option(
        "--density", args->density, "topk: fraction of elements sent, 0 < D <= 1 (default 0.01)");
    args->tau_opt = app->add_option("--tau", args->tau,
                                    "threshold: send +-tau where |G| >= tau (default 1e-3)");
    args->seed_opt = app->add_option("--seed", args->seed, "terngrad: generator seed (default 0)")
                         ->check(NotNegative());
    app->add_option("--tensor-id", args->tensor_id, "tensor id written in each frame (default 0)");
    app->add_option("--residue-out", args->residue_out,
                    "write the residue after the last step here (N float32)");
    app->add_flag("--quiet,-q", args->quiet, "no per-step lines, only the totals");
    app->add_option("input", args->input, "IN.f32: K x N little-endian float32 (K = size / 4N)")
        ->required();
    app->add_option("output", args->output, "OUT.frames: the K frames, back to back")->required();
    app->footer(
        "IN.f32 holds K consecutive gradients of one tensor; they are compressed as K\n"
        "successive steps with the residue carried from step to step. Per step it prints\n"
        "the frame bytes, the selected elements, the mean selected per bin (adacomp), the\n"
        "compression rate (32 x N / bits of the frame, header and checksum included) and\n"
        "the bits per sent element (8 x frame bytes / selected); then the totals.\n"
        "Outputs are written to a temporary file and renamed only on success.\n"
        "Example: adacomp gen-gradient --elements 1e6 --steps 5 g.f32 &&\n"
        "         adacomp compress --codec adacomp --elements 1e6 --bin-size 500 g.f32 g.frames\n" +
        std::string(kExitStatusHelp));
    commands.push_back({app, [args] { return RunCompress(*args); }});
  }

  // decompress
  {
    auto args = std::make_shared<FramesArgs>();
    CLI::App* app = root.add_subcommand(
        "decompress", "Decode each frame into a dense float32 vector (what the frame carries)");
    app->add_option("input", args->input, "IN.frames: frames back to back")->required();
    app->add_option("output", args->output, "OUT.f32: one dense float32 vector per frame")
        ->required();
    AddFrameLimitOptions(app, args.get());
    app->footer(
        "Each frame is validated completely (checksum, header, payload, indices) and added\n"
        "into a zeroed vector of its element count, which is written as little-endian float32.\n" +
        std::string(kExitStatusHelp));
    commands.push_back({app, [args] { return RunDecompress(*args); }});
  }

  // inspect
  {
    auto args = std::make_shared<FramesArgs>();
    CLI::App* app =
        root.add_subcommand("inspect", "Print each frame's header fields, one line per frame");
    app->add_option("input", args->input, "IN.frames: frames back to back")->required();
    AddFrameLimitOptions(app, args.get());
    app->footer(
        "One line per frame: index, byte offset, frame bytes, format version, codec, tensor id,\n"
        "elements, selected, the codec's parameters (adacomp: bin_size, values, scale;\n"
        "threshold: tau; terngrad: s; onebit: mean_pos, mean_neg), parameter and payload\n"
        "bytes, CRC32C and compression rate; then a total line.\n" +
        std::string(kExitStatusHelp));
    commands.push_back({app, [args] { return RunInspect(*args); }});
  }

  // gen-gradient
  {
    auto args = std::make_shared<GenArgs>();
    CLI::App* app = root.add_subcommand(
        "gen-gradient", "Write K steps of synthetic gradient-like float32 data (test input)");
    app->add_option("--elements", args->elements, "N, elements per step (digits or e.g. 1e6)")
        ->required();
    app->add_option("--steps", args->steps, "K, steps (default 1)");
    app->add_option("--seed", args->seed, "seed; each seed is a different tensor (default 1)")
        ->check(NotNegative());
    app->add_option("--scale", args->scale, "overall magnitude (default 1e-3)");
    app->add_option("output", args->output, "OUT.f32: K x N little-endian float32")->required();
    app->footer(std::string(kGradientModelHelp) + "\n" + kExitStatusHelp);
    commands.push_back({app, [args] { return RunGenGradient(*args); }});
  }
  return commands;
}

}  // namespace adacomp::tool
