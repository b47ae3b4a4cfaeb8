// posenc/posenc.h: the whole public API.
#pragma once

#include "posenc/config.h"
#include "posenc/cos_sin.h"
#include "posenc/defaults.h"
#include "posenc/error.h"
#include "posenc/frequencies.h"
#include "posenc/ggml.h"
#include "posenc/numerics.h"
#include "posenc/sinusoidal.h"
#include "posenc/spec.h"
#include "posenc/version.h"
