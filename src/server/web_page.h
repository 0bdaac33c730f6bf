// The web chat page at GET / (src/server/web/chat.html, embedded at build time): one HTML file
// with its CSS and JavaScript inline that talks to this server's /v1/models and streaming
// /v1/chat/completions. It is served without the API key (the page itself asks for the key and
// sends it with its API calls) and under a Content-Security-Policy that lets it load nothing
// from elsewhere, so it works offline.
//
//   httplib::Server http;
//   server::add_web_page_route(http);   // GET / ; If-None-Match with its ETag answers 304
#pragma once

#include <httplib.h>

#include <string_view>

namespace tachyon::server {

std::string_view chat_page();
void add_web_page_route(httplib::Server& http);

}  // namespace tachyon::server
