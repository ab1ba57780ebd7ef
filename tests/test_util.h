// Helpers shared by the tests: where the shared corpus is, and reading test files.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace xlens::testing {

// ../shared/corpus/hlo beside the clone; empty when absent (tests then skip with a reason).
inline std::string HloCorpusDir() {
  std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/hlo";
  return std::filesystem::is_directory(dir) ? dir : "";
}

// The *.hlo files directly in `dir`, sorted.
inline std::vector<std::string> HloFilesIn(const std::string& dir) {
  std::vector<std::string> files;
  if (dir.empty() || !std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".hlo") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

inline std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The text after "// expect error: " on the first line, or empty.
inline std::string ExpectedError(const std::string& text) {
  const std::string marker = "// expect error: ";
  if (text.rfind(marker, 0) != 0) return "";
  size_t end = text.find('\n');
  return text.substr(marker.size(), end == std::string::npos ? end : end - marker.size());
}

}  // namespace xlens::testing
