# Makes the Debian package with `cpack -G DEB`, checks its name and contents,
# unpacks it into a scratch root (dpkg-deb -x: nothing is installed on the
# machine) and builds the README example against it twice — with
# find_package(tessera) and with pkg-config — and runs both. Any failing step
# fails the test.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

run(${CPACK_COMMAND} -G DEB --config ${TESSERA_BUILD_DIR}/CPackConfig.cmake -B ${WORK_DIR}/pkg)
file(GLOB debs ${WORK_DIR}/pkg/libtessera-dev_*.deb)
list(LENGTH debs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "cpack made ${n} libtessera-dev_*.deb files in ${WORK_DIR}/pkg, not one")
endif()
run(dpkg-deb -f ${debs} Package Version Depends)
if(NOT last_output MATCHES "Package: libtessera-dev" OR NOT last_output MATCHES "Version: ${VERSION}"
   OR NOT last_output MATCHES "libhwloc-dev")
  message(FATAL_ERROR "unexpected package fields:\n${last_output}")
endif()
run(dpkg-deb -c ${debs})
foreach(want IN ITEMS "usr/include/tessera/tessera.h" "usr/include/tessera/version.h"
                      "usr/include/tessera/config.h" "libtessera.a" "tesseraConfig.cmake"
                      "tessera.pc" "usr/share/tessera/gdb/tessera-gdb.py")
  string(FIND "${last_output}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the package lacks ${want}:\n${last_output}")
  endif()
endforeach()
run(dpkg-deb -x ${debs} ${WORK_DIR}/root)

# CMake: find_package(tessera) from the unpacked root.
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR}/readme -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/root/usr -DREADME_EXAMPLE=${README_EXAMPLE}
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/readme_example)
string(STRIP "${last_output}" got)
if(NOT got STREQUAL "5050")
  message(FATAL_ERROR "the README example printed '${got}', not 5050")
endif()

# pkg-config from the unpacked root.
file(GLOB_RECURSE pcs ${WORK_DIR}/root/tessera.pc)
list(GET pcs 0 pc)
get_filename_component(pcdir ${pc} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pcdir})
run(pkg-config --cflags --libs tessera)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX} -O2 ${README_EXAMPLE} -o ${WORK_DIR}/readme_pc ${flags})
run(${WORK_DIR}/readme_pc)
string(STRIP "${last_output}" got)
if(NOT got STREQUAL "5050")
  message(FATAL_ERROR "the README example (pkg-config) printed '${got}', not 5050")
endif()
message(STATUS "libtessera-dev: built and ran the README example with CMake and pkg-config")
