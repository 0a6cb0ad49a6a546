# Test binaries. Each prints one line per case and ends with "N passed, N failed".
# scripts/run_tests.sh prepares the data they need (node tests, models) and runs ctest.
add_executable(node_tests tests/ops/node_tests.c)
target_compile_options(node_tests PRIVATE ${ORCH_WARNINGS} -Wno-format-truncation)
target_link_libraries(node_tests PRIVATE orch_core)
add_test(NAME onnx_node_tests
         COMMAND node_tests ${CMAKE_BINARY_DIR}/node_data --xfail ${CMAKE_SOURCE_DIR}/tests/ops/node_expected_failures.txt)
