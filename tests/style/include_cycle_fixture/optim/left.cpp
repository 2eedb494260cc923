#include "optim/left.h"
#include "optim/right.h"
