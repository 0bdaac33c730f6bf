# Shared build helpers. Our own code compiles with -Wall -Wextra -Wpedantic; warnings are errors
# only with TACHYON_WERROR (CI turns it on): a user's build on another compiler or build type must
# not fail on a false positive (GCC 12's -Wrestrict in std::string at -O3, for one). Third-party
# headers come in as SYSTEM includes so their warnings never show.
option(TACHYON_WERROR "Treat compiler warnings as errors (CI)" OFF)
set(TACHYON_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports -Wrestrict inside libstdc++'s std::string at -O2/-O3 where none exists (GCC bug 105329).
  list(APPEND TACHYON_WARNING_FLAGS -Wno-restrict)
endif()
if(TACHYON_WERROR)
  list(APPEND TACHYON_WARNING_FLAGS -Werror)
endif()
# Sanitizer builds (make test-asan, make test-tsan, tests/fuzz/run_fuzzers.sh): every object of the build is
# instrumented, so a report points into our code and not only at the test that called it.
set(TACHYON_SANITIZE "" CACHE STRING "Build with -fsanitize=<list> (e.g. address,undefined or thread)")
if(TACHYON_SANITIZE)
  add_compile_options(-fsanitize=${TACHYON_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${TACHYON_SANITIZE})
endif()
# The fault-injection switch (TACHYON_FAULTS, engine/fault_injection.h) exists only in builds that
# ask for it: Debug builds by default, never a release.
if(CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(tachyon_fault_injection_default ON)
else()
  set(tachyon_fault_injection_default OFF)
endif()
option(TACHYON_FAULT_INJECTION "Let TACHYON_FAULTS make chosen requests' forwards fail (debug builds)"
       ${tachyon_fault_injection_default})
if(TACHYON_FAULT_INJECTION)
  add_compile_definitions(TACHYON_FAULT_INJECTION=1)
endif()
add_library(tachyon_warnings INTERFACE)
target_compile_options(tachyon_warnings INTERFACE ${TACHYON_WARNING_FLAGS})

# Every test and fuzz executable joins the `tachyon_tests` target, which `make test` builds: the
# tests and the server binary the end-to-end tests drive, not the benchmarks.
add_custom_target(tachyon_tests)

# tachyon_add_library(NAME SOURCES ... [DEPS ...])
function(tachyon_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE tachyon_warnings)
endfunction()

# tachyon_add_test(NAME SOURCES ... [DEPS ...] COST cost): one GoogleTest binary, each TEST
# registered with ctest under the label COST, the test's cost: fast (seconds, no model), model
# (loads the demo model or several fixtures), slow (minutes in all), e2e (a live server) or cuda
# (needs a GPU; skips without). `ctest -L fast` is the developer's loop. Tests run from the
# repository root so fixture paths are stable.
set(TACHYON_TEST_COSTS fast model slow e2e cuda)
# tachyon_tests_<cost>: only the binaries of one label (make test-asan builds tachyon_tests_fast, a
# third of the sanitizer build's objects).
foreach(cost IN LISTS TACHYON_TEST_COSTS)
  add_custom_target(tachyon_tests_${cost})
endforeach()
# TACHYON_SOURCE_DIR for tests and fuzz replays (tests/source_dir.h): the path compiled once, the
# header forced into each C++ source through a path under CCACHE_BASEDIR, which ccache rewrites.
add_library(tachyon_test_source_dir STATIC EXCLUDE_FROM_ALL ${PROJECT_SOURCE_DIR}/tests/source_dir.cpp)
target_compile_definitions(tachyon_test_source_dir PRIVATE TACHYON_SOURCE_PATH="${PROJECT_SOURCE_DIR}")
function(tachyon_use_test_source_dir target)
  target_link_libraries(${target} PRIVATE tachyon_test_source_dir)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${PROJECT_SOURCE_DIR}/tests/source_dir.h>")
endfunction()
function(tachyon_add_test name)
  cmake_parse_arguments(ARG "" "COST" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_COST IN_LIST TACHYON_TEST_COSTS)
    message(FATAL_ERROR "test ${name}: COST must be one of ${TACHYON_TEST_COSTS}, got '${ARG_COST}'")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  add_dependencies(tachyon_tests ${name})
  add_dependencies(tachyon_tests_${ARG_COST} ${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main tachyon_warnings)
  tachyon_use_test_source_dir(${name})
  gtest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                       PROPERTIES LABELS ${ARG_COST} DISCOVERY_TIMEOUT 60)
endfunction()

# tachyon_add_fuzz(NAME SOURCES ... [DEPS ...] [DEFINITIONS ...] [CORPUS dir] [RUNS n]): a fuzz target that
# defines `extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t)`. In the normal
# build it links tests/fuzz/driver.cpp, which replays the corpus and then runs RUNS seeded
# random mutations of it, as a ctest (label fast). Configure with
# -DTACHYON_LIBFUZZER=ON and CXX=clang++ to get real coverage-guided libFuzzer binaries.
option(TACHYON_LIBFUZZER "Build fuzz targets with clang's libFuzzer instead of the replay driver" OFF)
if(TACHYON_LIBFUZZER)
  # Coverage feedback must reach the parsers in the libraries, not only the target's own file.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
function(tachyon_add_fuzz name)
  cmake_parse_arguments(ARG "" "CORPUS;RUNS" "SOURCES;DEPS;DEFINITIONS" ${ARGN})
  if(NOT ARG_RUNS)
    set(ARG_RUNS 20000)
  endif()
  # The ctest is the replay driver in every build. A libFuzzer build (make test-asan's, which the
  # fuzzers share so that one instrumented compile serves both) adds the libFuzzer binary beside it.
  set(replay ${name})
  if(TACHYON_LIBFUZZER)
    add_executable(${name} ${ARG_SOURCES})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${name} PRIVATE ${ARG_DEPS} tachyon_warnings)
    target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
    tachyon_use_test_source_dir(${name})
    add_dependencies(tachyon_tests ${name})
    set(replay ${name}_replay)
  endif()
  add_executable(${replay} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/fuzz/driver.cpp)
  add_dependencies(tachyon_tests ${replay})
  add_dependencies(tachyon_tests_fast ${replay})
  target_link_libraries(${replay} PRIVATE ${ARG_DEPS} tachyon_warnings)
  target_compile_definitions(${replay} PRIVATE ${ARG_DEFINITIONS})
  tachyon_use_test_source_dir(${replay})
  add_test(NAME ${name} COMMAND ${replay} --runs ${ARG_RUNS} ${ARG_CORPUS}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS fast)
endfunction()
