#pragma once

// Every option name of dash in one include: to_string() and parse_*() of the solver
// enums (<dash/inverse_root.h>), the optimizer enums (<dash/optimizer.h>) and
// CommunicationDtype (<dash/distributed.h>), each declared next to its enums.

#include <dash/distributed.h>
#include <dash/inverse_root.h>
#include <dash/optimizer.h>
