#include "adacomp/trainer.h"

#include <gtest/gtest.h>

TEST(Trainer, ModelNames) { EXPECT_EQ(adacomp::ModelNames().size(), 4u); }
