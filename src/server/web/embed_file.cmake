# cmake -DINPUT=file -DOUTPUT=header.h -DNAME=kName -P embed_file.cmake: writes INPUT's bytes as
# `inline constexpr unsigned char NAME[]` (no terminating zero) into a header, so a web page
# ships inside the binary. A byte array, not a string literal: ISO C++ caps those at 65,536
# characters and -Wpedantic says so.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){24})" "\\1\n  " bytes "${bytes}")
get_filename_component(source "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
     "// Generated from ${source} by embed_file.cmake; do not edit.\n#pragma once\n\n"
     "inline constexpr unsigned char ${NAME}[] = {\n  ${bytes}\n};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
