# `cpack -G DEB` in a build directory makes libtessera-dev_<version>_<arch>.deb:
# the headers, the static library, the CMake package and the pkg-config file,
# installed under /usr. Its dependencies are the Debian packages of what the
# static library links.
set(CPACK_PACKAGE_NAME libtessera-dev)
set(CPACK_PACKAGE_VENDOR "Tessera")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "C++20 user-space threading runtime: fibers, and primitives that park fibers and threads alike")
set(CPACK_PACKAGE_CONTACT "Tessera developers <tessera@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libboost-context-dev (>= 1.74), libhwloc-dev, liburing-dev, pkg-config")
# Backtraces of parked fibers load libunwind at run time; without it, none.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libunwind8")
set(CPACK_GENERATOR DEB)
include(CPack)
