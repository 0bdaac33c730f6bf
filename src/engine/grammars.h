// Grammar compilers for the server's structured outputs (sampling/cfg.h and friends), named
// through the engine: the server depends on engine/, not on sampling/.
#pragma once

#include "sampling/cfg.h"
#include "sampling/grammar_cache.h"
#include "sampling/json_schema_grammar.h"
#include "sampling/regex_grammar.h"

namespace tachyon::engine {

using sampling::Cfg;
using sampling::gbnf_literal;
using sampling::GrammarCache;
using sampling::JsonGrammarBuilder;
using sampling::regex_grammar;

}  // namespace tachyon::engine
