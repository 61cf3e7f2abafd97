# The install tree, in two components that become the two Debian packages
# (cmake/WeftPackage.cmake):
#   Runtime:     lib/libnccl.so.<NCCL version> and its SONAME link libnccl.so.2,
#                bin/weft-{demo,perf,topo,params}, share/doc/weft/LICENSE
#   Development: include/{nccl.h,weft.h}, lib/libnccl.so and lib/libweft.so
#                (links for -lnccl and -lweft), lib/cmake/{Weft,NCCL}/,
#                lib/pkgconfig/{nccl,weft}.pc
# Every file and link is installed by an install() rule, so install_manifest.txt
# lists everything `cmake --install` writes.
include(CMakePackageConfigHelpers)

install(TARGETS weft EXPORT WeftTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development)
# The link made next to the library when it was built (src/CMakeLists.txt);
# install(FILES) copies a link as a link.
install(FILES ${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/libweft.so DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development)
install(FILES ${PROJECT_SOURCE_DIR}/include/nccl.h ${PROJECT_SOURCE_DIR}/include/weft.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT Runtime)

# Tools find the library next to them wherever the tree is put (a prefix, an
# unpacked .deb): bin/../lib, through a run path relative to the binary.
set(WEFT_TOOLS weft-demo weft-perf weft-topo weft-params weft-sim weft-tune)
file(RELATIVE_PATH _weft_bin_to_lib /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})
set_target_properties(${WEFT_TOOLS} PROPERTIES INSTALL_RPATH "$ORIGIN/${_weft_bin_to_lib}")
install(TARGETS ${WEFT_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)

# CMake packages: find_package(Weft) gives Weft::weft; find_package(NCCL)
# gives NCCL::NCCL (the same library) and the variables FindNCCL modules set.
set(_weft_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake)
install(EXPORT WeftTargets NAMESPACE Weft:: DESTINATION ${_weft_cmake_dir}/Weft COMPONENT Development)
foreach(_pkg Weft NCCL)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/package/${_pkg}Config.cmake.in
                                ${PROJECT_BINARY_DIR}/package/${_pkg}Config.cmake
                                INSTALL_DESTINATION ${_weft_cmake_dir}/${_pkg}
                                PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
endforeach()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/WeftConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
# find_package(NCCL 2.18) is satisfied; find_package(NCCL 2.28) is not.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/NCCLConfigVersion.cmake
                                 VERSION ${WEFT_NCCL_VERSION} COMPATIBILITY SameMajorVersion)
foreach(_pkg Weft NCCL)
  install(FILES ${PROJECT_BINARY_DIR}/package/${_pkg}Config.cmake ${PROJECT_BINARY_DIR}/package/${_pkg}ConfigVersion.cmake
          DESTINATION ${_weft_cmake_dir}/${_pkg} COMPONENT Development)
endforeach()

# pkg-config: nccl.pc (-lnccl) and weft.pc (-lweft, Weft's own version).
# Paths are relative to the .pc file, so an unpacked or moved tree works.
file(RELATIVE_PATH _weft_pc_to_prefix /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" _weft_pc_to_prefix "${_weft_pc_to_prefix}")
foreach(_pc nccl weft)
  if(_pc STREQUAL "nccl")
    set(WEFT_PC_VERSION ${WEFT_NCCL_VERSION})
  else()
    set(WEFT_PC_VERSION ${PROJECT_VERSION})
  endif()
  set(WEFT_PC_NAME ${_pc})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/package/weft.pc.in ${PROJECT_BINARY_DIR}/package/${_pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/package/${_pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT Development)
endforeach()
