// posenc/posenc.h: the whole public API.
#pragma once

#include "posenc/apply.h"
#include "posenc/config.h"
#include "posenc/cos_sin.h"
#include "posenc/defaults.h"
#include "posenc/error.h"
#include "posenc/frequencies.h"
#include "posenc/ggml.h"
#include "posenc/numerics.h"
#include "posenc/sinusoidal.h"
#include "posenc/spec.h"
#include "posenc/table.h"
#include "posenc/targets.h"
#include "posenc/tensor.h"
#include "posenc/version.h"
