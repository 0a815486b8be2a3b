# zt_cuda_sources(<target> <files.cu...>): the target's CUDA sources. With nvcc they are
# CUDA sources; with ZT_CUDA_FAKE each is rewritten into host C++ at configure time
# (cudasim/rewrite.cmake; an edit of the .cu re-runs CMake) and compiled against the
# stand-in, with the same rounding rule as nvcc's --fmad=false.
include(${CMAKE_CURRENT_LIST_DIR}/../cudasim/rewrite.cmake)

function(zt_cuda_sources target)
  foreach(cu IN LISTS ARGN)
    get_filename_component(abs ${cu} ABSOLUTE)
    if(NOT ZT_CUDA_FAKE)
      target_sources(${target} PRIVATE ${abs})
      continue()
    endif()
    get_filename_component(name ${cu} NAME_WE)
    set(cc ${CMAKE_CURRENT_BINARY_DIR}/cudasim/${name}.cu.cc)
    zt_cudasim_rewrite(${abs} ${cc})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${abs})
    target_sources(${target} PRIVATE ${cc})
    set(options -std=c++20 -Wall -Wextra ${ZT_WERROR_FLAG} -ffp-contract=off)
    set_source_files_properties(${cc} TARGET_DIRECTORY ${target} PROPERTIES
      COMPILE_OPTIONS "${options}")
  endforeach()
endfunction()
