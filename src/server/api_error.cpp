#include "server/api_error.h"

namespace tachyon::server {

int ApiError::status() const {
  switch (kind) {
    case ErrorKind::InvalidRequest: return 400;
    case ErrorKind::Authentication: return 401;
    case ErrorKind::NotFound: return 404;
    case ErrorKind::TooLarge: return 413;
    case ErrorKind::Unprocessable: return 422;
    case ErrorKind::RateLimit: return 429;
    case ErrorKind::Internal: return 500;
    case ErrorKind::NotImplemented: return 501;
  }
  return 500;
}

namespace {

const char* openai_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Authentication: return "authentication_error";
    case ErrorKind::RateLimit: return "rate_limit_error";
    case ErrorKind::Internal:
    case ErrorKind::NotImplemented: return "server_error";
    default: return "invalid_request_error";
  }
}

const char* anthropic_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidRequest:
    case ErrorKind::Unprocessable: return "invalid_request_error";
    case ErrorKind::Authentication: return "authentication_error";
    case ErrorKind::NotFound: return "not_found_error";
    case ErrorKind::TooLarge: return "request_too_large";
    case ErrorKind::RateLimit: return "rate_limit_error";
    case ErrorKind::Internal:
    case ErrorKind::NotImplemented: return "api_error";
  }
  return "api_error";
}

}  // namespace

Json error_body(const ApiError& error, ApiFlavor flavor) {
  if (flavor == ApiFlavor::Ollama) return {{"error", error.what()}};
  if (flavor == ApiFlavor::Anthropic)
    return {{"type", "error"}, {"error", {{"type", anthropic_type(error.kind)}, {"message", error.what()}}}};
  Json body = {{"message", error.what()},
               {"type", openai_type(error.kind)},
               {"param", error.param.empty() ? Json() : Json(error.param)},
               {"code", error.code.empty() ? Json() : Json(error.code)}};
  return {{"error", std::move(body)}};
}

}  // namespace tachyon::server
