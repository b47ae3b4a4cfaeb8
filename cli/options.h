// cli/options.h: the one way the posenc tool registers a valued option. Each value is parsed by
// std::from_chars over the whole text and checked against the option's range, so an integer
// that does not fit is refused with the option, the value and the range, never clamped:
//   --seq-len (99999999999999999999) must be an integer in [0, 9223372036854775807]
// Lists are comma-separated with no empty item; names and paths refuse the empty string.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "posenc/core/error.h"
#include "posenc/core/threads.h"

namespace posenc::cli {

// Parses the whole of `text` as an integer in [lo, hi]; throws Error naming `option` otherwise.
template <std::integral T>
T parse_integer(std::string_view option, std::string_view text, T lo, T hi) {
  std::string_view digits = text;
  if (digits.size() > 1 && digits[0] == '+') digits.remove_prefix(1);
  T value{};
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value < lo || value > hi ||
      digits.empty() || digits[0] == '+') {
    throw Error(fmt::format("{} ({}) must be an integer in [{}, {}]", option, text, lo, hi));
  }
  return value;
}

// Parses the whole of `text` as a finite number that fits T (double or float).
template <std::floating_point T>
T parse_number(std::string_view option, std::string_view text) {
  std::string_view digits = text;
  if (digits.size() > 1 && digits[0] == '+') digits.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
      digits[0] == '+' || !std::isfinite(value) ||
      std::abs(value) > static_cast<double>(std::numeric_limits<T>::max())) {
    throw Error(fmt::format("{} ({}) must be a finite number{}", option, text,
                            sizeof(T) == 4 ? " within float32's range" : ""));
  }
  return static_cast<T>(value);
}

// "true" or "false".
inline bool parse_bool(std::string_view option, std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  throw Error(fmt::format("{} (\"{}\") must be true or false", option, text));
}

// Splits "a,b,c"; refuses an empty list or an empty item.
inline std::vector<std::string> split_list(std::string_view option, std::string_view text) {
  if (text.empty())
    throw Error(fmt::format("{} (\"\") must not be empty: give a comma-separated list", option));
  std::vector<std::string> items;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t comma = text.find(',', begin);
    const std::string_view item =
        text.substr(begin, comma == std::string_view::npos ? text.npos : comma - begin);
    if (item.empty()) {
      throw Error(fmt::format("{} (\"{}\"): item {} is empty; expected a comma-separated list",
                              option, text, items.size() + 1));
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) return items;
    begin = comma + 1;
  }
}

namespace options_detail {

// Registers `name` with `set` called on each given value (once per occurrence for lists).
inline CLI::Option* add_parsed(CLI::App* cmd, const std::string& name, const std::string& help,
                               const std::string& type, bool list,
                               std::function<void(const std::string&)> set,
                               std::function<std::string()> shown_default) {
  CLI::Option* o = cmd->add_option(
      name,
      [set = std::move(set)](const CLI::results_t& results) {
        for (const std::string& r : results) set(r);
        return true;
      },
      help, false, std::move(shown_default));
  o->type_name(type);
  o->expected(1);
  if (list) o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  return o;
}

// "-o,--output" -> "--output": the name errors show.
inline std::string option_name(const std::string& name) {
  const std::size_t comma = name.rfind(',');
  return comma == std::string::npos ? name : name.substr(comma + 1);
}

}  // namespace options_detail

// An integer option in [lo, hi] (capture_default_str() shows `value`).
template <std::integral T>
CLI::Option* add_integer(CLI::App* cmd, const std::string& name, T& value, T lo, T hi,
                         const std::string& help) {
  const std::string flag = options_detail::option_name(name);
  return options_detail::add_parsed(
      cmd, name, help, "INT", false,
      [&value, flag, lo, hi](const std::string& t) { value = parse_integer(flag, t, lo, hi); },
      [&value] { return std::to_string(value); });
}

template <std::integral T>
CLI::Option* add_integer(CLI::App* cmd, const std::string& name, std::optional<T>& value, T lo,
                         T hi, const std::string& help) {
  const std::string flag = options_detail::option_name(name);
  return options_detail::add_parsed(
      cmd, name, help, "INT", false,
      [&value, flag, lo, hi](const std::string& t) { value = parse_integer(flag, t, lo, hi); }, {});
}

// Comma-separated integers in [lo, hi]; the option replaces the default list when given.
template <std::integral T>
CLI::Option* add_integers(CLI::App* cmd, const std::string& name, std::vector<T>& values, T lo,
                          T hi, const std::string& help) {
  const std::string flag = options_detail::option_name(name);
  auto fresh = std::make_shared<bool>(true);
  return options_detail::add_parsed(
      cmd, name, help, "INT,...", true,
      [&values, flag, lo, hi, fresh](const std::string& t) {
        if (*fresh) values.clear(), *fresh = false;
        const std::vector<std::string> items = split_list(flag, t);
        const std::string in_list =
            items.size() == 1 ? flag : fmt::format("{} (\"{}\"): item", flag, t);
        for (const std::string& item : items)
          values.push_back(parse_integer(in_list, item, lo, hi));
      },
      [&values] { return fmt::format("{}", fmt::join(values, ",")); });
}

// A finite number (double or float).
template <std::floating_point T>
CLI::Option* add_number(CLI::App* cmd, const std::string& name, T& value, const std::string& help) {
  const std::string flag = options_detail::option_name(name);
  return options_detail::add_parsed(
      cmd, name, help, "NUMBER", false,
      [&value, flag](const std::string& t) { value = parse_number<T>(flag, t); },
      [&value] { return fmt::format("{}", value); });
}

template <std::floating_point T>
CLI::Option* add_number(CLI::App* cmd, const std::string& name, std::optional<T>& value,
                        const std::string& help) {
  const std::string flag = options_detail::option_name(name);
  return options_detail::add_parsed(
      cmd, name, help, "NUMBER", false,
      [&value, flag](const std::string& t) { value = parse_number<T>(flag, t); }, {});
}

// Comma-separated finite numbers.
template <std::floating_point T>
CLI::Option* add_numbers(CLI::App* cmd, const std::string& name, std::vector<T>& values,
                         const std::string& help) {
  const std::string flag = options_detail::option_name(name);
  auto fresh = std::make_shared<bool>(true);
  return options_detail::add_parsed(
      cmd, name, help, "NUMBER,...", true,
      [&values, flag, fresh](const std::string& t) {
        if (*fresh) values.clear(), *fresh = false;
        const std::vector<std::string> items = split_list(flag, t);
        const std::string in_list =
            items.size() == 1 ? flag : fmt::format("{} (\"{}\"): item", flag, t);
        for (const std::string& item : items) values.push_back(parse_number<T>(in_list, item));
      },
      {});
}

// true or false.
inline CLI::Option* add_bool(CLI::App* cmd, const std::string& name, std::optional<bool>& value,
                             const std::string& help) {
  const std::string flag = options_detail::option_name(name);
  return options_detail::add_parsed(
      cmd, name, help, "true|false", false,
      [&value, flag](const std::string& t) { value = parse_bool(flag, t); }, {});
}

// A name or path: the empty string is refused (it would otherwise read as "not given").
inline CLI::Option* add_text(CLI::App* cmd, const std::string& name, std::string& value,
                             const std::string& help, const std::string& type = "TEXT") {
  const std::string flag = options_detail::option_name(name);
  return options_detail::add_parsed(
      cmd, name, help, type, false,
      [&value, flag](const std::string& t) {
        if (t.empty()) throw Error(flag + " (\"\") must not be empty");
        value = t;
      },
      [&value] { return value; });
}

inline CLI::Option* add_text(CLI::App* cmd, const std::string& name,
                             std::optional<std::string>& value, const std::string& help,
                             const std::string& type = "TEXT") {
  const std::string flag = options_detail::option_name(name);
  return options_detail::add_parsed(cmd, name, help, type, false,
                                    [&value, flag](const std::string& t) {
                                      if (t.empty())
                                        throw Error(flag + " (\"\") must not be empty");
                                      value = t;
                                    },
                                    {});
}

// Comma-separated names, no empty item.
inline CLI::Option* add_texts(CLI::App* cmd, const std::string& name,
                              std::vector<std::string>& values, const std::string& help) {
  const std::string flag = options_detail::option_name(name);
  auto fresh = std::make_shared<bool>(true);
  return options_detail::add_parsed(
      cmd, name, help, "NAME,...", true,
      [&values, flag, fresh](const std::string& t) {
        if (*fresh) values.clear(), *fresh = false;
        for (std::string& item : split_list(flag, t)) values.push_back(std::move(item));
      },
      [&values] { return fmt::format("{}", fmt::join(values, ",")); });
}

// The --threads option of every command: [1, kMaxThreads], stated in its help.
inline CLI::Option* add_threads(CLI::App* cmd, int& value, const std::string& what) {
  return add_integer(cmd, "--threads", value, 1, kMaxThreads,
                     fmt::format("{}, in [1, {}]; more than this machine's hardware threads ({}) "
                                 "is capped to them, with a warning",
                                 what, kMaxThreads, hardware_threads()))
      ->capture_default_str();
}

// A warning on stderr when `threads` exceeds the hardware threads: the library runs
// run_threads(threads) of them (posenc/core/threads.h), and the warning says how many.
inline void warn_oversubscribed(std::string_view flag, int threads) {
  if (threads > hardware_threads()) {
    fmt::print(stderr,
               "posenc: warning: {} ({}) is more than this machine's {} hardware threads; running "
               "{} threads (more would only share the cores)\n",
               flag, threads, hardware_threads(), run_threads(threads));
  }
}

}  // namespace posenc::cli
