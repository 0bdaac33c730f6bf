// Responses API `previous_response_id`: a follow-up request continues the conversation a stored
// response ended (server/response_store.h). The stored conversation goes between the request's
// own instructions (which replace the earlier ones, as OpenAI does) and its new input.
#pragma once

#include <string>

#include "chat/parsers/output_parser.h"
#include "server/request.h"
#include "server/response_store.h"

namespace tachyon::server {

// Prepends the conversation of request.previous_response_id (when set) to request.messages.
// An id the store does not hold (never stored, `store: false`, or evicted) is a 404 naming it.
void continue_stored_conversation(ResponseStore& store, ParsedRequest& request);

// Stores response `id`: the request's conversation without its instructions, then `output` as
// the assistant's turn. Nothing when the request said `store: false`.
void store_conversation(ResponseStore& store, const std::string& id, const ParsedRequest& request,
                        const chat::ParsedMessage& output);

}  // namespace tachyon::server
