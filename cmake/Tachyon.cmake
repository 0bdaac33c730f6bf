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
