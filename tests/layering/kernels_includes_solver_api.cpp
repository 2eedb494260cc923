// Must not compile (tests/CMakeLists.txt, layering_*): the execution kernels reaching
// up into the solvers' public API.
#include "kernels/stack_blas.h"  // its own layer: found
#include <dash/root_options.h>   // the linalg layer's: refused with an #error
