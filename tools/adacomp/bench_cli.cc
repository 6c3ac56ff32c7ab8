// `adacomp bench`'s options and help text (the command: bench_command.cc).
#include <memory>
#include <string>
#include <vector>

#include "bench_command.h"
#include "bench_exchange_bytes.h"
#include "cli_util.h"
#include "commands.h"
#include "gradient_gen.h"

namespace adacomp::tool {

std::vector<Command> AddBenchCommands(CLI::App& root) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* app = root.add_subcommand(
      "bench", "Time AdaComp and its baselines against the R += dW pass, verified first");
  app->add_option(
      "--sizes", args->sizes,
      "tensor sizes in elements, comma-separated (default 1e4,1e5,1e6,4e6,1.6e7,6.4e7)");
  app->add_option("--max-elements", args->max_elements,
                  "skip sizes above this (default 1.6e7; use 6.4e7 for the full run)");
  app->add_option("--bin-sizes", args->bin_sizes, "AdaComp L_T values (default 50,500)");
  app->add_option("--threads", args->threads, "thread counts (default 1,2)");
  app->add_option("--frames", args->frames,
                  "P, frames decoded and accumulated into one buffer (default 1,4,16)");
  app->add_option("--ops", args->ops,
                  "what to time besides the reference pass: all (default) or a list of adacomp, "
                  "decode, onebit, topk, topk_nth, topk_torch");
  app->add_option("--repeats", args->repeats,
                  "repeats per measurement; the median is kept (default 5)");
  app->add_option("--min-time", args->min_time,
                  "seconds per repeat at least; short operations are looped (default 0.05)");
  app->add_option("--seed", args->seed, "data seed (default 1)")->check(NotNegative());
  app->add_option("--json", args->json, "also write the rows as JSON to this file");
  app->footer(
      std::string(
          "For each size and thread count T the tensor is made of T parts (one seed and layer\n"
          "scale each). AdaComp rows spread the whole tensor over T threads inside the library\n"
          "(CodecConfig::threads, DecodeOptions::threads: one compressor, one frame per\n"
          "learner); the reference pass and the baselines run one part per thread, all at once.\n"
          "Rows (op codec):\n"
          "  reference none          R += dW over the same elements: the memory-bound floor\n"
          "  compress adacomp        AdaComp (ternary) to finished frame bytes, per L_T\n"
          "  compress_marked adacomp the same after Mark(), kept after (the DDP hook's\n"
          "                          step: no check pass, the new residue in a second buffer)\n"
          "  decode_accumulate adacomp  validate and add P frames (P learners) into one buffer\n"
          "                          (one DecodeAccumulateAll call)\n"
          "  compress topk_nth_element  residual top-k, std::nth_element on |G|, at the\n"
          "                          density AdaComp chose on the same data (per L_T)\n"
          "  compress topk_torch     the same with torch::topk (LibTorch builds only)\n"
          "  compress topk           the library's topk codec to frames, same density\n"
          "  compress onebit         the library's onebit codec\n"
          "Every operation is verified before it is timed: AdaComp against a scalar\n"
          "reference of docs/algorithm.md section 2 (selection, signs, scale) and conservation\n"
          "(sent + new residue = old residue + gradient); every frame decodes; the\n"
          "accumulated sum equals the scalar sum of the decoded frames; top-k sends exactly\n"
          "k elements and keeps none larger. seconds = median over repeats of one operation;\n"
          "x_ref = ratio_to_reference = median over repeats of (operation time / time of the\n"
          "reference pass on the same tensors, measured just before it in the same repeat),\n"
          "so that changes of machine load between rows cancel out; beside compress adacomp the\n"
          "reference pass, like compress, takes a new gradient each call (steps 1, 2, 3, 1, ...).\n"
          "decode_accumulate rows, and the reference pass paired with them, are timed call by\n"
          "call from cold caches (256 MiB of other data are read, untimed, before each call,\n"
          "as a training step's other work runs between two decodes of one tensor).\n"
          "JSON (--json): {\"rows\": [{op, codec, elements, bin_size, threads, frames, seconds,\n"
          "elements_per_second, ratio_to_reference, density, frame_bytes}], ...}.\n") +
      kGradientModelHelp +
      "\nEach thread's tensor has its own seed and a log-normal layer scale (sigma 1).\n"
      "AdaComp is verified on generator step 0 (twice), warmed up on steps 1-3, then timed\n"
      "on steps 1, 2, 3, 1, ... (a new gradient each call, residue carried, as in training);\n"
      "its density (which top-k also uses) is that of the last warm-up step. Each decoded\n"
      "frame is a learner's frame after the same warm-up (steps 0, 0, 1, 2, 3 of its\n"
      "gradients, rotated per learner; learner 0's not rotated): steady-state frames, not\n"
      "the denser early ones. decode_accumulate density = selected / (elements x P); with\n"
      "P = 1 it equals the compress row's.\n"
      "Exit status: 0 success; 1 a verification or I/O failure; 2 bad usage.");
  auto bytes_args = std::make_shared<ExchangeBytesArgs>();
  CLI::App* bytes = app->add_subcommand(
      "exchange-bytes",
      "Count exactly what each learner sends and receives in one step by every exchange "
      "(all-gather, reduce-scatter, auto, the rings), P = 2 .. 1024, without P processes");
  AddExchangeBytesOptions(bytes, bytes_args.get());
  return {{app, [args, bytes, bytes_args] {
             return bytes->parsed() ? RunExchangeBytes(*bytes_args) : RunBench(*args);
           }}};
}

}  // namespace adacomp::tool
