#include "compiler/tools/text_diff.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

namespace xlens::tools {
namespace {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// One line of the edit script: ' ' kept, '-' only in a, '+' only in b.
struct Edit {
  char kind;
  size_t a_line;  // 0-based, of the line in a (for ' ' and '-') or before which it goes
  size_t b_line;
  std::string_view text;
};

std::vector<Edit> EditScript(const std::vector<std::string_view>& a,
                             const std::vector<std::string_view>& b) {
  // Common head and tail first: a pass changes a few lines of a long module.
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head &&
         a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) {
    ++tail;
  }
  const size_t n = a.size() - head - tail, m = b.size() - head - tail;
  std::vector<Edit> script;
  for (size_t i = 0; i < head; ++i) script.push_back({' ', i, i, a[i]});
  constexpr size_t kMaxCells = 40'000'000;
  if (n > 0 && m > 0 && n * m <= kMaxCells) {
    // lcs[i][j]: the longest common subsequence of a[head+i..] and b[head+j..].
    std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
    auto at = [&](size_t i, size_t j) -> uint32_t& { return lcs[i * (m + 1) + j]; };
    for (size_t i = n; i-- > 0;) {
      for (size_t j = m; j-- > 0;) {
        at(i, j) = a[head + i] == b[head + j] ? at(i + 1, j + 1) + 1
                                              : std::max(at(i + 1, j), at(i, j + 1));
      }
    }
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[head + i] == b[head + j]) {
        script.push_back({' ', head + i, head + j, a[head + i]});
        ++i, ++j;
      } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
        // Removals before additions, as diff -u writes them.
        script.push_back({'-', head + i, head + j, a[head + i]});
        ++i;
      } else {
        script.push_back({'+', head + i, head + j, b[head + j]});
        ++j;
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) script.push_back({'-', head + i, head, a[head + i]});
    for (size_t j = 0; j < m; ++j) script.push_back({'+', head + n, head + j, b[head + j]});
  }
  for (size_t k = 0; k < tail; ++k) {
    script.push_back({' ', head + n + k, head + m + k, a[head + n + k]});
  }
  return script;
}

}  // namespace

std::string UnifiedDiff(std::string_view a_text, std::string_view b_text, std::string_view a_name,
                        std::string_view b_name, int context) {
  const std::vector<std::string_view> a = SplitLines(a_text), b = SplitLines(b_text);
  const std::vector<Edit> script = EditScript(a, b);
  std::string out;
  size_t k = 0;
  const size_t c = static_cast<size_t>(std::max(0, context));
  while (k < script.size()) {
    if (script[k].kind == ' ') {
      ++k;
      continue;
    }
    // A hunk: from `context` lines before this change to `context` lines after the last change
    // that is at most 2*context kept lines further on.
    size_t begin = k >= c ? k - c : 0;
    size_t end = k;
    size_t kept = 0;
    for (size_t x = k; x < script.size(); ++x) {
      if (script[x].kind == ' ') {
        if (++kept > 2 * c) break;
      } else {
        kept = 0;
        end = x;
      }
    }
    end = std::min(script.size(), end + 1 + c);
    size_t a_count = 0, b_count = 0;
    for (size_t x = begin; x < end; ++x) {
      if (script[x].kind != '+') ++a_count;
      if (script[x].kind != '-') ++b_count;
    }
    const size_t a_start = script[begin].a_line + (a_count > 0 ? 1 : 0);
    const size_t b_start = script[begin].b_line + (b_count > 0 ? 1 : 0);
    if (out.empty()) out = fmt::format("--- {}\n+++ {}\n", a_name, b_name);
    out += fmt::format("@@ -{},{} +{},{} @@\n", a_start, a_count, b_start, b_count);
    for (size_t x = begin; x < end; ++x) {
      out += script[x].kind;
      out += script[x].text;
      out += '\n';
    }
    k = end;
  }
  return out;
}

}  // namespace xlens::tools
