# tests/CMakeLists.txt builds every tests/unit/**/test_*.c and tests/fuzz/fuzz_*.c
# against the libraries it knows (ingester, querier, lc). A library defined
# elsewhere (a role's, a tool's) links its own tests with
#   lc_link_tests(<library> <glob>...)
# which waits until the whole tree is read, when those test targets exist.
function(lc_link_tests_now lib)
  file(GLOB srcs ${ARGN})
  foreach(src ${srcs})
    get_filename_component(name ${src} NAME_WE)
    if(TARGET ${name})
      target_link_libraries(${name} PRIVATE ${lib})
    endif()
  endforeach()
endfunction()

# A deferred call evaluates its arguments when it runs, by then outside this
# function's scope: EVAL bakes the values in now.
function(lc_link_tests lib)
  set(args "")
  foreach(a ${lib} ${ARGN})
    string(APPEND args " [==[${a}]==]")
  endforeach()
  cmake_language(EVAL CODE
    "cmake_language(DEFER DIRECTORY [==[${PROJECT_SOURCE_DIR}]==] CALL lc_link_tests_now ${args})")
endfunction()
