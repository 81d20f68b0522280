# Warnings and flags that hold in every build type. Frame pointers stay on
# always: ember is a profiler, and its own stacks must unwind.
include(CheckCCompilerFlag)
set(LC_WARNING_FLAGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wformat=2 -Wvla -Wno-unused-parameter)
add_compile_options(-fno-omit-frame-pointer)
if(LC_WERROR)
  list(APPEND LC_WARNING_FLAGS -Werror)
endif()
# Applied to our own targets only (llhttp and generated code are built quietly).
function(lc_target_warnings target)
  target_compile_options(${target} PRIVATE ${LC_WARNING_FLAGS})
endfunction()
