# Debian packages, split as NVIDIA splits NCCL (runtime libnccl2, headers and
# link-time files in libnccl-dev):
#   libweft-nccl2     the Runtime component: the library and the tools
#   libweft-nccl-dev  the Development component: headers, link names, CMake
#                     and pkg-config files; depends on the same libweft-nccl2
# Both install under /opt/weft. NVIDIA's packages own /usr/include/nccl.h and
# /usr/lib/<arch>/libnccl.so*, so the two never share a path: both can be
# installed, and a program chooses Weft by LD_LIBRARY_PATH, its run path, or
# its -I/-L (README). The names are not NVIDIA's (libnccl2, libnccl-dev), so
# apt never takes one for an upgrade of the other.
#   cpack -B build/packages --config build/CPackConfig.cmake
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME weft)
set(CPACK_PACKAGE_VENDOR "The Weft authors")
set(CPACK_PACKAGE_CONTACT "The Weft authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Collective communication for GPUs and CPUs through the NCCL API")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /opt/weft)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL Runtime Development)
set(CPACK_COMPONENT_DEVELOPMENT_DEPENDS Runtime)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libweft-nccl2)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "Weft: the NCCL API (libnccl.so.2, NCCL ${WEFT_NCCL_VERSION}) on GPUs and CPUs
 Weft's library under NCCL's names (SONAME libnccl.so.2) in /opt/weft/lib, and
 the tools weft-demo, weft-perf, weft-topo, weft-params, weft-sim and weft-tune in /opt/weft/bin.")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libweft-nccl-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
    "Weft: development files for the NCCL API
 nccl.h and weft.h, the link names libnccl.so and libweft.so, CMake packages
 (find_package(NCCL), find_package(Weft)) and pkg-config files (nccl, weft),
 all under /opt/weft.")
# Dependencies on system libraries from dpkg-shlibdeps; the tools' need for
# libnccl.so.2 is met inside the package itself.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
include(CPack)
