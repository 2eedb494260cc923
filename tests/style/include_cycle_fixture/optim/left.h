// A fixture for scripts/include_cycles.py: left.cpp includes right.h, which
// includes left.h back, a cycle; lone.h includes left.h only, no cycle.
#pragma once
