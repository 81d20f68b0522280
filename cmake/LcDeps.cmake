# Every dependency comes from Debian packages (scripts/install-deps.sh).
find_package(PkgConfig REQUIRED)
pkg_check_modules(UV REQUIRED IMPORTED_TARGET libuv)
pkg_check_modules(PROTOBUFC REQUIRED IMPORTED_TARGET libprotobuf-c)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
# libdeflate 1.14: whole-buffer inflate, 2x zlib where the size is known (lc/gz.h).
pkg_check_modules(DEFLATE REQUIRED IMPORTED_TARGET libdeflate)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
# hiredis 0.14 (Debian bookworm): async API; its libuv adapter is header-only.
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
# nghttp2 1.52 (bookworm, with the rapid-reset and CONTINUATION-flood fixes):
# the HTTP/2 framing of lc/httpd.h.
pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2>=1.52)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl>=7.75)
pkg_check_modules(CRYPTO REQUIRED IMPORTED_TARGET libcrypto)
find_library(LMDB_LIB lmdb REQUIRED)
find_path(LMDB_INCLUDE lmdb.h REQUIRED)
find_package(Threads REQUIRED)

# llhttp: Debian's node-llhttp ships the generated C sources; compile them in.
set(LLHTTP_DIR /usr/share/llhttp CACHE PATH "llhttp C sources")
set(LLHTTP_INCLUDE /usr/share/include/llhttp CACHE PATH "llhttp header")
if(NOT EXISTS ${LLHTTP_DIR}/llhttp.c)
  message(FATAL_ERROR "llhttp sources not found in ${LLHTTP_DIR}: run scripts/install-deps.sh")
endif()
add_library(llhttp STATIC ${LLHTTP_DIR}/api.c ${LLHTTP_DIR}/http.c ${LLHTTP_DIR}/llhttp.c)
target_include_directories(llhttp PUBLIC ${LLHTTP_INCLUDE})
set_target_properties(llhttp PROPERTIES POSITION_INDEPENDENT_CODE ON)
# Strict mode: the lenient default accepts any two bytes after chunk data in
# place of CRLF (and more such shortcuts), and then serves a request pipelined
# behind them: a smuggling risk behind a proxy that parses strictly (issue 12).
target_compile_definitions(llhttp PUBLIC LLHTTP_STRICT_MODE=1)

# The eBPF agent: libbpf loads and attaches its programs, libelf reads the
# symbol tables of profiled binaries.
pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET libbpf>=1.0)
pkg_check_modules(LIBELF REQUIRED IMPORTED_TARGET libelf)
# server-side symbols (issue 31): DWARF and debuginfod lookups
pkg_check_modules(LIBDW REQUIRED IMPORTED_TARGET libdw)
pkg_check_modules(DEBUGINFOD REQUIRED IMPORTED_TARGET libdebuginfod)
