# Shared build helpers. Our own code compiles with warnings as errors; third-party
# headers come in as SYSTEM includes so their warnings do not stop the build.

add_library(tachyon_warnings INTERFACE)
target_compile_options(tachyon_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Werror -Wno-unused-parameter -Wno-missing-field-initializers)

# tachyon_add_library(NAME SOURCES ... [DEPS ...])
function(tachyon_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE tachyon_warnings)
endfunction()

# tachyon_add_test(NAME SOURCES ... [DEPS ...] [LABELS ...]): one GoogleTest binary, each
# TEST registered with ctest. Tests run from the repository root so fixture paths are stable.
function(tachyon_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main tachyon_warnings)
  target_compile_definitions(${name} PRIVATE TACHYON_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                       PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()

# tachyon_add_fuzz(NAME SOURCES ... [DEPS ...] [CORPUS dir] [RUNS n]): a fuzz target that
# defines `extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t)`. In the normal
# build it links tests/fuzz/driver.cpp, which replays the corpus and then runs RUNS seeded
# random mutations of it, as a ctest (label fuzz). Configure with
# -DTACHYON_LIBFUZZER=ON and CXX=clang++ to get real coverage-guided libFuzzer binaries.
option(TACHYON_LIBFUZZER "Build fuzz targets with clang's libFuzzer instead of the replay driver" OFF)
function(tachyon_add_fuzz name)
  cmake_parse_arguments(ARG "" "CORPUS;RUNS" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_RUNS)
    set(ARG_RUNS 20000)
  endif()
  if(TACHYON_LIBFUZZER)
    add_executable(${name} ${ARG_SOURCES})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address)
  else()
    add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/fuzz/driver.cpp)
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} tachyon_warnings)
  if(NOT TACHYON_LIBFUZZER)
    add_test(NAME ${name} COMMAND ${name} --runs ${ARG_RUNS} ${ARG_CORPUS}
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(${name} PROPERTIES LABELS fuzz)
  endif()
endfunction()
