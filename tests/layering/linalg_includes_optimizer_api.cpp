// Must not compile (tests/CMakeLists.txt, layering_*): the solver layer including the
// optimizer's public API, which refuses it with an #error.
#include <dash/inverse_root.h>  // its own public API: fine
#include <dash/optimizer.h>     // the optim layer's: refused
