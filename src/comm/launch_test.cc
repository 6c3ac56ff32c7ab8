// Tests for LaunchedUnderMpi(): it follows the launchers' environment variables.
#include <gtest/gtest.h>

#include <cstdlib>

#include "adacomp/mpi_communicator.h"

namespace adacomp {
namespace {

const char* const kVars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                             "MV2_COMM_WORLD_SIZE"};

TEST(LaunchedUnderMpi, FollowsTheLauncherVariables) {
  for (const char* v : kVars) unsetenv(v);
  EXPECT_FALSE(LaunchedUnderMpi());
  for (const char* v : kVars) {
    setenv(v, "4", 1);
    EXPECT_TRUE(LaunchedUnderMpi()) << v;
    setenv(v, "", 1);
    EXPECT_FALSE(LaunchedUnderMpi()) << v << " set but empty";
    unsetenv(v);
  }
}

}  // namespace
}  // namespace adacomp
