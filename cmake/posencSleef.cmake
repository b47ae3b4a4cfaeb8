# Sleef (Debian's libsleef-dev): the float32 pow/cos/sin torch calls, which the hf numerics
# reproduce (src/core/torch_float32.cc). It ships no CMake package; this defines the imported
# target posenc::sleef, for the build and, installed beside posencConfig.cmake, for consumers of
# the static library. Debian puts the header in include/<multiarch>, which find_path searches.
if(NOT TARGET posenc::sleef)
  find_path(POSENC_SLEEF_INCLUDE_DIR sleef.h REQUIRED)
  find_library(POSENC_SLEEF_LIBRARY NAMES sleef REQUIRED)
  add_library(posenc::sleef UNKNOWN IMPORTED)
  set_target_properties(posenc::sleef PROPERTIES
    IMPORTED_LOCATION "${POSENC_SLEEF_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${POSENC_SLEEF_INCLUDE_DIR}")
endif()
