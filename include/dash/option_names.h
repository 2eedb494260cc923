#pragma once

// Every option name of dash in one include: to_string() and parse_*() of the solver
// enums (<dash/root_options.h>), the optimizer enums (<dash/optimizer_options.h>) and
// CommunicationDtype and DistributionScheme (<dash/distributed.h>), each declared
// next to its enums.

#include <dash/distributed.h>
#include <dash/optimizer_options.h>
#include <dash/root_options.h>
