# Test binaries. Each prints one line per case and ends with "N passed, N failed".
# scripts/run_tests.sh prepares the data they need (node tests, models) and runs ctest.
add_executable(node_tests tests/ops/node_tests.c)
target_compile_options(node_tests PRIVATE ${ORCH_WARNINGS} -Wno-format-truncation)
target_link_libraries(node_tests PRIVATE orch_core)
add_test(NAME onnx_node_tests
         COMMAND node_tests ${CMAKE_BINARY_DIR}/node_data --xfail ${CMAKE_SOURCE_DIR}/tests/ops/node_expected_failures.txt)

# Unit tests by what they need: tests/unit/core (the pipeline, every target through its
# interface), tests/unit/cpu (the C target's emitters), tests/unit/cuda (the CUDA target: NVRTC
# without a GPU, everything on one). tests/unit/*/test_NAME.c → build/tests/unit_NAME, linked
# with the library; shared helpers (check.h, the graph builders) are in tests/unit.
file(GLOB ORCH_UNIT_TESTS CONFIGURE_DEPENDS tests/unit/*/test_*.c)
foreach(src ${ORCH_UNIT_TESTS})
  get_filename_component(base ${src} NAME_WE)
  string(REPLACE "test_" "unit_" name ${base})
  add_executable(${name} ${src})
  target_compile_options(${name} PRIVATE ${ORCH_WARNINGS} -Wno-format-truncation)
  target_include_directories(${name} PRIVATE tests/unit)
  target_link_libraries(${name} PRIVATE orch_core)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name})
endforeach()
add_test(NAME onnx_node_tests_prims
         COMMAND node_tests ${CMAKE_BINARY_DIR}/node_data --engine prims --xfail ${CMAKE_SOURCE_DIR}/tests/ops/node_expected_failures.txt)
add_test(NAME op_cases
         COMMAND node_tests ${CMAKE_BINARY_DIR}/op_cases --xfail ${CMAKE_SOURCE_DIR}/tests/ops/op_cases_expected_failures.txt)
add_test(NAME op_cases_prims
         COMMAND node_tests ${CMAKE_BINARY_DIR}/op_cases --engine prims --xfail ${CMAKE_SOURCE_DIR}/tests/ops/op_cases_expected_failures.txt)
# The NaN, infinity and signed-zero cases (docs/numerics.md) on the two engines left: compiled
# for the CPU target, and the plan engine (orch run --engine plan, through the project venv).
add_test(NAME op_cases_nan_compiled
         COMMAND node_tests ${CMAKE_BINARY_DIR}/op_cases --engine compiled --filter test_nan_ --xfail ${CMAKE_SOURCE_DIR}/tests/ops/op_cases_expected_failures.txt)
add_test(NAME op_cases_nan_plan
         COMMAND ${CMAKE_SOURCE_DIR}/.venv/bin/python ${CMAKE_SOURCE_DIR}/tests/ops/run_cases_cli.py $<TARGET_FILE:orch> ${CMAKE_BINARY_DIR}/op_cases --engine plan --filter test_nan_)
# The CUDA target's kernels for every generated test model, compiled with NVRTC for sm_80 and
# sm_90a (compile only; skips without NVRTC). scripts/run_tests.sh runs it on build/models.
add_test(NAME cugen_models COMMAND unit_cugen_models ${CMAKE_BINARY_DIR}/models)
# The protobuf codec against Google's protobuf on tests/unit/core/gen_pb_fixtures.py's messages
# (scripts/run_tests.sh writes them to build/pb_fixtures).
add_test(NAME pb_codec_fixtures COMMAND unit_pb_codec ${CMAKE_BINARY_DIR}/pb_fixtures)
