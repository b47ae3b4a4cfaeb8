// tests/support/shared_data.h: the files of ../shared the tests read (test-only).
#pragma once

#include <string>

namespace posenc_test {

inline const std::string kShared = POSENC_SHARED_DIR;
inline const std::string kStoriesModel = kShared + "/models/stories260K/tinystories_260k_v1.bin";
inline const std::string kStoriesGguf = kShared + "/testdata/gguf/stories260K.gguf";
inline const std::string kLlama2Config = kShared + "/testdata/hf-configs/llama-2-7b.json";
inline const std::string kPrideAndPrejudice = kShared + "/data/austen/prideprejudice.txt";

}  // namespace posenc_test
