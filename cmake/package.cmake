# `cpack -G DEB` in a build directory makes one Debian package per install
# component, installed under /usr:
#   libtessera-dev      headers, libtessera.a, the CMake package, pkg-config
#   libtessera-pq-dev   tessera::pq (libpq), where it was built
#   libtessera-tls-dev  tessera::tls (OpenSSL 3), where it was built
# Each depends on the Debian packages of what its static library links, and
# the two clients on the core package of the same version.
set(CPACK_PACKAGE_NAME libtessera-dev)
set(CPACK_PACKAGE_VENDOR "The Tessera Authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "C++20 user-space threading runtime: fibers, and primitives that park fibers and threads alike; tessera::testing, deterministic simulation of concurrent code")
set(CPACK_PACKAGE_CONTACT "The Tessera Authors <tessera@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL core)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)

set(CPACK_DEBIAN_CORE_PACKAGE_NAME libtessera-dev)
# Boost.Context, hwloc and liburing are linked by the static library;
# libbacktrace.a comes with GCC's runtime (libgcc-12-dev); the CMake package
# and the .pc file find hwloc and liburing with pkg-config.
set(CPACK_DEBIAN_CORE_PACKAGE_DEPENDS
    "libboost-context-dev (>= 1.74), libhwloc-dev, liburing-dev, libgcc-12-dev | libgcc-dev, pkg-config")
# Backtraces of parked fibers load libunwind at run time; without it, none.
set(CPACK_DEBIAN_CORE_PACKAGE_RECOMMENDS "libunwind8")
set(CPACK_COMPONENT_CORE_DESCRIPTION
    "C++20 user-space threading runtime: fibers, and primitives that park fibers and threads alike; tessera::testing, deterministic simulation of concurrent code")
foreach(opt IN ITEMS pq tls)
  if(TARGET tessera_${opt})
    list(APPEND CPACK_COMPONENTS_ALL ${opt})
    string(TOUPPER ${opt} OPT)
    set(CPACK_DEBIAN_${OPT}_PACKAGE_NAME libtessera-${opt}-dev)
    set(CPACK_DEBIAN_${OPT}_PACKAGE_SECTION libdevel)
  endif()
endforeach()
set(CPACK_DEBIAN_PQ_PACKAGE_DEPENDS "libtessera-dev (= ${PROJECT_VERSION}), libpq-dev")
set(CPACK_COMPONENT_PQ_DESCRIPTION "Tessera's PostgreSQL client (tessera::pq, over libpq)")
set(CPACK_DEBIAN_TLS_PACKAGE_DEPENDS "libtessera-dev (= ${PROJECT_VERSION}), libssl-dev (>= 3)")
set(CPACK_COMPONENT_TLS_DESCRIPTION "Tessera's TLS streams (tessera::tls, over OpenSSL 3)")
set(CPACK_GENERATOR DEB)
include(CPack)
