# ctest readme_cpp_example: the first ```cpp block of README.md must be
# examples/cpp/quickstart.cc byte for byte; it is then built against an
# installed adacomp with examples/cpp/CMakeLists.txt, the way a user would
# (run_consumer_test.cmake), run, and its exit code and last line checked.
# Inputs: README, EXAMPLE_DIR, and those of run_consumer_test.cmake but
# CONSUMER_SOURCE_DIR (BUILD_DIR, WORK_DIR, GENERATOR, CXX_COMPILER, CONFIG).
cmake_minimum_required(VERSION 3.20)

file(READ "${README}" readme)
string(FIND "${readme}" "```cpp\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "${README} has no ```cpp block")
endif()
math(EXPR begin "${open} + 7")
string(SUBSTRING "${readme}" ${begin} -1 rest)
string(FIND "${rest}" "\n```" close)
if(close EQUAL -1)
  message(FATAL_ERROR "${README}: the first ```cpp block is not closed")
endif()
math(EXPR length "${close} + 1")
string(SUBSTRING "${rest}" 0 ${length} block)

file(READ "${EXAMPLE_DIR}/quickstart.cc" example)
if(NOT block STREQUAL example)
  message(FATAL_ERROR "README.md's first ```cpp block is not ${EXAMPLE_DIR}/quickstart.cc: "
                      "copy the file's text into the block (or the block into the file)")
endif()

set(root "${WORK_DIR}")
set(source "${root}/source")
file(REMOVE_RECURSE "${root}")
file(WRITE "${source}/quickstart.cc" "${block}")
configure_file("${EXAMPLE_DIR}/CMakeLists.txt" "${source}/CMakeLists.txt" COPYONLY)

set(CONSUMER_SOURCE_DIR "${source}")
set(WORK_DIR "${root}/consumer")
set(EXE quickstart)
set(EXPECT "the same average everywhere: yes\n$")
include("${CMAKE_CURRENT_LIST_DIR}/run_consumer_test.cmake")
file(REMOVE_RECURSE "${root}")
