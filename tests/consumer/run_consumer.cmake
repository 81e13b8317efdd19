# Installs the built library into a scratch prefix, then configures, builds and
# runs the consumer project against it. Any failing step fails the test.
# The consumer is built in the other build type from the library's checks
# (Debug against a library without checks, Release against one with them):
# tessera/config.h must keep the two in agreement. A consumer that defines
# TESSERA_CHECKS to the other value must be rejected at compile time.
file(REMOVE_RECURSE ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)
if(LIBRARY_CHECKS)
  set(build_type Release)
  set(mismatched 0)
else()
  set(build_type Debug)
  set(mismatched 1)
endif()
# CONSUMER_CXX: the consumer's compiler, when not the library's (consumer_clang).
set(compiler)
if(CONSUMER_CXX)
  set(compiler -DCMAKE_CXX_COMPILER=${CONSUMER_CXX})
endif()
run(${CMAKE_COMMAND} --install ${TESSERA_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build ${compiler}
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=${build_type}
    -DMISMATCHED_CHECKS=${mismatched})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
run(${WORK_DIR}/build/consumer_simulation)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build --target consumer_mismatch
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "TESSERA_CHECKS differs from the value")
  message(FATAL_ERROR "a consumer defining TESSERA_CHECKS=${mismatched} against a library "
                      "built the other way was not rejected (rc ${rc}):\n${out}${err}")
endif()
message(STATUS "consumer with TESSERA_CHECKS=${mismatched} rejected, as it should be")
