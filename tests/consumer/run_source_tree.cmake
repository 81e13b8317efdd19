# Configures, builds and runs tests/consumer/source_tree against Tessera's
# source tree (MODE: subdirectory or fetchcontent). Any failing step fails the test.
# Debug, and only what the consumer links: the test is about the build's
# wiring, which the optimiser does not change, and it runs beside the suite.
file(REMOVE_RECURSE ${WORK_DIR})
foreach(step IN ITEMS configure build run)
  if(step STREQUAL "configure")
    set(cmd ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR}/source_tree -B ${WORK_DIR} -G Ninja
            -DMODE=${MODE} -DTESSERA_SOURCE_DIR=${TESSERA_SOURCE_DIR} -DCMAKE_BUILD_TYPE=Debug)
  elseif(step STREQUAL "build")
    set(cmd ${CMAKE_COMMAND} --build ${WORK_DIR} --target consumer)
  else()
    set(cmd ${WORK_DIR}/consumer)
  endif()
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${MODE} consumer: ${step} failed (${rc}): ${cmd}")
  endif()
endforeach()
