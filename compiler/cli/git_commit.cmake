# Writes OUTPUT, a header defining XLENS_GIT_COMMIT as the commit SOURCE_DIR has checked out, and
# rewrites it only when that commit changed: run at every build, it costs one `git rev-parse`, and
# only bundle_command.cc (the one file that includes it) recompiles after a new commit.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(content "// The commit xlens was built from (written by compiler/cli/git_commit.cmake).\n#pragma once\n#define XLENS_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT content STREQUAL old)
  file(WRITE "${OUTPUT}" "${content}")
endif()
