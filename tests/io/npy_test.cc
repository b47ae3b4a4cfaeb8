// .npy reader and writer: round trips, the header NumPy writes, versions 2.0 and 3.0, and every
// malformed input refused with a message that names the problem.
#include "posenc/io/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "support/error_of.h"

namespace {

using posenc::Error;
using posenc::NpyArray;
using ::testing::HasSubstr;

std::vector<std::byte> to_bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// A .npy file from its parts, with the header length field of the given version.
std::vector<std::byte> make_npy(int major, std::string_view header, std::size_t data_bytes = 0) {
  std::string s("\x93NUMPY", 6);
  s += static_cast<char>(major);
  s += '\0';
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < len_bytes; ++i)
    s += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  s += header;
  for (std::size_t i = 0; i < data_bytes; ++i) s += static_cast<char>(i * 37);
  return to_bytes(s);
}

std::string dict(std::string_view descr, std::string_view shape, std::string_view order = "False") {
  return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + std::string(order) +
         ", 'shape': " + std::string(shape) + ", }\n";
}

// The message parse_npy throws for `bytes` ("(no error)" when it does not throw).
std::string error_of(const std::vector<std::byte>& bytes) {
  return posenc::testing::error_of([&] { posenc::parse_npy(bytes, "t.npy"); });
}

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("posenc_npy_test_" + std::to_string(::getpid()) + "_" + name);
}

TEST(Npy, RoundTripsEveryDtypeAndRank) {
  std::mt19937 rng(7);
  for (const char* descr : {"<f4", "<f2", "<i4", "<i8", "<u2"}) {
    const std::size_t item = posenc::npy_item_size(descr);
    for (const std::vector<std::int64_t>& shape :
         {std::vector<std::int64_t>{}, {0}, {5}, {2, 3, 4}, {3, 0, 2}, {1, 1, 1, 1, 7}}) {
      std::int64_t count = 1;
      for (auto d : shape) count *= d;
      std::vector<std::byte> data(static_cast<std::size_t>(count) * item);
      for (auto& b : data) b = static_cast<std::byte>(rng());
      const auto bytes = posenc::npy_bytes(descr, shape, data);
      EXPECT_EQ((bytes.size() - data.size()) % 64, 0u)
          << descr << ": data must start on a 64-byte boundary";
      const NpyArray a = posenc::parse_npy(bytes, "mem.npy");
      EXPECT_EQ(a.descr, descr);
      EXPECT_EQ(a.shape, shape);
      EXPECT_EQ(a.data, data);
      EXPECT_EQ(a.element_count(), count);
      EXPECT_TRUE(a.warnings.empty());

      const auto path = temp_path("roundtrip.npy");
      posenc::write_npy(path, descr, shape, data);
      const NpyArray b = posenc::read_npy(path);
      EXPECT_EQ(b.descr, descr);
      EXPECT_EQ(b.shape, shape);
      EXPECT_EQ(b.data, data);
      std::filesystem::remove(path);
    }
  }
}

// numpy.save(f, np.zeros((2, 3), np.float32)) with NumPy >= 1.23 writes a 128-byte header:
// magic, version 1.0, length 118 ('v', 0), the dict with keys in sorted order, spaces (20 of
// them reserved for the first axis to grow, the rest to align the data to 64), '\n'
// (numpy/lib/format.py, _write_array_header and _wrap_header).
TEST(Npy, HeaderIsWhatNumpySaveWrites) {
  const std::vector<float> zeros(6, 0.0f);
  const std::vector<std::int64_t> shape = {2, 3};
  const auto bytes = posenc::npy_bytes("<f4", shape, std::as_bytes(std::span(zeros)));
  ASSERT_EQ(bytes.size(), 128u + 24u);
  const std::string text(reinterpret_cast<const char*>(bytes.data()), 128);
  const std::string dict_text = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(text.substr(0, 10), std::string("\x93NUMPY\x01\x00v\x00", 10));
  EXPECT_EQ(text.substr(10, dict_text.size()), dict_text);
  EXPECT_EQ(text.find_first_not_of(' ', 10 + dict_text.size()), 127u);
  EXPECT_EQ(text[127], '\n');

  const std::vector<std::int64_t> vec = {5};
  const auto one_d = posenc::npy_bytes("<i8", vec, std::vector<std::byte>(40));
  EXPECT_THAT(std::string(reinterpret_cast<const char*>(one_d.data()), 128),
              HasSubstr("'shape': (5,), }"));
  const auto scalar = posenc::npy_bytes("<i4", {}, std::vector<std::byte>(4));
  EXPECT_THAT(std::string(reinterpret_cast<const char*>(scalar.data()), 128),
              HasSubstr("'shape': (), }"));
}

TEST(Npy, ReadsVersions2And3AndLooseHeaders) {
  for (int major : {2, 3}) {
    const NpyArray a = posenc::parse_npy(make_npy(major, dict("<f2", "(2, 3)"), 12), "v.npy");
    EXPECT_EQ(a.descr, "<f2");
    EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(a.data.size(), 12u);
  }
  // Double quotes, no spaces, no trailing comma, Python 2 longs: all legal Python literals.
  const NpyArray b = posenc::parse_npy(
      make_npy(1, R"({"shape":(3L,4L),"descr":"<i4","fortran_order":False})", 48), "py2.npy");
  EXPECT_EQ(b.shape, (std::vector<std::int64_t>{3, 4}));
  // A zero dim makes an empty array even next to a large one.
  EXPECT_EQ(posenc::parse_npy(make_npy(1, dict("<f4", "(0, 1099511627776)")), "e.npy").data.size(),
            0u);
}

TEST(Npy, TrailingBytesAreAWarning) {
  const NpyArray a = posenc::parse_npy(make_npy(1, dict("<f4", "(2,)"), 8 + 4), "trail.npy");
  EXPECT_EQ(a.data.size(), 8u);
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_THAT(a.warnings[0], HasSubstr("trail.npy"));
  EXPECT_THAT(a.warnings[0], HasSubstr("4 bytes after the array data"));
}

struct Malformed {
  const char* what;
  std::vector<std::byte> bytes;
  std::vector<const char*> expected;  // substrings of the message
};

TEST(Npy, MalformedInputNamesTheProblem) {
  const std::vector<Malformed> cases = {
      {"empty", {}, {"t.npy", "magic"}},
      {"wrong magic", to_bytes("PK\x03\x04 zip archive"), {"magic", "PK\\x03\\x04"}},
      {"preamble cut", to_bytes(std::string("\x93NUMPY\x01\x00", 8)), {"truncated", "8 bytes"}},
      {"version 4.0", make_npy(4, dict("<f4", "()"), 4), {"version 4.0", "1.0, 2.0, 3.0"}},
      {"version 1.1",
       [] {
         auto b = make_npy(1, dict("<f4", "()"), 4);
         b[7] = std::byte{1};
         return b;
       }(),
       {"version 1.1"}},
      {"header length past end",
       [] {
         auto b = make_npy(1, dict("<f4", "()"));
         b[9] = std::byte{0x7f};
         return b;
       }(),
       {"header length field says", "follow it"}},
      {"not a dict", make_npy(1, "[1, 2]\n"), {"not a Python dict", "'[1, 2]"}},
      {"missing shape",
       make_npy(1, "{'descr': '<f4', 'fortran_order': False}\n"),
       {"no 'shape' key"}},
      {"missing descr", make_npy(1, "{'fortran_order': False, 'shape': ()}\n"), {"no 'descr' key"}},
      {"unknown key",
       make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}\n"),
       {"unknown key 'x'"}},
      {"duplicate key",
       make_npy(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}\n"),
       {"'descr' twice"}},
      {"descr not a string",
       make_npy(1, "{'descr': 4, 'fortran_order': False, 'shape': ()}\n"),
       {"'descr' must be a string", "'4"}},
      {"descr float64",
       make_npy(1, dict("<f8", "(2,)"), 16),
       {"unsupported dtype descr '<f8'", "'<f4' float32", "'<u2'"}},
      {"big-endian", make_npy(1, dict(">f4", "(2,)"), 8), {"'>f4'"}},
      {"binary descr", make_npy(1, dict("\x01\xff", "(2,)"), 8), {"'\\x01\\xff'"}},
      {"fortran order",
       make_npy(1, dict("<f4", "(2, 2)", "True"), 16),
       {"fortran_order", "C-order"}},
      {"fortran_order not bool", make_npy(1, dict("<f4", "(2, 2)", "'no'"), 16), {"True or False"}},
      {"shape list", make_npy(1, dict("<f4", "[2, 2]"), 16), {"'shape' must be a tuple", "list"}},
      {"shape int in parens", make_npy(1, dict("<f4", "(3)"), 12), {"not a tuple", "(3,)"}},
      {"shape float", make_npy(1, dict("<f4", "(2.5,)"), 12), {"'shape' expects ',' or ')'"}},
      {"negative dim", make_npy(1, dict("<f4", "(-3, 2)"), 0), {"negative dimension (-3)"}},
      {"huge dim",
       make_npy(1, dict("<f4", "(99999999999999999999,)")),
       {"99999999999999999999", "2^63"}},
      {"count overflow",
       make_npy(1, dict("<f4", "(1099511627776, 1099511627776)")),
       {"overflows", "(1099511627776, 1099511627776)"}},
      {"bytes overflow", make_npy(1, dict("<i8", "(2305843009213693952,)")), {"overflows"}},
      {"zero does not hide overflow",
       make_npy(1, dict("<f4", "(0, 4611686018427387904)")),
       {"overflows"}},
      {"65 dims",
       make_npy(1, dict("<f4",
                        [] {
                          std::string s = "(";
                          for (int i = 0; i < 65; ++i) s += "1, ";
                          return s + ")";
                        }())),
       {"more than 64 dimensions"}},
      {"unterminated string", make_npy(1, "{'descr: 1}\n"), {"unterminated string"}},
      {"escape",
       make_npy(1, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': ()}\n"),
       {"escape"}},
      {"text after dict",
       make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk\n", 4),
       {"after the closing '}'", "junk"}},
      {"truncated data",
       make_npy(1, dict("<f4", "(2, 3)"), 20),
       {"truncated .npy data", "needs 24 bytes, found 20"}},
      {"no data", make_npy(1, dict("<i8", "(1,)")), {"needs 8 bytes, found 0"}},
  };
  for (const Malformed& c : cases) {
    const std::string message = error_of(c.bytes);
    ASSERT_NE(message, "(no error)") << c.what << ": accepted";
    EXPECT_THAT(message, HasSubstr("t.npy")) << c.what;
    for (const char* part : c.expected) EXPECT_THAT(message, HasSubstr(part)) << c.what;
  }
}

// Every prefix of a valid file and random corruptions of it: parsed or refused with an Error,
// never a crash, an overread (run under the asan preset) or another exception.
TEST(Npy, TruncationsAndCorruptionsAreErrorsNotCrashes) {
  const std::vector<std::int64_t> shape = {3, 2, 4};
  const auto valid = posenc::npy_bytes("<f4", shape, std::vector<std::byte>(96));
  for (std::size_t n = 0; n < valid.size(); ++n) {
    const std::vector<std::byte> prefix(valid.begin(),
                                        valid.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_NE(error_of(prefix), "(no error)") << "prefix of " << n << " bytes accepted";
  }
  std::mt19937 rng(2024);
  int refused = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    auto bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bytes[rng() % 128] = static_cast<std::byte>(rng());  // within the preamble and header
    }
    try {
      posenc::parse_npy(bytes, "t.npy");
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 1000);
}

TEST(Npy, FileErrorsNameThePath) {
  try {
    posenc::read_npy("/nonexistent/q.npy");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/q.npy"));
    EXPECT_THAT(e.what(), HasSubstr("cannot read"));
  }
  try {
    posenc::read_npy(std::filesystem::temp_directory_path());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("directory"));
  }
  const auto path = temp_path("bad.npy");
  std::ofstream(path) << "\x93NUMPY\x01";
  try {
    posenc::read_npy(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
    EXPECT_THAT(e.what(), HasSubstr("truncated"));
  }
  std::filesystem::remove(path);
}

TEST(Npy, WriteRefusesInconsistentInput) {
  const std::vector<std::int64_t> shape = {2, 3};
  const std::vector<std::byte> data(20);
  try {
    posenc::write_npy(temp_path("w.npy"), "<f4", shape, data);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("w.npy"));
    EXPECT_THAT(e.what(), HasSubstr("needs 24 bytes, got 20"));
  }
  EXPECT_THROW(posenc::npy_bytes("<f8", shape, std::vector<std::byte>(48)), Error);
  const std::vector<std::int64_t> negative = {-1};
  EXPECT_THROW(posenc::npy_bytes("<f4", negative, {}), Error);
  EXPECT_THROW(
      posenc::write_npy("/nonexistent/dir/o.npy", "<f4", shape, std::vector<std::byte>(24)), Error);
}

}  // namespace
