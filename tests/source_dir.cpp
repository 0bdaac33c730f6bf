#include "source_dir.h"

extern "C" const char* tachyon_test_source_dir() { return TACHYON_SOURCE_PATH; }
