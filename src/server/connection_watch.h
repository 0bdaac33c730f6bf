// Tells a handler that its client hung up while the handler is still working (a
// non-streaming generation waiting on the engine), so the request can be cancelled and its
// KV blocks returned to the pool.
//
// cpp-httplib 0.11 gives a handler neither the socket nor a "connection closed" query, and
// a streaming response only learns it when a write fails. The connection's socket is the one
// of this process whose local and peer addresses are the request's (unique while the handler
// runs: httplib closes it only after the handler returns); it is found once, on the first
// query, by scanning /proc/self/fd. A peer that closed its end shows as readable with
// nothing left to read (or as a hang-up).
//
//   ConnectionWatch watch(req);
//   while (working) if (watch.closed()) { cancel(); break; }
#pragma once

#include <string>

namespace httplib {
struct Request;
}

namespace tachyon::server {

class ConnectionWatch {
 public:
  explicit ConnectionWatch(const httplib::Request& request);
  // True once the client has closed or reset the connection. Cheap (one poll) after the
  // first call; false when the socket cannot be found.
  bool closed();

 private:
  std::string remote_addr_;
  int remote_port_ = -1;
  int local_port_ = -1;
  int fd_ = -2;  // -2: not looked up yet; -1: not found
};

}  // namespace tachyon::server
