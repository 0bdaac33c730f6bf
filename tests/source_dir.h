// The repository's folder for the tests' fixture paths: TACHYON_SOURCE_DIR, a const char*.
// tachyon_add_test force-includes this header, and the path itself is compiled into one small
// library (source_dir.cpp) rather than onto every test's compile line: ccache hashes an absolute
// path there, so a clone in another folder (CI's) would recompile every test object.
#pragma once

extern "C" const char* tachyon_test_source_dir();
#define TACHYON_SOURCE_DIR (tachyon_test_source_dir())
