# ctest adacomp_install_consumer: installs adacomp (component adacomp_dev)
# into a temporary prefix, then configures, builds and runs tests/consumer
# against that prefix only. run_readme_example.cmake runs it on README.md's
# C++ example.
# Inputs: BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR, GENERATOR, CXX_COMPILER, CONFIG;
# optional: EXE (the program the project builds, default consumer) and
# EXPECT (a regular expression its output must match, default "consumer OK").
cmake_minimum_required(VERSION 3.20)

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

if(NOT CONFIG)
  set(CONFIG Release)
endif()
if(NOT EXE)
  set(EXE consumer)
endif()
if(NOT DEFINED EXPECT)
  set(EXPECT "consumer OK")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

run_step("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}"
         --component adacomp_dev --config ${CONFIG})
if(NOT EXISTS "${prefix}/include/adacomp/codec.h")
  message(FATAL_ERROR "install: ${prefix}/include/adacomp/codec.h is missing")
endif()
file(GLOB_RECURSE config_files "${prefix}/*/adacompConfig.cmake")
if(NOT config_files)
  message(FATAL_ERROR "install: no adacompConfig.cmake under ${prefix}")
endif()

run_step("configure consumer" ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build"
         -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run_step("build consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build" --config ${CONFIG})

set(exe "${WORK_DIR}/build/${EXE}")
if(NOT EXISTS "${exe}")
  set(exe "${WORK_DIR}/build/${CONFIG}/${EXE}")
endif()
run_step("run ${EXE}" "${exe}")
message(STATUS "${step_output}")
if(NOT step_output MATCHES "${EXPECT}")
  message(FATAL_ERROR "${EXE}'s output does not match '${EXPECT}': ${step_output}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
