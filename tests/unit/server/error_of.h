// The ApiError a request parse throws; fails the test when it does not throw.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"

namespace tachyon::server {

template <typename Parse>
ApiError error_of(Parse parse, const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(ErrorKind::Internal, "none");
}

}  // namespace tachyon::server
