// Errors. tachyon reports failures as exceptions of one type, `tachyon::Error`, whose
// message names the thing that is wrong (tensor, file, field, request parameter). Code
// that must not throw (the engine loop, kernels) validates up front instead.
//
//   if (dims.size() != 2) throw Error("tensor '{}' in {}: expected 2 dims, got {}", name, file, dims.size());
//
// `Expected<T>` is for functions whose failure is an ordinary outcome (parsing user
// input) rather than a bug or a broken install.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace tachyon {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  template <typename... Args>
  explicit Error(fmt::format_string<Args...> format, Args&&... args)
      : std::runtime_error(fmt::format(format, std::forward<Args>(args)...)) {}
};

// A value or an error message. Deliberately small: has_value(), value(), error().
template <typename T>
class Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  static Expected failure(std::string message) { return Expected(Failure{std::move(message)}); }

  bool has_value() const { return state_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() {
    if (!has_value()) throw Error(error());
    return std::get<0>(state_);
  }
  const T& value() const {
    if (!has_value()) throw Error(error());
    return std::get<0>(state_);
  }
  const std::string& error() const { return std::get<1>(state_).message; }

 private:
  struct Failure {
    std::string message;
  };
  explicit Expected(Failure failure) : state_(std::move(failure)) {}
  std::variant<T, Failure> state_;
};

}  // namespace tachyon

// Invariant checks that stay on in release builds: a broken invariant is a bug, and a
// clear message beats undefined behaviour.
#define TACHYON_CHECK(cond, ...)                                                          \
  do {                                                                                    \
    if (!(cond)) throw ::tachyon::Error("check failed: {} ({}:{}): {}", #cond, __FILE__, \
                                        __LINE__, ::fmt::format(__VA_ARGS__));            \
  } while (0)
