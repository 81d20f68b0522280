# Runs BIN --help and compares its output with the GOLDEN file byte for byte.
execute_process(COMMAND ${BIN} --help OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BIN} --help exited with ${rc}")
endif()
file(READ ${GOLDEN} want)
if(NOT out STREQUAL want)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/ember-help.actual.txt "${out}")
  message(FATAL_ERROR "--help differs from ${GOLDEN}; actual output in "
                      "${CMAKE_CURRENT_BINARY_DIR}/ember-help.actual.txt "
                      "(update the golden file if the change is intended)")
endif()
