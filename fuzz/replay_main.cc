// Replay driver: an ordinary main (no libFuzzer) linked with one fuzz target's
// LLVMFuzzerTestOneInput. It runs the target once on every file named on the
// command line or found (recursively, in sorted order) under a named folder.
// A property violation in the target aborts, so ctest reports a failure; the
// name of the input being run is printed first on SIGABRT/SIGSEGV/SIGFPE/SIGBUS.
//
// Usage: fuzz_decode_replay [-v] PATH...   (exit 0 = every input passed)
// A named folder that does not exist is an error; an empty one is allowed
// (regressions/ folders start empty).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

char g_current[4096] = "";

void OnSignal(int sig) {
  const char* msg = "\nreplay: crashed on input: ";
  (void)!write(2, msg, std::strlen(msg));
  (void)!write(2, g_current, std::strlen(g_current));
  (void)!write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool ReadFile(const std::filesystem::path& p, std::vector<uint8_t>* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return !f.bad();
}

}  // namespace

int main(int argc, char** argv) {
  for (int sig : {SIGABRT, SIGSEGV, SIGFPE, SIGBUS, SIGILL}) std::signal(sig, OnSignal);
  bool verbose = false;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-v") == 0) {
      verbose = true;
      continue;
    }
    const std::filesystem::path p(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> found;
      for (const auto& e : std::filesystem::recursive_directory_iterator(p)) {
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') {
          found.push_back(e.path());
        }
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (std::filesystem::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a folder\n", argv[i]);
      return 2;
    }
  }
  size_t bytes = 0;
  std::vector<uint8_t> data;
  for (const auto& p : files) {
    std::snprintf(g_current, sizeof(g_current), "%s", p.c_str());
    if (!ReadFile(p, &data)) {
      std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
      return 2;
    }
    if (verbose) std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), data.size());
    // A copy in a buffer of exactly its size, so that ASan sees reads past it.
    std::vector<uint8_t> exact(data.begin(), data.end());
    LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
    bytes += data.size();
  }
  std::printf("replay: %zu inputs (%zu bytes) passed\n", files.size(), bytes);
  return 0;
}
