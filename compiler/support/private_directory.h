// A directory that only this user can write to: where a cache keeps what this process will trust
// on a later run (compiled code, measurements). Whoever can write there could plant an entry, so
// the directory must belong to us and be writable by no one else.
#pragma once

#include <string>

namespace xlens {

// Why `directory` must not hold a per-user cache ("belongs to user id 0, not to this user ...",
// "can be written by every user (mode 0777); ..."), or "" when it may. With `create`, a missing
// directory is made (mode 0700, parents as needed); without it, a missing one sets `*missing`
// and returns "". The path may go through symbolic links (a cache on another disk): what it ends
// at is what is checked.
std::string PrivateDirectoryProblem(const std::string& directory, bool create, bool* missing);

// Whether `directory` may hold the persistent cache (PrivateDirectoryProblem; a missing one made
// where `create`, else not usable yet). Where it may not, `*warning` says why, the first time this
// process asks about that directory only: the compiled code's entries and the kernel choices' are
// then both kept out of it, and one message says so for both.
bool UsableCacheDirectory(const std::string& directory, bool create, std::string* warning);
// Forgets which directories UsableCacheDirectory has reported (a test that asks again).
void ForgetReportedCacheDirectories();

// The parent of `path` ("." for a bare name, "/" for a child of the root).
std::string ParentDirectory(const std::string& path);

}  // namespace xlens
