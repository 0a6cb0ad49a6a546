# Test registration; every test binary prints one line per case and ends with
# "N passed, N failed". Python-driven suites are registered by scripts/run_tests.sh.
