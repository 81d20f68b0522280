# bpf_object(<name> <source.bpf.c> [DEPENDS header...])
#
# Builds a CO-RE BPF object and its libbpf skeleton, the way libbpf-bootstrap
# does: a vmlinux.h dumped from the build machine's kernel BTF, clang
# -target bpf -g -O2 (the -g carries BTF, which CO-RE relocations need),
# llvm-strip -g (drop DWARF, keep BTF: the object is embedded in the binary),
# then `bpftool gen skeleton`. Produces an INTERFACE target <name>_skel whose
# include directory holds <name>.skel.h (struct <name>_bpf).
#
# The BPF toolchain is required, never optional: a missing tool stops the
# configure step with the package to install (scripts/install-deps.sh).

find_program(LC_BPF_CLANG NAMES clang clang-16 clang-15 clang-14)
find_program(LC_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin /usr/local/sbin)
find_program(LC_LLVM_STRIP NAMES llvm-strip llvm-strip-16 llvm-strip-15 llvm-strip-14)
set(LC_VMLINUX_BTF /sys/kernel/btf/vmlinux CACHE FILEPATH
    "kernel BTF the BPF programs' vmlinux.h is generated from")

if(NOT LC_BPF_CLANG)
  message(FATAL_ERROR "clang not found: the eBPF agent needs it (apt-get install clang; "
                      "scripts/install-deps.sh installs everything)")
endif()
if(NOT LC_BPFTOOL)
  message(FATAL_ERROR "bpftool not found: the eBPF agent needs it to generate vmlinux.h and "
                      "skeletons (Debian 12: apt-get install bpftool; see scripts/install-deps.sh)")
endif()
if(NOT LC_LLVM_STRIP)
  message(FATAL_ERROR "llvm-strip not found (apt-get install llvm; scripts/install-deps.sh)")
endif()
if(NOT EXISTS ${LC_VMLINUX_BTF})
  message(FATAL_ERROR "${LC_VMLINUX_BTF} not found: the kernel was built without "
                      "CONFIG_DEBUG_INFO_BTF; pass -DLC_VMLINUX_BTF=<file> (e.g. from BTFHub)")
endif()

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  set(LC_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(LC_BPF_ARCH arm64)
else()
  message(FATAL_ERROR "BPF target arch unknown for ${CMAKE_SYSTEM_PROCESSOR}")
endif()

set(LC_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf)
set(LC_VMLINUX_H ${LC_BPF_GEN_DIR}/vmlinux.h)
add_custom_command(
  OUTPUT ${LC_VMLINUX_H}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${LC_BPF_GEN_DIR}
  COMMAND ${LC_BPFTOOL} btf dump file ${LC_VMLINUX_BTF} format c > ${LC_VMLINUX_H}.tmp
  COMMAND ${CMAKE_COMMAND} -E rename ${LC_VMLINUX_H}.tmp ${LC_VMLINUX_H}
  COMMENT "Generating vmlinux.h from ${LC_VMLINUX_BTF}"
  VERBATIM)

function(bpf_object name src)
  cmake_parse_arguments(BPF "" "" "DEPENDS" ${ARGN})
  get_filename_component(src_abs ${src} ABSOLUTE)
  get_filename_component(src_dir ${src_abs} DIRECTORY)
  set(obj ${LC_BPF_GEN_DIR}/${name}.bpf.o)
  set(skel ${LC_BPF_GEN_DIR}/${name}.skel.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${LC_BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${LC_BPF_ARCH} -Wall
            -I${LC_BPF_GEN_DIR} -I${src_dir} -c ${src_abs} -o ${obj}
    COMMAND ${LC_LLVM_STRIP} -g ${obj}
    DEPENDS ${src_abs} ${LC_VMLINUX_H} ${BPF_DEPENDS}
    COMMENT "Compiling BPF object ${name}.bpf.o"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${LC_BPFTOOL} gen skeleton ${obj} name ${name}_bpf > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${obj}
    COMMENT "Generating BPF skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${LC_BPF_GEN_DIR})
endfunction()
