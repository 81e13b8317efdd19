# run(<command> [args...]): one step of a consumer test. Runs the command
# (at most 300 s); fails the test, showing the command and its output, if it
# does not exit 0; otherwise leaves its standard output in `last_output`.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer step failed (${rc}): ${ARGN}\n${out}${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
