# Installs the built library into a scratch prefix and builds tests/consumer/main.cpp
# with nothing but `pkg-config --cflags --libs tessera`, then runs it.
file(REMOVE_RECURSE ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)
run(${CMAKE_COMMAND} --install ${TESSERA_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
set(ENV{PKG_CONFIG_PATH} ${WORK_DIR}/prefix/lib/pkgconfig)
run(pkg-config --cflags --libs tessera)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX} ${CONSUMER_SOURCE_DIR}/main.cpp -o ${WORK_DIR}/consumer ${flags})
run(${WORK_DIR}/consumer)
