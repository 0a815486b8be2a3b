# Installs the library, its backend modules (libztier-cuda.so, -nccl.so, -mpi.so, beside
# libztier.so: core/module.h), the public header, a CMake package (find_package(ztier) ->
# ztier::ztier; with COMPONENTS static also ztier::ztier_static) and pkg-config files
# (ztier.pc for libztier.so, ztier-static.pc for libztier.a). What the shared route installs
# needs nothing but ztier itself: a machine with only the runtime libraries of jansson,
# liburing, numa and zlib compiles and links against it.
include(CMakePackageConfigHelpers)
if(ZT_CUDA_FAKE) # a build for checking the CUDA code, never one to install
  return()
endif()

install(TARGETS ztier EXPORT ztierTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ztier_static EXPORT ztierStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(ZT_MODULES) # found beside libztier.so first; they find libztier.so.<major> beside themselves
  set_target_properties(${ZT_MODULES} PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS ${ZT_MODULES} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(FILES ${PROJECT_SOURCE_DIR}/api/ztier.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ztierTargets NAMESPACE ztier:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ztier)
# Read by ztierConfig.cmake only for COMPONENTS static, after it has found the dependencies
# its imported target names (PkgConfig::JANSSON, MPI::MPI_C, CUDA::cudart, ...).
install(EXPORT ztierStaticTargets NAMESPACE ztier::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ztier)

set(ZT_CONFIG_MPI ${ZT_MPI})
# The pkg-config modules ztier::ztier_static links (VAR:module), as ZT_BASE_LIBS names them.
set(ZT_CONFIG_PC_DEPS "JANSSON:jansson URING:liburing NUMA:numa ZLIB:zlib")
if(ISAL_FOUND)
  string(APPEND ZT_CONFIG_PC_DEPS " ISAL:libisal")
endif()
set(ZT_CONFIG_CUDA ${ZT_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ztierConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ztierConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ztier)
# Semantic versions (docs/abi.md): any 1.y satisfies find_package(ztier 1.x) with y >= x.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ztierConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ztierConfig.cmake ${PROJECT_BINARY_DIR}/ztierConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ztier)

# pkg-config. ztier.pc (libztier.so) has no Requires or Libs.private at all: pkgconf resolves
# every Requires.private package even for --cflags, so those would make the -dev packages of
# jansson, liburing, numa and zlib a requirement for compiling against ztier.h, which needs
# none of them (libztier.so records its own dependencies; the CUDA/NCCL/MPI ones are its
# modules'). ztier-static.pc (libztier.a) carries what the archive needs: Requires of those four
# and, in Libs, MPI, the CUDA runtime, NCCL and libstdc++ as -L/-l flags from the libraries CMake
# found, never through Requires: pkg-config adds the Cflags of every required package to
# `--cflags`, which put Open MPI's include paths (ompi-c) into consumers' compile lines.
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

set(ZT_PC_STATIC_REQUIRES "jansson liburing numa zlib")
if(ISAL_FOUND)
  string(APPEND ZT_PC_STATIC_REQUIRES " libisal")
endif()
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
zt_pc_link_flags(ZT_PC_STATIC_LIBS ${ZT_PC_PRIVATE_LIBS})
# Relocatable: the prefix is found relative to the .pc file, so `cmake --install --prefix`
# anywhere gives a working ztier.pc.
file(RELATIVE_PATH ZT_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" ZT_PC_TO_PREFIX "${ZT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ztier.pc.in ${PROJECT_BINARY_DIR}/ztier.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/ztier-static.pc.in ${PROJECT_BINARY_DIR}/ztier-static.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ztier.pc ${PROJECT_BINARY_DIR}/ztier-static.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
