#pragma once

// Umbrella header of dash, the DASH optimizer library (batched block Shampoo).

#include <dash/inverse_root.h>
#include <dash/option_names.h>
#include <dash/optimizer.h>
#include <dash/root_method_choice.h>
#include <dash/solver_cost.h>
