// The JSON side of the config.json parser (config_internal.h): the text (with the line and
// column of a syntax error) and the typed field reader, Fields, that names the key and the value
// in every error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "io/config_internal.h"
#include "posenc/core/error.h"
#include "util/format.h"

namespace posenc {
namespace detail {
namespace {

constexpr std::size_t kShowLimit = 60;  // characters of a value quoted in a message

// Cut short at two levels and about kShowLimit characters, so that a huge or deeply nested value
// neither floods a message nor recurses deeply (the parser is fuzzed).
void render(const json& v, std::string& out, int depth) {
  if (v.is_array() || v.is_object()) {
    out += v.is_object() ? '{' : '[';
    std::size_t i = 0;
    for (auto it = v.begin(); it != v.end(); ++it, ++i) {
      if (i > 0) out += ", ";
      if (depth >= 2 || out.size() > kShowLimit) {
        out += "...";
        break;
      }
      if (v.is_object()) {
        out += json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace) + ": ";
      }
      render(*it, out, depth + 1);
    }
    out += v.is_object() ? '}' : ']';
  } else if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    out += num(v.get<double>());  // nlohmann would print null
  } else {
    out += v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

}  // namespace

std::string show(const json& value) {
  std::string out;
  render(value, out, 0);
  if (out.size() > 2 * kShowLimit) {
    out.resize(2 * kShowLimit);
    out += "...";
  }
  return out;
}

std::vector<std::string> Fields::unread() const {
  std::vector<std::string> keys;
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    if (!was_read(it.key())) keys.push_back(it.key());
  }
  return keys;
}

void Fields::fail(const std::string& key, const json& value, const std::string& expected) const {
  ctx_.fail(name(key) + " (" + show(value) + ") " + expected);
}

const json* Fields::get(const std::string& key) {
  read_.insert(key);
  const auto it = obj_.find(key);
  return it == obj_.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> Fields::number(const std::string& key) {
  const json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(key, *v, "must be a number");
  return v->get<double>();  // finite: nlohmann refuses a literal that overflows a double
}

std::optional<std::int64_t> Fields::integer(const std::string& key) {
  const json* v = get(key);
  if (!v) return std::nullopt;
  const std::string expected = "must be a positive integer";
  if (v->is_number_unsigned()) {  // nlohmann stores every non-negative integer literal so
    const auto u = v->get<std::uint64_t>();
    if (u == 0) fail(key, *v, expected);
    if (u > static_cast<std::uint64_t>(INT64_MAX)) fail(key, *v, expected + " below 2^63");
    return static_cast<std::int64_t>(u);
  }
  if (!v->is_number_float()) fail(key, *v, expected);  // negative integers land here too
  const double d = v->get<double>();
  if (!(d >= 1 && std::trunc(d) == d)) fail(key, *v, expected);
  if (!(d < 0x1p63)) fail(key, *v, expected + " below 2^63");
  const auto i = static_cast<std::int64_t>(d);
  ctx_.warn(name(key) + " field must be an integer, got " + show(*v) + "; used as " +
            std::to_string(i));
  return i;
}

std::int64_t Fields::required_integer(const std::string& key, const std::string& why) {
  if (auto v = integer(key)) return *v;
  if (contains(key)) fail(key, obj_.at(key), "must be a positive integer");
  ctx_.fail(name(key) + " is missing; it is required " + why);
}

std::optional<bool> Fields::boolean(const std::string& key) {
  const json* v = get(key);
  if (v && !v->is_boolean()) fail(key, *v, "must be true or false");
  return v ? std::optional<bool>(v->get<bool>()) : std::nullopt;
}

std::optional<std::string> Fields::string(const std::string& key) {
  const json* v = get(key);
  if (v && !v->is_string()) fail(key, *v, "must be a string");
  return v ? std::optional<std::string>(v->get<std::string>()) : std::nullopt;
}

const json* Fields::dict(const std::string& key) {
  const json* v = get(key);
  if (v && !v->is_object()) fail(key, *v, "must be an object or null");
  return v;
}

std::vector<double> Fields::number_list(const std::string& key) {
  const json* v = get(key);
  if (!v || !v->is_array()) fail(key, v ? *v : json(), "must be a list of numbers");
  std::vector<double> out;
  out.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& x = (*v)[i];
    if (!x.is_number()) fail(key + "[" + std::to_string(i) + "]", x, "must be a number");
    out.push_back(x.get<double>());
  }
  return out;
}

namespace {

// ---------------------------------------------------------------------------------------------
// JSON text

// Strips nlohmann's "[json.exception.parse_error.101] " tag.
std::string json_message(const char* what) {
  std::string_view m(what);
  if (m.rfind("[json.exception.", 0) == 0) {
    const auto end = m.find("] ");
    if (end != std::string_view::npos) m.remove_prefix(end + 2);
  }
  return std::string(m);
}

// Finds where a parse fails: nlohmann's number-overflow error (out_of_range.406) carries no
// position, but the SAX interface is told it.
class ErrorLocator : public nlohmann::json_sax<json> {
 public:
  std::size_t position = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t pos, const std::string&, const json::exception&) override {
    position = pos;
    return false;
  }
};

std::string line_column(std::string_view text, std::size_t byte) {
  byte = std::min(byte, text.size());
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(byte - line_start) +
         " (byte " + std::to_string(byte) + ")";
}

}  // namespace

json parse_json(std::string_view text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // nlohmann's message names the line and column.
    throw Error(source + ": malformed JSON: " + json_message(e.what()) + " (byte " +
                std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {
    ErrorLocator locator;
    try {
      json::sax_parse(text, &locator);
    } catch (const json::exception&) {
    }
    throw Error(source + ": malformed JSON at " + line_column(text, locator.position) + ": " +
                json_message(e.what()));
  }
}

}  // namespace detail
}  // namespace posenc
