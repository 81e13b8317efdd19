# Makes the Debian packages with `cpack -G DEB` (libtessera-dev,
# libtessera-pq-dev, libtessera-tls-dev), checks their names, fields and
# contents, asks apt whether they would install here (`apt-get install -s`:
# every Depends resolved against the archive, nothing installed), unpacks them
# into a scratch root (dpkg-deb -x) and builds against it: the README example
# with find_package(tessera) and with pkg-config, and a program using
# tessera::pq and tessera::tls. Any failing step fails the test.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

# ships(PKG FILE...): fails unless PKG's file list (dpkg-deb -c) names each FILE.
function(ships pkg)
  foreach(want IN LISTS ARGN)
    string(FIND "${contents_${pkg}}" "${want}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${pkg} lacks ${want}:\n${contents_${pkg}}")
    endif()
  endforeach()
endfunction()

run(${CPACK_COMMAND} -G DEB --config ${TESSERA_BUILD_DIR}/CPackConfig.cmake -B ${WORK_DIR}/pkg)
set(all_debs "")
foreach(pkg IN ITEMS libtessera-dev libtessera-pq-dev libtessera-tls-dev)
  file(GLOB debs ${WORK_DIR}/pkg/${pkg}_*.deb)
  list(LENGTH debs n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "cpack made ${n} ${pkg}_*.deb files in ${WORK_DIR}/pkg, not one")
  endif()
  list(APPEND all_debs ${debs})
  run(dpkg-deb -f ${debs} Package Version Depends)
  if(NOT last_output MATCHES "Package: ${pkg}\n" OR NOT last_output MATCHES "Version: ${VERSION}\n")
    message(FATAL_ERROR "unexpected package fields of ${pkg}:\n${last_output}")
  endif()
  set(fields_${pkg} "${last_output}")
  run(dpkg-deb -c ${debs})
  set(contents_${pkg} "${last_output}")
  ships(${pkg} "usr/share/doc/${pkg}/copyright")
endforeach()

# What each package depends on is what its library links.
foreach(want IN ITEMS libboost-context-dev libhwloc-dev liburing-dev libgcc-12-dev)
  if(NOT fields_libtessera-dev MATCHES "${want}")
    message(FATAL_ERROR "libtessera-dev does not depend on ${want}:\n${fields_libtessera-dev}")
  endif()
endforeach()
foreach(pair IN ITEMS "libtessera-pq-dev:libpq-dev" "libtessera-tls-dev:libssl-dev")
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 pkg)
  list(GET pair 1 want)
  if(NOT fields_${pkg} MATCHES "${want}" OR NOT fields_${pkg} MATCHES "libtessera-dev \\(= ${VERSION}\\)")
    message(FATAL_ERROR "${pkg} does not depend on ${want} and libtessera-dev ${VERSION}:\n${fields_${pkg}}")
  endif()
endforeach()

# The core package: the public headers, the library, the build files; no
# private header (those beside sched/'s and sync/'s sources), no client.
ships(libtessera-dev "usr/include/tessera/tessera.h" "usr/include/tessera/version.h"
                     "usr/include/tessera/config.h" "usr/include/tessera/mutex.h"
                     "usr/include/tessera/detail/cpu.h" "libtessera.a" "tesseraConfig.cmake"
                     "tessera.pc" "usr/share/tessera/gdb/tessera-gdb.py")
foreach(unwanted IN ITEMS scheduler.h internal.h context.h stack.h trace.h poller.h
                          semaphore_errors.h pq.h tls.h)
  if(contents_libtessera-dev MATCHES "/${unwanted}\n")
    message(FATAL_ERROR "libtessera-dev ships ${unwanted}:\n${contents_libtessera-dev}")
  endif()
endforeach()
ships(libtessera-pq-dev "usr/include/tessera/pq.h" "libtessera_pq.a")
ships(libtessera-tls-dev "usr/include/tessera/tls.h" "libtessera_tls.a")

# Would they install on this Debian? apt resolves every Depends (simulated).
run(apt-get install -s ${all_debs})
foreach(deb IN LISTS all_debs)
  run(dpkg-deb -x ${deb} ${WORK_DIR}/root)
endforeach()

# CMake: find_package(tessera) from the unpacked root.
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR}/readme -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/root/usr -DREADME_EXAMPLE=${README_EXAMPLE}
    -DCLIENTS=${CONSUMER_SOURCE_DIR}/clients.cpp -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/readme_example)
string(STRIP "${last_output}" got)
if(NOT got STREQUAL "5050")
  message(FATAL_ERROR "the README example printed '${got}', not 5050")
endif()
run(${WORK_DIR}/build/clients)
string(STRIP "${last_output}" got)
if(NOT got STREQUAL "2")
  message(FATAL_ERROR "the pq and tls program printed '${got}', not 2")
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
message(STATUS "libtessera-dev, -pq-dev, -tls-dev: apt would install them; "
               "built and ran the README example (CMake, pkg-config) and the clients program")
