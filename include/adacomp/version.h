// adacomp/version.h: the library version and the newest wire-format version
// it writes. Plain constants; thread-safe.
#pragma once

#define ADACOMP_VERSION_MAJOR 0
#define ADACOMP_VERSION_MINOR 1
#define ADACOMP_VERSION_PATCH 0
#define ADACOMP_VERSION_STRING "0.1.0"

namespace adacomp {
inline constexpr const char* kVersion = ADACOMP_VERSION_STRING;
// Frame format version written by this library (docs/wire-format.md).
inline constexpr unsigned kWireFormatVersion = 1;
}  // namespace adacomp
