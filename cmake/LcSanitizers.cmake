# LC_SANITIZE="address;undefined" (CI) or "thread". Errors are fatal
# (-fno-sanitize-recover) so a sanitizer report fails the test that caused it.
if(LC_SANITIZE)
  string(REPLACE ";" "," _lc_san "${LC_SANITIZE}")
  add_compile_options(-fsanitize=${_lc_san} -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_lc_san})
endif()
