// Must not compile (tests/CMakeLists.txt, layering_*): the execution kernels reaching
// up into the solvers' private headers.
#include "kernels/stack_blas.h"  // its own layer: found
#include "linalg/solvers.h"      // a layer above: not on kernels' include path
