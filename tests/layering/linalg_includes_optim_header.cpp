// Must not compile (tests/CMakeLists.txt, layering_*): the solver layer reaching up
// into the optimizer's private headers.
#include "linalg/solvers.h"  // its own layer: found
#include "optim/engine.h"    // a layer above: not on linalg's include path
