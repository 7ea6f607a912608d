#include "importers/torchscript.h"
