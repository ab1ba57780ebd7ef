// The source of xlens_test_headers, the object library that builds the tests' precompiled header
// (tests/CMakeLists.txt); the header is all it is for.
