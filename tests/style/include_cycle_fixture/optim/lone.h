#pragma once
#include "optim/left.h"
