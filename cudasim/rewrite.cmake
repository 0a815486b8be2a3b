# zt_cudasim_rewrite(<in.cu> <out.cc>): a .cu file as host C++ for the stand-in.
#   kernel<<<grid, block, shared, stream>>>(args)
#     -> ::cudasim::launcher(kernel, "kernel")(grid, block, shared, stream)(args)
#   __shared__ T a[N], b[M];
#     -> static thread_local ::cudasim::Shared<T, (N)> a{"a"}; ... (checked: races between
#        barriers and reads of what the block never wrote are findings)
#   extern __shared__ T name[];  ->  T *name = static_cast<T *>(::cudasim::dynamic_shared());
# and cudasim_kernel.h first. Other __shared__ declarations keep the macro's plain storage.
# Lines keep their numbers (#line), so compiler messages and sanitizer stacks name the .cu
# file and its lines. The output is rewritten only when it changes.

# One `__shared__ ...;` declaration (without the keyword and the `;`) as checked arrays, or
# empty when it is not a list of one-dimensional arrays.
function(zt_cudasim_shared_decl body out)
  set(${out} "" PARENT_SCOPE)
  if(NOT body MATCHES "^[ \t\r\n]*((unsigned[ \t]+|signed[ \t]+|long[ \t]+|short[ \t]+)*[A-Za-z_][A-Za-z0-9_:]*)[ \t\r\n]+(.*)$")
    return()
  endif()
  set(type "${CMAKE_MATCH_1}")
  string(REPLACE "," ";" decls "${CMAKE_MATCH_3}")
  set(text "")
  foreach(d IN LISTS decls)
    if(NOT d MATCHES "^[ \t\r\n]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\\[([^]]+)\\][ \t\r\n]*$")
      return()
    endif()
    string(APPEND text "static thread_local ::cudasim::Shared<${type}, (${CMAKE_MATCH_2})> ${CMAKE_MATCH_1}{\"${CMAKE_MATCH_1}\"}@ZTSEMI@ ")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(zt_cudasim_rewrite in out)
  file(READ "${in}" src)
  string(REPLACE ";" "@ZTSEMI@" src "${src}") # CMake lists split on ';'
  string(REGEX REPLACE
    "extern[ \t]+__shared__[ \t]+([A-Za-z_][A-Za-z0-9_:]*)[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*\\[[ \t]*\\][ \t]*@ZTSEMI@"
    "\\1 *\\2 = static_cast<\\1 *>(::cudasim::dynamic_shared())@ZTSEMI@" src "${src}")
  string(REGEX MATCHALL "__shared__[ \t\r\n][^@]*@ZTSEMI@" decls "${src}")
  foreach(decl IN LISTS decls)
    string(REGEX REPLACE "^__shared__(.*)@ZTSEMI@$" "\\1" body "${decl}")
    zt_cudasim_shared_decl("${body}" checked)
    if(checked)
      string(REGEX REPLACE "[^\n]" "" newlines "${decl}") # keep the line count
      string(REPLACE "${decl}" "${checked}${newlines}" src "${src}")
    endif()
  endforeach()
  string(REGEX REPLACE "([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*<<<" "::cudasim::launcher(\\1, \"\\1\")(" src "${src}")
  string(REPLACE ">>>" ")" src "${src}")
  string(REPLACE "@ZTSEMI@" ";" src "${src}")
  file(WRITE "${out}.tmp" "#include \"cudasim_kernel.h\"\n#line 1 \"${in}\"\n${src}")
  file(COPY_FILE "${out}.tmp" "${out}" ONLY_IF_DIFFERENT)
  file(REMOVE "${out}.tmp")
endfunction()
