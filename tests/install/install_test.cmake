# ctest driver: install the built tree into a scratch prefix, then configure, build and run the
# consumer project against it with find_package(posenc). Arguments: -DBUILD_DIR -DSOURCE_DIR
# -DWORK_DIR -DCXX.
file(REMOVE_RECURSE "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer" -B "${WORK_DIR}/build" -G Ninja
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
# The Python package, when built: importable from the prefix alone, and it is the installed one.
if(PYTHON AND PYTHON_DIR)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${WORK_DIR}/prefix/${PYTHON_DIR}" ${PYTHON} -c
            "import posenc; print(posenc.__file__); print(posenc.RopeSpec.preset('llama-2-7b').frequencies('hf').inv_freq[1])"
    WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^${WORK_DIR}/prefix/${PYTHON_DIR}/posenc/__init__.py")
    message(FATAL_ERROR "the installed Python package does not import from the prefix (${rc})")
  endif()
endif()
