#include "codegen/target.h"
