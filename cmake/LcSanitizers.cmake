# LC_SANITIZE="address;undefined" (CI) or "thread". Errors are fatal
# (-fno-sanitize-recover) so a sanitizer report fails the test that caused it.
if(LC_SANITIZE)
  string(REPLACE ";" "," _lc_san "${LC_SANITIZE}")
  add_compile_options(-fsanitize=${_lc_san} -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_lc_san})
endif()

# LC_FUZZ: every project library (libcommon, the services' cores, llhttp, the
# generated protobuf code) is compiled with coverage and sanitizers, so
# libFuzzer sees the parsers' edges, not only the harness's. The fuzz targets
# add -fsanitize=fuzzer (libFuzzer's main) in tests/CMakeLists.txt.
if(LC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "LC_FUZZ needs clang: configure with CC=clang")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -gline-tables-only)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(LC_FUZZING_BUILD=1)
endif()
