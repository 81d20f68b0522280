# Generates protobuf-c code for every .proto under proto/ into the build tree.
find_program(PROTOC_C protoc-c REQUIRED)
function(lc_proto_library target proto_root)
  file(GLOB_RECURSE protos RELATIVE ${proto_root} ${proto_root}/*.proto)
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/proto-gen)
  set(srcs)
  foreach(p ${protos})
    string(REGEX REPLACE "\\.proto$" "" base ${p})
    set(c ${out_dir}/${base}.pb-c.c)
    set(h ${out_dir}/${base}.pb-c.h)
    add_custom_command(OUTPUT ${c} ${h}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}
      COMMAND ${PROTOC_C} -I${proto_root} --c_out=${out_dir} ${p}
      DEPENDS ${proto_root}/${p}
      COMMENT "protoc-c ${p}")
    list(APPEND srcs ${c})
  endforeach()
  add_library(${target} STATIC ${srcs})
  target_include_directories(${target} PUBLIC ${out_dir})
  target_link_libraries(${target} PUBLIC PkgConfig::PROTOBUFC)
endfunction()
