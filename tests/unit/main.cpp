// The Catch2 main for llmc_unit_tests; the tests are the other files here.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
