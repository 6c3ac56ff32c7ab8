# cmake/install.cmake: installs the public headers and the libraries, and
# exports the CMake package `adacomp` so that a consumer's
#   find_package(adacomp) + target_link_libraries(app PRIVATE adacomp::adacomp)
# works. Included at the end of the top-level CMakeLists.txt, after every
# layer's add_subdirectory. Everything here is in the install component
# `adacomp_dev` (`cmake --install build --component adacomp_dev`); the
# program is in `adacomp_tool`.
#
# Also adds the ctests `adacomp_install_consumer` and `readme_cpp_example`:
# each installs into a temporary prefix and builds and runs a small project
# against it (tests/consumer; README.md's C++ example, examples/cpp).

include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

if(NOT TARGET adacomp_core)
  message(WARNING "cmake/install.cmake: adacomp_core is not defined; nothing to install")
  return()
endif()

set(ADACOMP_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/adacomp)
set(_adacomp_export_libs adacomp_core)
if(TARGET adacomp_comm)
  list(APPEND _adacomp_export_libs adacomp_comm)
  get_target_property(_name adacomp_comm EXPORT_NAME)
  if(NOT _name)
    set_target_properties(adacomp_comm PROPERTIES EXPORT_NAME comm)
  endif()
endif()
if(TARGET adacomp_exchange)
  list(APPEND _adacomp_export_libs adacomp_exchange)
endif()
get_target_property(_name adacomp_core EXPORT_NAME)
if(NOT _name)
  set_target_properties(adacomp_core PROPERTIES EXPORT_NAME core)
endif()

# adacomp::adacomp: one target that brings in every installed library.
add_library(adacomp_package INTERFACE)
set_target_properties(adacomp_package PROPERTIES EXPORT_NAME adacomp)
target_link_libraries(adacomp_package INTERFACE ${_adacomp_export_libs})
target_include_directories(adacomp_package INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
if(NOT TARGET adacomp::adacomp)
  add_library(adacomp::adacomp ALIAS adacomp_package)
endif()

# The config must find whatever imported targets the libraries link (a static
# library carries even its private link dependencies).
set(ADACOMP_CONFIG_DEPENDENCIES "")
set(_adacomp_deps "")
foreach(lib IN LISTS _adacomp_export_libs)
  get_target_property(_links ${lib} LINK_LIBRARIES)
  get_target_property(_ilinks ${lib} INTERFACE_LINK_LIBRARIES)
  foreach(dep IN LISTS _links _ilinks)
    if(dep MATCHES "^Threads::")
      list(APPEND _adacomp_deps "find_dependency(Threads)")
    elseif(dep MATCHES "^ZLIB::")
      list(APPEND _adacomp_deps "find_dependency(ZLIB)")
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _adacomp_deps)
string(REPLACE ";" "\n" ADACOMP_CONFIG_DEPENDENCIES "${_adacomp_deps}")

install(TARGETS ${_adacomp_export_libs} adacomp_package
  EXPORT adacompTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT adacomp_dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT adacomp_dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT adacomp_dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Headers of libraries that are not part of the package (the LibTorch
# trainer, the MPI communicator) are left out: a consumer could not link them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/adacomp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT adacomp_dev
  FILES_MATCHING PATTERN "*.h"
  PATTERN "trainer.h" EXCLUDE
  PATTERN "mpi_communicator.h" EXCLUDE)
install(EXPORT adacompTargets
  NAMESPACE adacomp::
  DESTINATION ${ADACOMP_INSTALL_CMAKEDIR}
  COMPONENT adacomp_dev)

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/adacompConfig.cmake.in
  ${PROJECT_BINARY_DIR}/adacompConfig.cmake
  INSTALL_DESTINATION ${ADACOMP_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/adacompConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/adacompConfig.cmake
  ${PROJECT_BINARY_DIR}/adacompConfigVersion.cmake
  DESTINATION ${ADACOMP_INSTALL_CMAKEDIR}
  COMPONENT adacomp_dev)

if(ADACOMP_BUILD_TESTS)
  add_test(NAME adacomp_install_consumer
    COMMAND ${CMAKE_COMMAND}
      -DBUILD_DIR=${PROJECT_BINARY_DIR}
      -DCONSUMER_SOURCE_DIR=${PROJECT_SOURCE_DIR}/tests/consumer
      -DWORK_DIR=${PROJECT_BINARY_DIR}/consumer_test
      -DGENERATOR=${CMAKE_GENERATOR}
      -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
      -DCONFIG=$<CONFIG>
      -P ${PROJECT_SOURCE_DIR}/tests/consumer/run_consumer_test.cmake)
  # README.md's C++ example (examples/cpp/quickstart.cc, byte for byte),
  # built and run against the installed package the same way.
  add_test(NAME readme_cpp_example
    COMMAND ${CMAKE_COMMAND}
      -DREADME=${PROJECT_SOURCE_DIR}/README.md
      -DEXAMPLE_DIR=${PROJECT_SOURCE_DIR}/examples/cpp
      -DBUILD_DIR=${PROJECT_BINARY_DIR}
      -DWORK_DIR=${PROJECT_BINARY_DIR}/readme_cpp_example
      -DGENERATOR=${CMAKE_GENERATOR}
      -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
      -DCONFIG=$<CONFIG>
      -P ${PROJECT_SOURCE_DIR}/tests/consumer/run_readme_example.cmake)
  # Both install into their own prefix from the same build tree (and its
  # install manifest): one at a time.
  set_tests_properties(adacomp_install_consumer readme_cpp_example PROPERTIES
    TIMEOUT 120 LABELS install RESOURCE_LOCK adacomp_install)
endif()
