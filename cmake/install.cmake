# Installs the library, the public header, a CMake package (find_package(ztier) ->
# ztier::ztier, ztier::ztier_static) and ztier.pc for pkg-config.
include(CMakePackageConfigHelpers)

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

# pkg-config: the private requirements let `pkg-config --static` link libztier.a.
set(ZT_PC_REQUIRES_PRIVATE "jansson liburing numa zlib")
set(ZT_PC_LIBS_PRIVATE "-lpthread -lm")
if(ZT_MPI)
  string(APPEND ZT_PC_REQUIRES_PRIVATE " ompi-c")
endif()
if(ZT_CUDA)
  string(APPEND ZT_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lstdc++")
endif()
if(ZT_NCCL)
  string(APPEND ZT_PC_LIBS_PRIVATE " -lnccl")
endif()
# Relocatable: the prefix is found relative to the .pc file, so `cmake --install --prefix`
# anywhere gives a working ztier.pc.
file(RELATIVE_PATH ZT_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ztier.pc.in ${PROJECT_BINARY_DIR}/ztier.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ztier.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
