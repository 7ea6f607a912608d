# Fails when a Google Test listing shows a parameter as raw bytes ("GetParam() = 80-byte object
# <B0-98 ...>"): ctest names discovered cases after that text, and failure lines repeat it, so every
# struct that parameterizes a suite needs a PrintTo that names the case.
# Usage: cmake -DTESTS="test_a|test_b|..." -P check_test_names.cmake
string(REPLACE "|" ";" executables "${TESTS}")
list(LENGTH executables count)
if(count EQUAL 0)
  message(FATAL_ERROR "check_test_names: no test executables given")
endif()
set(parameterized 0)
foreach(exe IN LISTS executables)
  get_filename_component(name "${exe}" NAME)
  execute_process(COMMAND "${exe}" --gtest_list_tests OUTPUT_VARIABLE listing ERROR_VARIABLE errors
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(SEND_ERROR "${name} --gtest_list_tests exited with ${status}: ${errors}")
    continue()
  endif()
  string(REGEX MATCHALL "GetParam\\(\\) = [^\n]*" params "${listing}")
  list(LENGTH params n)
  math(EXPR parameterized "${parameterized} + ${n}")
  string(REGEX MATCHALL "[^\n]*GetParam\\(\\) = [^\n]*-byte object[^\n]*" unnamed "${listing}")
  foreach(line IN LISTS unnamed)
    string(STRIP "${line}" line)
    message(SEND_ERROR "${name}: a parameter without PrintTo: ${line}")
  endforeach()
endforeach()
message(STATUS "${count} test executables listed, ${parameterized} parameterized cases")
