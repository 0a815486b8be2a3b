# Installs the library, the public header, a CMake package (find_package(ztier) ->
# ztier::ztier, ztier::ztier_static) and ztier.pc for pkg-config.
include(CMakePackageConfigHelpers)
if(ZT_CUDA_FAKE) # a build for checking the CUDA code, never one to install
  return()
endif()

install(TARGETS ztier ztier_static EXPORT ztierTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/api/ztier.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ztierTargets NAMESPACE ztier:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ztier)

set(ZT_CONFIG_MPI ${ZT_MPI})
set(ZT_CONFIG_CUDA ${ZT_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ztierConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ztierConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ztier)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ztierConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ztierConfig.cmake ${PROJECT_BINARY_DIR}/ztierConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ztier)

# pkg-config. Cflags carry only ztier's own include directory: ztier.h needs no MPI or CUDA
# header, so MPI/CUDA are private dependencies. They appear in Libs.private (what
# `pkg-config --static --libs` adds to link libztier.a), written as -L/-l flags from the
# libraries CMake found, never through Requires.private: pkg-config adds the Cflags of every
# Requires.private package to `--cflags`, which put Open MPI's include paths (ompi-c) into
# single-process consumers. The remaining Requires.private packages (jansson, liburing, numa,
# zlib) install their headers in the system include directory.
# No rpath in Libs: see docs/linking.md.
function(zt_pc_link_flags out)
  set(flags "")
  foreach(lib IN LISTS ARGN)
    if(lib STREQUAL "")
      continue()
    elseif(lib MATCHES "^-")
      list(APPEND flags "${lib}")
    elseif(IS_ABSOLUTE "${lib}")
      get_filename_component(dir "${lib}" DIRECTORY)
      get_filename_component(name "${lib}" NAME)
      if(name MATCHES "^lib(.+)\\.(so|a)$")
        if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES AND NOT "-L${dir}" IN_LIST flags)
          list(APPEND flags "-L${dir}")
        endif()
        list(APPEND flags "-l${CMAKE_MATCH_1}")
      else()
        list(APPEND flags "${lib}") # e.g. libfoo.so.1: pkg-config passes the path through
      endif()
    else()
      list(APPEND flags "-l${lib}")
    endif()
  endforeach()
  list(JOIN flags " " flags)
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

set(ZT_PC_REQUIRES_PRIVATE "jansson liburing numa zlib")
set(ZT_PC_PRIVATE_LIBS -lpthread -lm)
if(ZT_CUDA)
  # The kernels' host-side launch code is C++: a static link needs the C++ runtime too.
  if(CUDA_cudart_LIBRARY)
    list(APPEND ZT_PC_PRIVATE_LIBS ${CUDA_cudart_LIBRARY})
  else()
    list(APPEND ZT_PC_PRIVATE_LIBS -L${CUDAToolkit_LIBRARY_DIR} -lcudart)
  endif()
  list(APPEND ZT_PC_PRIVATE_LIBS stdc++)
endif()
if(ZT_NCCL)
  list(APPEND ZT_PC_PRIVATE_LIBS ${NCCL_LIB})
endif()
if(ZT_MPI)
  separate_arguments(ZT_PC_MPI_LINK_FLAGS UNIX_COMMAND "${MPI_C_LINK_FLAGS}")
  list(APPEND ZT_PC_PRIVATE_LIBS ${ZT_PC_MPI_LINK_FLAGS} ${MPI_C_LIBRARIES})
endif()
zt_pc_link_flags(ZT_PC_LIBS_PRIVATE ${ZT_PC_PRIVATE_LIBS})
# Relocatable: the prefix is found relative to the .pc file, so `cmake --install --prefix`
# anywhere gives a working ztier.pc.
file(RELATIVE_PATH ZT_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" ZT_PC_TO_PREFIX "${ZT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ztier.pc.in ${PROJECT_BINARY_DIR}/ztier.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ztier.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
