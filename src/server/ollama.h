// The Ollama API (docs/api.md of ollama/ollama) on the server's port: generation in
// ollama_chat.cpp, model listings and the refused management routes in ollama_models.cpp.
// Errors are {"error": "..."} with the HTTP status (ApiFlavor::Ollama).
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>

#include "server/handlers.h"

namespace tachyon::server {

// POST /api/chat, /api/generate: NDJSON streams unless "stream": false.
void handle_ollama_chat(HandlerContext ctx, const std::string& body, httplib::Response& res);
void handle_ollama_generate(HandlerContext ctx, const std::string& body, httplib::Response& res);
// POST /api/show, /api/embed, /api/pull; GET /api/tags, /api/ps, /api/version.
// `models` names what is served; a model not loaded is listed by /api/tags from its files
// (dated `started`, the server's start) and loaded by /api/show; /api/ps lists the loaded.
void handle_ollama_show(ModelRegistry& models, const std::string& body, httplib::Response& res);
// POST /api/embed and the older /api/embeddings (server/ollama_embed.cpp): embedding models only.
void handle_ollama_embed(HandlerContext ctx, const std::string& body, httplib::Response& res);
void handle_ollama_embeddings(HandlerContext ctx, const std::string& body, httplib::Response& res);
// /api/pull: a served name succeeds at once; another is downloaded by `puller` (NDJSON progress
// unless "stream": false) and then served; with no puller, 501.
void handle_ollama_pull(ModelRegistry& models, const ModelPuller& puller, const std::string& body,
                        httplib::Response& res);
void handle_ollama_tags(ModelRegistry& models, int64_t started, httplib::Response& res);
void handle_ollama_ps(const ModelRegistry& models, httplib::Response& res);
void handle_ollama_version(httplib::Response& res);
// /api/create, /api/copy, /api/delete, /api/push, /api/blobs: a 501 that says what to do instead.
[[noreturn]] void refuse_ollama_model_management(const std::string& path);

// Whether the model has a reasoning mode (its template reads enable_thinking or writes
// <think>, or it speaks harmony): Ollama's "thinking" capability.
bool ollama_can_think(const ServedModel& model);
// RFC 3339 in UTC with nanoseconds, as Ollama writes times ("2023-08-04T19:22:45.499127Z").
std::string ollama_time(std::chrono::system_clock::time_point t);

}  // namespace tachyon::server
