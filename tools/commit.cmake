# Writes OUT: #define ZT_TOOLS_COMMIT "<the source tree's commit>" (`ztier bench profile`
# records it), rewritten only when it changes so nothing rebuilds needlessly. "unknown"
# outside a git checkout; "-dirty" when tracked files differ from the commit.
execute_process(COMMAND git -C "${SRC}" rev-parse --short=10 HEAD OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE dirty ERROR_QUIET)
  if(dirty)
    set(commit "${commit}-dirty")
  endif()
endif()
file(WRITE "${OUT}.new" "#define ZT_TOOLS_COMMIT \"${commit}\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.new" "${OUT}")
file(REMOVE "${OUT}.new")
