// API errors: one exception type carrying the HTTP status and the error's type, rendered in
// the JSON shape of the API the client spoke (OpenAI, Anthropic or Ollama).
//
//   throw ApiError::invalid("'messages' must not be empty", "messages");   // 400
//   ...
//   res.status = e.status; res.set_content(error_body(e, Api::Anthropic).dump(), "application/json");
#pragma once

#include <stdexcept>
#include <string>

#include "base/json.h"

namespace tachyon::server {

enum class ApiFlavor { OpenAI, Anthropic, Ollama };

enum class ErrorKind {
  InvalidRequest,   // 400
  Authentication,   // 401
  NotFound,         // 404
  TooLarge,         // 413
  Unprocessable,    // 422
  RateLimit,        // 429
  Internal,         // 500
  NotImplemented,   // 501: a route of the API this server does not provide (Ollama's /api/embed, /api/create)
};

class ApiError : public std::runtime_error {
 public:
  ApiError(ErrorKind kind, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), kind(kind), param(std::move(param)), code(std::move(code)) {}
  static ApiError invalid(std::string message, std::string param = "", std::string code = "") {
    return ApiError(ErrorKind::InvalidRequest, std::move(message), std::move(param), std::move(code));
  }

  int status() const;
  ErrorKind kind;
  std::string param;  // the offending request field, when one is to blame
  std::string code;   // OpenAI's machine-readable code ("model_not_found", "invalid_api_key")
};

// OpenAI:    {"error": {"message", "type", "param", "code"}}
// Anthropic: {"type": "error", "error": {"type", "message"}}
// Ollama:    {"error": "message"}
Json error_body(const ApiError& error, ApiFlavor flavor);

}  // namespace tachyon::server
