#pragma once

// Multi-rank tests run on Gloo groups, which dash cannot make where LibTorch came
// without Gloo's headers (PyTorch's pip wheels): there they skip, saying why.

#include <dash/distributed.h>

#include <gtest/gtest.h>

#define DASH_SKIP_WITHOUT_GLOO() \
  if (!::dash::gloo_available()) \
  GTEST_SKIP() << "this dash was built against a LibTorch without Gloo headers (dash::gloo_available() is false)"
